"""BERT pretraining: masked LM at the masked positions + next-sentence prediction (optional)."""

import math

import keras

from tfnlp import _checks
from tfnlp.data.bert_pretraining import (  # noqa: F401  (pretraining_batch re-exported)
    BACKBONE_INPUTS,
    pretraining_batch,
)
from tfnlp.data.bert_pretraining_preprocessor import BertPretrainingPreprocessor
from tfnlp.data.task_preprocessor import preprocessing_object
from tfnlp.data.wordpiece_tokenizer import WordPieceTokenizer
from tfnlp.layers.masked_lm_head import MaskedLMHead
from tfnlp.models._mixins import CallsBackboneLayers
from tfnlp.models.bert_backbone import ACTIVATIONS, BertBackbone, bert_kernel_initializer
from tfnlp.models.task import Task
from tfnlp.training.losses import SmoothedSparseCategoricalCrossentropy
from tfnlp.training.optimizers import bert_adamw

DEFAULT_SEQUENCE_LENGTH = 128  # tokens, when a pretrainer gets a tokenizer but no length
MASKING_RATE = 0.15  # of `bert_pretraining_dataset`; sets the default `max_predictions_per_seq`


@keras.saving.register_keras_serializable(package="tfnlp")
class BertPretrainer(CallsBackboneLayers, Task):
    """A `BertBackbone` with BERT's two pretraining heads, or the masked-LM one alone.

    Masked LM: `MaskedLMHead` tied to the backbone's token embedding (and
    using its `layer_norm_epsilon`), applied only at `masked_positions`.
    Next-sentence prediction: `Dense(2)` on the pooled output. Both output
    logits (float32 under mixed precision). With `next_sentence=False`
    (RoBERTa's masked-LM-only pretraining, on
    `bert_pretraining_dataset(..., next_sentence=False)`) there is no
    next-sentence head (`next_sentence_head` is None) and the only output is
    `mlm`; the backbone's pooler, which then feeds nothing, is left out of
    the trainable weights (it keeps its values; without this, Keras would
    warn at every `fit` that `pooler/kernel` and `pooler/bias` get no
    gradients).

    The backbone's last block computes its output only where the heads read
    it, at `[CLS]` and `masked_positions` (`TransformerBlock`'s
    `output_positions`): the same logits as the full pass in a faster
    training step (`benchmarks/last_block_benchmark.py`, figures in
    `benchmarks/README.md`).

    `compile()` without arguments uses tfnlp's fused AdamW (weight decay
    0.01, not applied to LayerNorm weights and biases), sparse cross-entropy
    on each head (weight the masked-LM one with `masked_weights`, see
    `pretraining_batch`), and accuracy metrics `mlm_accuracy` and
    `nsp_accuracy` (without the next-sentence head: `mlm_accuracy`, and
    `loss` is the masked-LM loss).

    Texts: built with a `tokenizer`, `fit` and `evaluate` take documents
    (`y` stays None: the labels come from the masking): a list whose items
    are documents, each a list of sentences or a single `str` (one
    sentence), or a `tf.data.Dataset` of documents (1-D `tf.string`
    tensors of sentences, in order; a scalar is a one-sentence document).
    They are made into batches by `tfnlp.data.bert_pretraining_dataset`
    (with this model's `next_sentence`, `sequence_length` and
    `max_predictions_per_seq`, masking rate 0.15) and `pretraining_batch`.
    `fit` draws a new pipeline seed from NumPy's global generator at each
    call (`keras.utils.set_random_seed` makes it repeatable) and, with
    `shuffle=True`, reshuffles the examples at every epoch; its batches are
    all full (`batch_size`, static shapes, as the pipeline makes them), so
    a corpus of fewer examples than that gives no batch (and an empty
    history). `evaluate` (and `validation_data`, given as
    a dataset of documents or `(documents, None)`) is deterministic: seed
    0, corpus order, every example (the last batch may be smaller).
    `predict` takes token ids only. The token-id inputs work unchanged.

    Args:
        backbone: a `BertBackbone`.
        next_sentence: bool, whether to add the next-sentence head and its
            `nsp` output.
        tokenizer: optional `tfnlp.data.WordPieceTokenizer`, with at most
            the backbone's `vocabulary_size` tokens; needed for texts.
        sequence_length: int, tokens per example on texts (at least 5);
            default 128 with a tokenizer, or the backbone's
            `max_sequence_length` if shorter.
        max_predictions_per_seq: int, masked positions per example on
            texts; default `ceil(0.15 * sequence_length)` with a tokenizer.
        **kwargs: base model arguments (`name`, ...).

    Example:

    >>> backbone = BertBackbone.from_architecture("bert_tiny", vocabulary_size=1000)
    >>> pretrainer = BertPretrainer(backbone)
    >>> sorted(pretrainer.output_names)
    ['mlm', 'nsp']
    >>> BertPretrainer(backbone, next_sentence=False).output_names
    ['mlm']

    With a tokenizer, on documents:

    >>> from tfnlp import data
    >>> tokenizer = data.WordPieceTokenizer(list(data.SPECIAL_TOKENS) + ["the", "cat", "sat"])
    >>> backbone = BertBackbone(tokenizer.vocabulary_size(), 1, 2, 16, max_sequence_length=16)
    >>> pretrainer = BertPretrainer(backbone, next_sentence=False, tokenizer=tokenizer)
    >>> (pretrainer.sequence_length, pretrainer.max_predictions_per_seq)
    (16, 3)
    >>> pretrainer.compile()
    >>> history = pretrainer.fit(["the cat sat", ["the cat", "sat"]] * 8, batch_size=4, verbose=0)
    """

    backbone_cls = BertBackbone

    def __init__(self, backbone, next_sentence=True, tokenizer=None, sequence_length=None,
                 max_predictions_per_seq=None, **kwargs):
        backbone = self._backbone_object(backbone)
        tokenizer = _checked_tokenizer(tokenizer, backbone.vocabulary_size)
        sequence_length, max_predictions_per_seq = _text_sizes(
            sequence_length, max_predictions_per_seq, backbone.max_sequence_length,
            tokenizer is not None,
        )
        self.backbone = backbone
        self.next_sentence = bool(next_sentence)
        self.masked_lm_head = MaskedLMHead(
            backbone.vocabulary_size,
            token_embedding=backbone.token_embedding,
            layer_norm_epsilon=backbone.layer_norm_epsilon,
            activation=ACTIVATIONS[backbone.activation],
            kernel_initializer=bert_kernel_initializer(),
            # float32 under every policy: a bfloat16 head (as keras-hub's)
            # trains measurably worse (benchmarks/README.md, BERT quality).
            dtype="float32",
            name="mlm",
        )
        self.next_sentence_head = None
        if self.next_sentence:
            self.next_sentence_head = keras.layers.Dense(
                2, kernel_initializer=bert_kernel_initializer(), dtype="float32", name="nsp"
            )
        inputs = {
            name: keras.Input(shape=(None,), dtype="int32", name=name)
            for name in BACKBONE_INPUTS + ("masked_positions",)
        }
        # The last block runs at [CLS] (for the pooler) and the masked
        # positions only: all that the two heads read.
        cls_position = keras.ops.zeros_like(inputs["token_ids"][:, :1])
        read = keras.ops.concatenate([cls_position, inputs["masked_positions"]], axis=1)
        x = backbone.encode(inputs, output_positions=read)  # (B, 1 + P, H)
        outputs = {"mlm": self.masked_lm_head(x[:, 1:, :])}
        if self.next_sentence:
            outputs["nsp"] = self.next_sentence_head(backbone.pooler(x[:, 0, :]))
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)
        self.tokenizer = tokenizer
        self.sequence_length = sequence_length
        self.max_predictions_per_seq = max_predictions_per_seq

    def _unread_backbone_layers(self):
        return [] if self.next_sentence_head is not None else [self.backbone.pooler]

    def _head_layers(self):
        return [self.masked_lm_head] + ([self.next_sentence_head] if self.next_sentence else [])

    def _head_names(self):
        return ("mlm", "nsp") if self.next_sentence else ("mlm",)

    def _checked_inputs(self, inputs):
        return self.backbone._checked_inputs(inputs, masked_positions="BP")

    def _compile_defaults(self):
        return {
            "optimizer": bert_adamw(1e-4),
            # Keras' sparse cross-entropy and reduction (the weighted sum over
            # the batch's prediction slots), computed by tfnlp's faster kernel.
            "loss": {
                name: SmoothedSparseCategoricalCrossentropy(reduction="sum_over_batch_size")
                for name in self._head_names()
            },
            # Each head's accuracy over its weighted (real) slots. Keras names
            # a lone output's metrics without the output's name:
            # `mlm_accuracy` in the logs, as with both heads.
            "weighted_metrics": {
                name: [keras.metrics.SparseCategoricalAccuracy(
                    name="accuracy" if self.next_sentence else "mlm_accuracy"
                )]
                for name in self._head_names()
            },
        }

    # --- Texts ---

    def _task_preprocessor(self):
        return BertPretrainingPreprocessor(
            self.tokenizer, self.sequence_length, self.max_predictions_per_seq,
            next_sentence=self.next_sentence, task_name=type(self).__name__,
        )

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "backbone": keras.saving.serialize_keras_object(self.backbone),
            "next_sentence": self.next_sentence,
            "tokenizer": (
                None if self.tokenizer is None
                else keras.saving.serialize_keras_object(self.tokenizer)
            ),
            "sequence_length": self.sequence_length,
            "max_predictions_per_seq": self.max_predictions_per_seq,
        }

    @classmethod
    def from_config(cls, config):
        return cls(**config)


