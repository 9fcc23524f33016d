"""Sequence tagging (part of speech, named entities) on a BERT backbone: a tag per word."""

import keras

from tfnlp import _checks
from tfnlp.data.bert_preprocessor import BertPreprocessor
from tfnlp.data.task_preprocessor import serialized
from tfnlp.layers.dropout import Dropout
from tfnlp.models._mixins import CallsBackboneLayers
from tfnlp.models.bert_backbone import BertBackbone, bert_kernel_initializer
from tfnlp.models.bert_pretrainer import BACKBONE_INPUTS
from tfnlp.models.text_classifier import checked_preprocessor
from tfnlp.models.token_classifier import TokenClassifier, tagger_arguments
from tfnlp.training.optimizers import bert_adamw


@keras.saving.register_keras_serializable(package="tfnlp")
class BertTokenClassifier(CallsBackboneLayers, TokenClassifier):
    """A tag for every word: `Dense(num_tags)` on each word's first WordPiece in a `BertBackbone`.

    BERT's tagging recipe (Devlin et al., 2019, section 5.3): a word is
    represented by the last block's output at its first piece; the other
    pieces get no label and no loss. The model takes the backbone's inputs
    plus `word_positions` `(B, W)`, each word's first-piece position (0 for
    no word; `tfnlp.data.TaggerPreprocessor` computes them), and returns
    per-word tag logits `(B, W, num_tags)` in float32. The backbone's last
    block runs at those positions only (`BertBackbone.encode`'s
    `output_positions`). A `UniLMBackbone` tags through its bidirectional
    encoder: pass `unilm_backbone.to_bert()`.

    `compile()` without arguments uses AdamW with the BERT fine-tuning
    defaults (learning rate 2e-5), the cross-entropy of the words' tags
    averaged over the words of the whole batch
    (`tfnlp.training.TaggingCrossEntropy`: the non-word positions, tag
    `-1`, skipped; under a `tf.distribute` strategy over every replica's
    words, so N replicas train as one process; `sample_weight` `(B,)`
    weighs sentences) and word accuracy (`tfnlp.metrics.TagAccuracy`).

    Given its `preprocessor` and `tag_names`, the tagger takes words as
    well: `fit(words, tags)`, `evaluate(words, tags)`, `predict(words)`
    (logits) and `predict_tags(words)` (tag names, one per word), with
    `words` a list of sentences (lists of `str`, e.g. a CoNLL file's
    `TaggedData.words`), a `tf.string` ragged `(B, None)` batch, raw texts
    (split into BERT's words) or a `tf.data.Dataset` of `(words, tags)`
    sentences; tags are names or ids. Words past the preprocessor's
    `sequence_length` (in pieces) get no tag: `predict_tags` gives `None`
    for them and logs how many.

    With `crf=True` a linear-chain CRF (`tfnlp.layers.CRF`) reads the
    logits as its potentials: training minimises its negative
    log-likelihood of each sentence's tags (the model computes its own loss:
    `compile()` takes no `loss`), and tags are its Viterbi path over the
    sentence's words (`predict_tags`; `evaluate`'s accuracy is of that
    path). When every tag name is `O`, `B-X` or `I-X` and every `I-X` has
    its `B-X` (IOB2), transitions IOB2 forbids (`O` -> `I-X`, `B-X` ->
    `I-Y`, a sentence starting with `I-X`) are excluded from the path and
    the likelihood (`tfnlp.layers.bio_transitions`); a training tag that
    breaks IOB2 is read as seqeval and conlleval read it, an `I-X` that
    starts an entity being its `B-X`, so that its sentence still has a
    finite likelihood. Tag names with an `I-X` but no `B-X` (IOB1 files,
    whose entities start with `I-X`) get no constraints.

    Args:
        backbone: a `BertBackbone` (pretrained or not).
        num_tags: int; may be left out when `tag_names` is given.
        tag_names: optional list of tag names, one per tag (id order).
        dropout: float in [0, 1), dropout on the word vectors.
        preprocessor: optional `tfnlp.data.BertPreprocessor` (its
            `sequence_length` at most the backbone's `max_sequence_length`),
            so that the model takes words and text.
        crf: bool, a CRF over the word logits (see above).
        **kwargs: base model arguments (`name`, ...).

    Example:

    >>> from tfnlp import data
    >>> vocab = list(data.SPECIAL_TOKENS) + ["ada", "wrote", "in", "paris"]
    >>> preprocessor = data.BertPreprocessor(data.WordPieceTokenizer(vocab), 8)
    >>> backbone = BertBackbone.from_architecture("bert_tiny", vocabulary_size=len(vocab))
    >>> tagger = BertTokenClassifier(backbone, tag_names=["O", "B-PER", "B-LOC"],
    ...                              preprocessor=preprocessor)
    >>> tagger.compile()
    >>> history = tagger.fit([["Ada", "wrote"], ["in", "Paris"]], [["B-PER", "O"], ["O", "B-LOC"]],
    ...                      verbose=0)
    >>> tagger.predict([["Ada", "wrote", "in", "Paris"]], verbose=0).shape
    (1, 6, 3)
    >>> [len(tags) for tags in tagger.predict_tags([["Ada", "wrote", "in", "Paris"], ["Paris"]])]
    [4, 1]
    """

    backbone_cls = BertBackbone
    preprocessor_cls = BertPreprocessor

    def __init__(self, backbone, num_tags=None, tag_names=None, dropout=0.1, preprocessor=None,
                 crf=False, **kwargs):
        backbone = self._backbone_object(backbone)
        dropout = _checks.rate("dropout", dropout)
        preprocessor = checked_preprocessor(
            preprocessor, backbone.vocabulary_size, backbone.max_sequence_length)
        num_tags, tag_names, crf = tagger_arguments(num_tags, tag_names, crf, preprocessor)
        self.backbone = backbone
        self.output_dropout = Dropout(dropout, name="output_dropout")
        self.output_dense = keras.layers.Dense(
            num_tags, kernel_initializer=bert_kernel_initializer(), dtype="float32", name="logits")
        inputs = {name: keras.Input(shape=(None,), dtype="int32", name=name)
                  for name in (*BACKBONE_INPUTS, "word_positions")}
        words = backbone.encode({name: inputs[name] for name in BACKBONE_INPUTS},
                                output_positions=inputs["word_positions"])  # (B, W, H)
        logits = self.output_dense(self.output_dropout(words))
        self._head_init(num_tags, tag_names, crf)
        super().__init__(inputs=inputs, outputs=logits, **kwargs)
        self._tag_config(num_tags, tag_names, preprocessor)
        self.dropout = dropout

    def _head_layers(self):
        return [self.output_dropout, self.output_dense] + ([self.crf] if self.crf else [])

    def _unread_backbone_layers(self):
        return [self.backbone.pooler]

    def _checked_inputs(self, inputs):
        return self.backbone._checked_inputs(inputs, word_positions="BW")

    def _default_optimizer(self):
        return bert_adamw(2e-5)

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "backbone": keras.saving.serialize_keras_object(self.backbone),
            "num_tags": self.num_tags,
            "tag_names": self.tag_names,
            "dropout": self.dropout,
            "preprocessor": serialized(self.preprocessor),
            "crf": self.crf is not None,
        }

    @classmethod
    def from_config(cls, config):
        return cls(**config)

