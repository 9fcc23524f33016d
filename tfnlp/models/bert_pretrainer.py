"""BERT pretraining: masked LM at the masked positions + next-sentence prediction."""

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
        their weights.
    """
    x = {name: batch[name] for name in BACKBONE_INPUTS + ("masked_positions",)}
    y = {"mlm": batch["masked_ids"], "nsp": batch["next_sentence_labels"]}
    weights = {"mlm": batch["masked_weights"], "nsp": keras.ops.ones_like(batch["next_sentence_labels"])}
    return x, y, weights


@keras.saving.register_keras_serializable(package="tfnlp")
class BertPretrainer(
    CallsBackboneLayers, BuildsOptimizerFirst, StepsWaitForData, RestoresCompile, ChecksInputs,
    keras.Model,
):
    """A `BertBackbone` with BERT's two pretraining heads.

    Masked LM: `MaskedLMHead` tied to the backbone's token embedding, applied
    only at `masked_positions`. Next-sentence prediction: `Dense(2)` on the
    pooled output. Both output logits (float32 under mixed precision).

    The backbone's last block computes its output only where the heads read
    it, at `[CLS]` and `masked_positions` (`TransformerBlock`'s
    `output_positions`): the same logits as the full pass, and a BERT-tiny
    training step about 1.2x faster (`benchmarks/README.md`).

    `compile()` without arguments uses tfnlp's fused AdamW (weight decay
    0.01, not applied to LayerNorm weights and biases), sparse cross-entropy
    on both heads (weight the masked-LM one with `masked_weights`, see
    `pretraining_batch`), and accuracy metrics `mlm_accuracy` and
    `nsp_accuracy`.

    Args:
        backbone: a `BertBackbone`.
        **kwargs: base model arguments (`name`, ...).

    Example:

    >>> backbone = BertBackbone.from_preset("bert_tiny", vocabulary_size=1000)
    >>> pretrainer = BertPretrainer(backbone)
    >>> sorted(pretrainer.output_names)
    ['mlm', 'nsp']
    """

    def __init__(self, backbone, **kwargs):
        if isinstance(backbone, dict):
            backbone = keras.saving.deserialize_keras_object(backbone)
        if not isinstance(backbone, BertBackbone):
            raise ValueError(f"`backbone` must be a BertBackbone, got {type(backbone).__name__}.")
        self.backbone = backbone
        self.masked_lm_head = MaskedLMHead(
            backbone.vocabulary_size,
            token_embedding=backbone.token_embedding,
            kernel_initializer=bert_kernel_initializer(),
            # float32 under every policy: a bfloat16 head (as keras-hub's)
            # trains measurably worse (benchmarks/README.md, BERT quality).
            dtype="float32",
            name="mlm",
        )
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
        mlm = self.masked_lm_head(x[:, 1:, :])
        nsp = self.next_sentence_head(backbone.pooler(x[:, 0, :]))
        super().__init__(inputs=inputs, outputs={"mlm": mlm, "nsp": nsp}, **kwargs)

    def _head_layers(self):
        return [self.masked_lm_head, self.next_sentence_head]

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
                for name in ("mlm", "nsp")
            }
        if weighted_metrics == "auto":
            weighted_metrics = {
                "mlm": [keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
                "nsp": [keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
            }
        optimizer = with_loss_scaling(optimizer, self)  # mixed_float16
        super().compile(optimizer=optimizer, loss=loss, weighted_metrics=weighted_metrics, **kwargs)

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "backbone": keras.saving.serialize_keras_object(self.backbone),
        }

    @classmethod
    def from_config(cls, config):
        return cls(**config)
