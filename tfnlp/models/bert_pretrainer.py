"""BERT pretraining: masked LM at the masked positions + next-sentence prediction (optional)."""

import keras

from tfnlp.layers.masked_lm_head import MaskedLMHead
from tfnlp.models._mixins import BuildsOptimizerFirst
from tfnlp.models._mixins import CallsBackboneLayers
from tfnlp.models._mixins import ChecksInputs
from tfnlp.models._mixins import RestoresCompile
from tfnlp.models._mixins import StepsWaitForData
from tfnlp.models.bert_backbone import BertBackbone
from tfnlp.models.bert_backbone import bert_kernel_initializer
from tfnlp.training.losses import SmoothedSparseCategoricalCrossentropy
from tfnlp.training.optimizers import bert_adamw
from tfnlp.training.optimizers import with_loss_scaling

BACKBONE_INPUTS = ("token_ids", "segment_ids", "padding_mask")


def pretraining_batch(batch):
    """Splits a `tfnlp.data.bert_pretraining_dataset` batch into `(x, y, sample_weight)`.

    Use as `dataset.map(pretraining_batch)` before `BertPretrainer.fit`: the
    masked-LM loss is weighted by `masked_weights`, so padded prediction
    slots count for nothing.

    Args:
        batch: a dict from `bert_pretraining_dataset`.

    Returns:
        `(x, y, sample_weight)`: the model inputs, `{"mlm", "nsp"}` labels and
        their weights; `{"mlm"}` only for a batch without
        `next_sentence_labels` (`bert_pretraining_dataset(...,
        next_sentence=False)`, for a `BertPretrainer(..., next_sentence=False)`).
    """
    x = {name: batch[name] for name in BACKBONE_INPUTS + ("masked_positions",)}
    y = {"mlm": batch["masked_ids"]}
    weights = {"mlm": batch["masked_weights"]}
    if "next_sentence_labels" in batch:
        y["nsp"] = batch["next_sentence_labels"]
        weights["nsp"] = keras.ops.ones_like(batch["next_sentence_labels"])
    return x, y, weights


@keras.saving.register_keras_serializable(package="tfnlp")
class BertPretrainer(
    CallsBackboneLayers, BuildsOptimizerFirst, StepsWaitForData, RestoresCompile, ChecksInputs,
    keras.Model,
):
    """A `BertBackbone` with BERT's two pretraining heads, or the masked-LM one alone.

    Masked LM: `MaskedLMHead` tied to the backbone's token embedding, applied
    only at `masked_positions`. Next-sentence prediction: `Dense(2)` on the
    pooled output. Both output logits (float32 under mixed precision). With
    `next_sentence=False` (RoBERTa's masked-LM-only pretraining, on
    `bert_pretraining_dataset(..., next_sentence=False)`) there is no
    next-sentence head (`next_sentence_head` is None) and the only output is
    `mlm`; the backbone's pooler, which then feeds nothing, is left out of
    the trainable weights (it keeps its values; without this, Keras would
    warn at every `fit` that `pooler/kernel` and `pooler/bias` get no
    gradients).

    The backbone's last block computes its output only where the heads read
    it, at `[CLS]` and `masked_positions` (`TransformerBlock`'s
    `output_positions`): the same logits as the full pass, and a BERT-tiny
    training step about 1.2x faster (`benchmarks/README.md`).

    `compile()` without arguments uses tfnlp's fused AdamW (weight decay
    0.01, not applied to LayerNorm weights and biases), sparse cross-entropy
    on each head (weight the masked-LM one with `masked_weights`, see
    `pretraining_batch`), and accuracy metrics `mlm_accuracy` and
    `nsp_accuracy` (without the next-sentence head: `mlm_accuracy`, and
    `loss` is the masked-LM loss).

    Args:
        backbone: a `BertBackbone`.
        next_sentence: bool, whether to add the next-sentence head and its
            `nsp` output.
        **kwargs: base model arguments (`name`, ...).

    Example:

    >>> backbone = BertBackbone.from_preset("bert_tiny", vocabulary_size=1000)
    >>> pretrainer = BertPretrainer(backbone)
    >>> sorted(pretrainer.output_names)
    ['mlm', 'nsp']
    >>> BertPretrainer(backbone, next_sentence=False).output_names
    ['mlm']
    """

    def __init__(self, backbone, next_sentence=True, **kwargs):
        if isinstance(backbone, dict):
            backbone = keras.saving.deserialize_keras_object(backbone)
        if not isinstance(backbone, BertBackbone):
            raise ValueError(f"`backbone` must be a BertBackbone, got {type(backbone).__name__}.")
        self.backbone = backbone
        self.next_sentence = bool(next_sentence)
        self.masked_lm_head = MaskedLMHead(
            backbone.vocabulary_size,
            token_embedding=backbone.token_embedding,
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
        x = backbone._encode(inputs, output_positions=read)  # (B, 1 + P, H)
        outputs = {"mlm": self.masked_lm_head(x[:, 1:, :])}
        if self.next_sentence:
            outputs["nsp"] = self.next_sentence_head(backbone.pooler(x[:, 0, :]))
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)

    @property
    def trainable_weights(self):
        weights = super().trainable_weights
        if self.next_sentence_head is not None:
            return weights
        pooler = {id(w) for w in self.backbone.pooler.weights}  # no NSP head reads it
        return [w for w in weights if id(w) not in pooler]

    @property
    def trainable_variables(self):
        return self.trainable_weights

    def _head_layers(self):
        return [self.masked_lm_head] + ([self.next_sentence_head] if self.next_sentence else [])

    def _head_names(self):
        return ("mlm", "nsp") if self.next_sentence else ("mlm",)

    def _checked_inputs(self, inputs):
        return self.backbone._checked_inputs(inputs, masked_positions="BP")

    def compile(self, optimizer="auto", loss="auto", weighted_metrics="auto", **kwargs):
        if optimizer == "auto":
            optimizer = bert_adamw(1e-4)
        if loss == "auto":
            # Keras' sparse cross-entropy and reduction (the weighted sum over
            # the batch's prediction slots), computed by tfnlp's faster kernel.
            loss = {
                name: SmoothedSparseCategoricalCrossentropy(reduction="sum_over_batch_size")
                for name in self._head_names()
            }
        if weighted_metrics == "auto":
            weighted_metrics = {
                name: [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]
                for name in self._head_names()
            }
            if not self.next_sentence:
                # Keras names a lone output's metrics without the output's
                # name: `mlm_accuracy` in the logs, as with both heads.
                weighted_metrics = {"mlm": [keras.metrics.SparseCategoricalAccuracy(name="mlm_accuracy")]}
        optimizer = with_loss_scaling(optimizer, self)  # mixed_float16
        super().compile(optimizer=optimizer, loss=loss, weighted_metrics=weighted_metrics, **kwargs)

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "backbone": keras.saving.serialize_keras_object(self.backbone),
            "next_sentence": self.next_sentence,
        }

    @classmethod
    def from_config(cls, config):
        return cls(**config)
