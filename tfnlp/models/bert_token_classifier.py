"""Sequence tagging (part of speech, named entities) on a BERT backbone: a tag per word."""

import logging

import keras
import numpy as np
import tensorflow as tf

from tfnlp import _checks
from tfnlp.data.bert_preprocessor import BertPreprocessor
from tfnlp.data.tagger_preprocessor import TaggerPreprocessor
from tfnlp.data.task_preprocessor import checked_batch_size, serialized
from tfnlp.layers.crf import CRF, bio_transitions
from tfnlp.layers.dropout import Dropout
from tfnlp.metrics.tagging import TagAccuracy
from tfnlp.models._mixins import CallsBackboneLayers
from tfnlp.models.bert_backbone import BertBackbone, bert_kernel_initializer
from tfnlp.models.bert_pretrainer import BACKBONE_INPUTS
from tfnlp.models.task import Task
from tfnlp.models.text_classifier import checked_preprocessor
from tfnlp.training.distribute import global_sum
from tfnlp.training.losses import TaggingCrossEntropy
from tfnlp.training.optimizers import bert_adamw

_LOG = logging.getLogger(__name__)


def tagger_size(num_tags, tag_names):
    """`(num_tags, tag_names)` checked and made consistent: either may be given, or both."""
    return _checks.count_and_names(num_tags, tag_names, "num_tags", "tag_names", "tag", minimum=2)


def _iob2_begins(tag_names):
    """`begins[t]`, the id of `B-X` for tag `t` = `I-X` (else `t`) when every tag name is IOB2's
    (`O`, `B-X`, `I-X`) and every `I-X` has its `B-X`; else None (no IOB2 constraints: IOB1
    files, say, whose entities may start with `I-X`)."""
    if tag_names is None or not all(
            name == "O" or (name[:2] in ("B-", "I-") and len(name) > 2) for name in tag_names):
        return None
    begins = [tag_names.index("B-" + name[2:]) if name.startswith("I-") and "B-" + name[2:] in tag_names
              else i for i, name in enumerate(tag_names)]
    if any(name.startswith("I-") and begins[i] == i for i, name in enumerate(tag_names)):
        return None
    return begins


