"""A test-only model family in one file: a token tagger, its batches and its export.

`FAMILY` is the one registry entry (`tests/families.py`) that adds it to the
tests; `tests/test_family_registry.py` registers it and runs on it
every per-family check the suite runs on tfnlp's own families. Nothing
else in the tree names it. It is written as a family inside tfnlp would be:
a `Task` on a `BertBackbone` (`models/`), a `ServingModule` and an export
function (`export/`). Tiny sizes: one 16-dim layer, 6 tokens per example.
"""

import keras
import numpy as np
import tensorflow as tf

from tests.families import BATCH, Export, Family, zero_weights
from tfnlp import models
from tfnlp.export._common import WARMUP_BATCH_SIZES, check_preprocessor, save
from tfnlp.export._serving_module import TEXT, ServingModule, Signature
from tfnlp.models._mixins import CallsBackboneLayers
from tfnlp.models.task import Task

LENGTH, VOCABULARY, TAGS = 6, 20, 3  # and the registry's BATCH rows, as every family
INPUTS = ("token_ids", "segment_ids", "padding_mask")


@keras.saving.register_keras_serializable(package="tfnlp_tests")
class ToyTagger(CallsBackboneLayers, Task):
    """Tag logits `(B, T, num_tags)`, float32, for every token, from a `BertBackbone`.

    Takes the backbone's inputs (bad ones fail as in `BertBackbone`).
    `compile()` without arguments: Adam, sparse cross-entropy on logits
    and accuracy, weighted (padding has weight 0).

    Args:
        backbone: a `BertBackbone`.
        num_tags: int, the number of tags.
        **kwargs: base model arguments (`name`, ...).
    """

    backbone_cls = models.BertBackbone

    def __init__(self, backbone, num_tags, **kwargs):
        backbone = self._backbone_object(backbone)
        self.backbone = backbone
        self.tag_dense = keras.layers.Dense(num_tags, dtype="float32", name="tags")
        inputs = {name: keras.Input(shape=(None,), dtype="int32", name=name) for name in INPUTS}
        super().__init__(inputs=inputs, outputs=self.tag_dense(backbone.encode(inputs)), **kwargs)
        self.num_tags = num_tags

    def _head_layers(self):
        return [self.tag_dense]

    def _unread_backbone_layers(self):
        return [self.backbone.pooler]

    def _checked_inputs(self, inputs):
        return self.backbone._checked_inputs(inputs)

    def _compile_defaults(self):
        return {
            "optimizer": keras.optimizers.Adam(1e-3),
            "loss": keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            "weighted_metrics": [keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
        }

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "backbone": keras.saving.serialize_keras_object(self.backbone),
            "num_tags": self.num_tags,
        }

    @classmethod
    def from_config(cls, config):
        return cls(**config)


class ToyTaggerServingModule(ServingModule):
    """`serving_default(text)` -> `tag_id` int32 `(B, T)`, `logits` float32 `(B, T, num_tags)`
    and `padding_mask` int32 `(B, T)`, for texts packed by a `BertPreprocessor`."""

    SIGNATURES = (Signature("serving_default", "tag", {"text": TEXT}),)

    def __init__(self, tagger, preprocessor):
        super().__init__(name="toy_tagger_serving")
        check_preprocessor(preprocessor, tagger)
        self.tagger, self.preprocessor = tagger, preprocessor

    def _serve(self, text):
        inputs = self.preprocessor(text)
        logits = tf.cast(self.tagger(inputs, training=False), tf.float32)
        return {"tag_id": tf.argmax(logits, axis=-1, output_type=tf.int32), "logits": logits,
                "padding_mask": inputs["padding_mask"]}


def export_toy_tagger(model, export_dir, *, preprocessor, version=1,
                      warmup_batch_sizes=WARMUP_BATCH_SIZES):
    """Writes `export_dir/VERSION/` serving `model` on raw text (`ToyTaggerServingModule`)."""
    return save(ToyTaggerServingModule(model, preprocessor), export_dir, version, warmup_batch_sizes)


def _batch(rng):
    lengths = rng.integers(2, LENGTH + 1, BATCH)
    mask = (np.arange(LENGTH)[None, :] < lengths[:, None]).astype("int32")
    x = {"token_ids": rng.integers(1, VOCABULARY, (BATCH, LENGTH)).astype("int32") * mask,
         "segment_ids": np.zeros((BATCH, LENGTH), "int32"), "padding_mask": mask}
    return x, rng.integers(0, TAGS, (BATCH, LENGTH)).astype("int32"), mask.astype("float32")


def _exported(kit, directory):
    backbone = models.BertBackbone(len(kit.vocabulary), 1, 2, 16, max_sequence_length=16, dtype=kit.dtype)
    return export_toy_tagger(ToyTagger(backbone, TAGS), directory, preprocessor=kit.preprocessor)


FAMILY = Family(
    "toy_tagger",
    lambda dropout, dtype: ToyTagger(models.BertBackbone(
        VOCABULARY, num_layers=1, num_heads=2, hidden_dim=16, dropout=dropout,
        max_sequence_length=LENGTH, dtype=dtype), TAGS),
    _batch, ("ToyTagger", "BertBackbone"),
    exports=(Export("toy_tagger", _exported, {"serving_default": ["text"]}, ("ToyTagger",)),),
    loss_on_padding=0.0, no_targets={"weights": zero_weights}, weighted_metrics=True,
    package="tfnlp_tests",
)
