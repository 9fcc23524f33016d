"""The serving-module base: one description gives the signatures, their checks and their warm-up."""

import numpy as np
import pytest
import tensorflow as tf

from tfnlp.export._common import save
from tfnlp.export._serving_module import (
    TEXT,
    WARMUP_TEXTS,
    Option,
    ServingModule,
    Signature,
    text_and_pair_signatures,
)


class Lengths(ServingModule):
    """Each text's length in bytes (of a pair: both sides'), times a per-text option."""

    SIGNATURES = (
        *text_and_pair_signatures("lengths", "pair_lengths"),
        Signature("scaled", "scaled", {"text": TEXT, "scale": Option(tf.float32, 0.5)},
                  method="_scaled"),
    )

    def __init__(self, takes_pairs):
        super().__init__(name="lengths")
        self.takes_pairs = takes_pairs

    def _serve(self, *texts):
        return {"length": tf.add_n([tf.strings.length(text) for text in texts])}

    def _scaled(self, text, scale):
        return {"length": tf.cast(tf.strings.length(text), tf.float32) * scale}


def test_the_signatures_follow_the_description():
    assert list(Lengths(takes_pairs=True).signatures()) == ["serving_default", "pair_lengths", "scaled"]
    module = Lengths(takes_pairs=False)
    assert list(module.signatures()) == ["serving_default", "scaled"]
    specs = module.signatures()["scaled"].input_signature
    assert [(s.name, s.dtype, s.shape.as_list()) for s in specs] == [
        ("text", tf.string, [None]), ("scale", tf.float32, [None])]
    assert module.lengths(tf.constant(["ab", ""]))["length"].numpy().tolist() == [2, 0]
    pair = module.pair_lengths(text_b=tf.constant(["c"]), text_a=tf.constant(["ab"]))  # by name too
    assert pair["length"].numpy().tolist() == [3]
    scaled = module.scaled(tf.constant(["abcd"]), tf.constant([0.25]))["length"]
    assert scaled.numpy().tolist() == [1.0]


def test_a_pairs_two_sides_are_checked_to_hold_as_many_texts():
    module = Lengths(takes_pairs=True)
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match="`text_a` and `text_b` must hold the same number of texts"):
        module.pair_lengths(tf.constant(["a", "b"]), tf.constant(["c"]))


def test_each_input_kind_has_its_warm_up_value():
    module = Lengths(takes_pairs=True)
    request = {name: tf.make_ndarray(proto) for name, proto in module.warmup_request("scaled", 5).items()}
    texts = [WARMUP_TEXTS[i % len(WARMUP_TEXTS)].encode() for i in range(5)]
    assert request["text"].tolist() == texts
    assert request["scale"].dtype == np.float32 and request["scale"].tolist() == [0.5] * 5
    pair = {name: tf.make_ndarray(proto) for name, proto in module.warmup_request("pair_lengths", 2).items()}
    assert pair["text_a"].tolist() == pair["text_b"].tolist() == texts[:2]


def test_save_writes_every_signature_served_and_its_warm_up(tmp_path):
    from tensorflow_serving.apis import prediction_log_pb2

    path = save(Lengths(takes_pairs=False), str(tmp_path / "lengths"), 1, warmup_batch_sizes=(3,))
    loaded = tf.saved_model.load(path).signatures
    assert set(loaded) == {"serving_default", "scaled"}
    records = tf.data.TFRecordDataset(f"{path}/assets.extra/tf_serving_warmup_requests")
    requests = [prediction_log_pb2.PredictionLog.FromString(r.numpy()).predict_log.request for r in records]
    assert [(r.model_spec.name, r.model_spec.signature_name, sorted(r.inputs)) for r in requests] == [
        ("lengths", "serving_default", ["text"]), ("lengths", "scaled", ["scale", "text"])]
    for request in requests:  # the saved model answers its own warm-up
        loaded[request.model_spec.signature_name](
            **{name: tf.constant(tf.make_ndarray(proto)) for name, proto in request.inputs.items()})