def _checked_tokenizer(tokenizer, vocabulary_size):
    """`tokenizer` (a `WordPieceTokenizer`, its config, or None) that fits the vocabulary."""
    tokenizer = preprocessing_object("tokenizer", tokenizer, WordPieceTokenizer)
    if tokenizer is not None and tokenizer.vocabulary_size() > vocabulary_size:
        raise ValueError(
            f"`tokenizer` has {tokenizer.vocabulary_size()} tokens but the backbone's vocabulary "
            f"has only {vocabulary_size} (`vocabulary_size`)."
        )
    return tokenizer


def _text_sizes(sequence_length, max_predictions, table, has_tokenizer):
    """`(sequence_length, max_predictions_per_seq)`, defaulted with a tokenizer and checked."""
    if has_tokenizer and sequence_length is None:
        sequence_length = min(DEFAULT_SEQUENCE_LENGTH, table)
    sequence_length = _checks.positive_int("sequence_length", sequence_length, allow_none=True)
    if sequence_length is not None:
        if sequence_length < 5:  # [CLS] A [SEP] B [SEP]
            raise ValueError(f"`sequence_length` must be at least 5, got {sequence_length}.")
        if sequence_length > table:
            raise ValueError(
                f"`sequence_length` ({sequence_length}) exceeds the backbone's position table "
                f"(`max_sequence_length`={table})."
            )
        if has_tokenizer and max_predictions is None:
            max_predictions = math.ceil(MASKING_RATE * sequence_length)
    max_predictions = _checks.positive_int(
        "max_predictions_per_seq", max_predictions, allow_none=True
    )
    return sequence_length, max_predictions