@keras.saving.register_keras_serializable(package="tfnlp")
class BertTokenClassifier(CallsBackboneLayers, Task):
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
        num_tags, tag_names = tagger_size(num_tags, tag_names)
        dropout = _checks.rate("dropout", dropout)
        crf = _checks.boolean("crf", crf)
        preprocessor = checked_preprocessor(
            preprocessor, backbone.vocabulary_size, backbone.max_sequence_length)
        if preprocessor is not None and tag_names is None:
            raise ValueError("A tagger with a `preprocessor` needs `tag_names` (the tags it reads and "
                             "writes).")
        self.backbone = backbone
        self.output_dropout = Dropout(dropout, name="output_dropout")
        self.output_dense = keras.layers.Dense(
            num_tags, kernel_initializer=bert_kernel_initializer(), dtype="float32", name="logits")
        inputs = {name: keras.Input(shape=(None,), dtype="int32", name=name)
                  for name in (*BACKBONE_INPUTS, "word_positions")}
        words = backbone.encode({name: inputs[name] for name in BACKBONE_INPUTS},
                                output_positions=inputs["word_positions"])  # (B, W, H)
        logits = self.output_dense(self.output_dropout(words))
        self.crf = None
        if crf:  # used by the loss and the decoding, not by the output (the logits)
            begins = _iob2_begins(tag_names)
            self.crf = CRF(num_tags, allowed_transitions=None if begins is None else bio_transitions(tag_names),
                           name="crf")
            self.crf.build((None, None, num_tags))
            self._iob2_begins = begins
        super().__init__(inputs=inputs, outputs=logits, **kwargs)
        self.num_tags = num_tags
        self.tag_names = tag_names
        self.dropout = dropout
        self.preprocessor = preprocessor

    def _head_layers(self):
        return [self.output_dropout, self.output_dense] + ([self.crf] if self.crf else [])

    def _unread_backbone_layers(self):
        return [self.backbone.pooler]

    def _checked_inputs(self, inputs):
        return self.backbone._checked_inputs(inputs, word_positions="BW")

    def _compile_defaults(self):
        return {
            "optimizer": bert_adamw(2e-5),
            "loss": None if self.crf else TaggingCrossEntropy(),  # a CRF: its own (`compute_loss`)
            "metrics": [TagAccuracy()],
        }

    def compile(self, optimizer="auto", loss="auto", **kwargs):
        if self.crf is not None and not (loss is None or (isinstance(loss, str) and loss == "auto")):
            raise ValueError(f"This {type(self).__name__} has a CRF, whose negative log-likelihood is "
                             "its loss: compile it without `loss`.")
        super().compile(optimizer=optimizer, loss=loss, **kwargs)

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        if self.crf is None:
            return super().compute_loss(x, y, y_pred, sample_weight, training=training)
        loss = self._crf_loss(y, y_pred, sample_weight)
        return loss + tf.add_n(self.losses) if self.losses else loss

    def _crf_loss(self, y, y_pred, sample_weight):
        # The negative log-likelihood of each sentence's tags (its words: tag >= 0), summed
        # over the batch's sentences (weighted) / the number of sentences of the global batch
        # (every replica's), so that the replicas' losses add up to the one-process loss
        # however the sentences fall between them; an empty batch gives 0.
        y = tf.cast(y, tf.int32)
        tags = self._iob2_repaired(tf.maximum(y, 0))
        nll = -self.crf.log_likelihood(y_pred, tags, padding_mask=y >= 0)
        if sample_weight is not None:
            nll *= tf.reshape(tf.cast(sample_weight, nll.dtype), [-1])
        return tf.math.divide_no_nan(tf.reduce_sum(nll), global_sum(tf.cast(tf.shape(nll)[0], nll.dtype)))

    def _iob2_repaired(self, tags):
        """`tags` `(B, W)` with each `I-X` that IOB2 forbids where it is (first, after `O` or
        after another type) replaced by `B-X`: the entity seqeval reads there."""
        if self._iob2_begins is None:
            return tags
        allowed = tf.constant(self.crf.allowed_transitions["transitions"])
        start = tf.constant(self.crf.allowed_transitions["start"])
        begin = tf.constant(self._iob2_begins, tf.int32)
        before = tf.concat([tf.fill([tf.shape(tags)[0], 1], -1), tags[:, :-1]], axis=1)
        forbidden = tf.where(before < 0, tf.gather(~start, tags),
                             ~tf.gather_nd(allowed, tf.stack([tf.maximum(before, 0), tags], -1)))
        return tf.where(forbidden, tf.gather(begin, tags), tags)

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        if self.crf is not None:  # the accuracy of the CRF's best path
            y_pred = self.crf(y_pred, padding_mask=tf.cast(y, tf.int32) >= 0)
        return super().compute_metrics(x, y, y_pred, sample_weight)

    # --- Words and texts ---

    def _task_preprocessor(self):
        if self.preprocessor is None:
            return None
        return TaggerPreprocessor(self.preprocessor, self.tag_names, task_name=type(self).__name__)

    def predict_tags(self, x, batch_size=None, verbose=0, untagged=None):
        """The tag name of every word of each sentence (`untagged` for words past the length).

        Args:
            x: sentences as lists of words, a `tf.string` ragged `(B, None)`
                batch, or raw texts (split into BERT's words:
                `preprocessor.tokenizer.tokenize_words` gives them and their
                offsets).
            batch_size: int, sentences per batch (default 32).
            verbose: as for `predict` (default 0, silent).
            untagged: the tag of the words past the preprocessor's
                `sequence_length`: None (default), or e.g. `"O"` for entity
                metrics (`tfnlp.metrics.entity_report`).

        Returns:
            A list (one per sentence) of lists of tag names.
        """
        preprocessor = self._task_preprocessor()
        if preprocessor is None:
            raise ValueError(f"This {type(self).__name__} has no `preprocessor` and `tag_names`: "
                             "`predict_tags` reads words.")
        if isinstance(x, (list, tuple)) and not x:
            return []
        words = preprocessor.texts(x)
        if words is None or isinstance(x, tf.data.Dataset):
            raise ValueError("`predict_tags` takes sentences (lists of words) or raw texts in memory.")
        preprocessor.check("predict")
        batch_size = checked_batch_size(batch_size)
        chunk = max(batch_size, preprocessor.chunk_size)
        counts, ids, positions = [], [], []
        for start in range(0, int(words.shape[0]), chunk):
            pieces = preprocessor.word_pieces(words[start:start + chunk])  # tokenized once
            counts.append(pieces.row_lengths().numpy())
            arrays = {name: np.asarray(value) for name, value in preprocessor.packed(pieces).items()}
            logits = keras.Model.predict(self, arrays, batch_size=batch_size, verbose=verbose)
            ids.append(self._best_tags(logits, arrays["word_positions"] > 0))
            positions.append(arrays["word_positions"])
        if not counts:  # no sentence
            return []
        counts, ids, positions = (np.concatenate(c) for c in (counts, ids, positions))
        tags = []
        for count, row, row_positions in zip(counts, ids, positions, strict=True):
            tagged = int(np.sum(row_positions > 0))
            tags.append([self.tag_names[t] for t in row[:tagged]] + [untagged] * (int(count) - tagged))
        missing = int(np.sum(counts) - np.sum(positions > 0))
        if missing:
            _LOG.warning(
                "%d of %d words are past the preprocessor's sequence_length (%d pieces with [CLS] "
                "and [SEP]) and have no tag (%r).", missing, int(np.sum(counts)),
                self.preprocessor.sequence_length, untagged)
        return tags

    def _best_tags(self, logits, word_mask):
        """The predicted tag ids `(B, W)` of `logits` `(B, W, num_tags)`: the CRF's best path,
        or each word's own best tag."""
        if self.crf is not None:
            return self.crf(tf.constant(logits), padding_mask=tf.constant(word_mask)).numpy()
        return np.argmax(logits, axis=-1)

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

