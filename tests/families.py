"""The registry of tfnlp's model families: one tiny model and a few deterministic batches each.

The model harness (`tests/harness.py`, `run_model_test`), the numerics
tests and the training tests (distribution, resumption, mixed precision,
TPU readiness, `.keras` restore) iterate `FAMILIES`; `MODEL_CLASSES` and
`EXPORTED_AS` say which public model classes each family covers and which
export of `tests/export/test_tf_serving.py` serves them, and
`tests/models/test_model_harness.py` fails until a new public model class is
in both. A new family is added here. Dropout is
off (replicas draw different dropout masks, so only dropout-free training is
comparable across strategies); padding and the number of weighted targets
differ between the two halves of every batch, so a loss that normalised per
replica instead of globally would show.
"""

import numpy as np
import tensorflow as tf

from tfnlp import data, models

BATCH, LENGTH, VOCABULARY = 8, 12, 50
FAMILIES = ("bert_pretrainer", "bert_classifier", "transformer_classifier", "seq2seq", "unilm", "elmo")
# The public model classes each family's tiny model is or holds.
MODEL_CLASSES = {
    "bert_pretrainer": ("BertPretrainer", "BertBackbone"),
    "bert_classifier": ("BertClassifier", "BertBackbone"),
    "transformer_classifier": ("TransformerClassifier",),
    "seq2seq": ("TransformerSeq2Seq",),
    "unilm": ("UniLM", "UniLMBackbone"),
    "elmo": ("ELMoBiLM",),
}
# Public model classes that no family trains, and where they are tested.
NOT_TRAINED = {
    "ELMoEmbedder": "the frozen biLM's mix, trained inside a task model: tests/models/test_elmo.py",
}
# Which export of tests/export/test_tf_serving.py serves each public model
# class in TF Serving's C++ loader.
EXPORTED_AS = {
    "BertBackbone": "backbone",
    "BertPretrainer": "fill_mask",
    "BertClassifier": "bert_classifier",
    "TransformerClassifier": "transformer_classifier",
    "TransformerSeq2Seq": "translator",
    "UniLM": "unilm",
    "UniLMBackbone": "unilm",
    "ELMoBiLM": "elmo",
    "ELMoEmbedder": "elmo",
}


def _mask(rng, batch=BATCH, length=LENGTH, minimum=3):
    lengths = rng.integers(minimum, length + 1, batch)
    lengths[: batch // 2] = length  # the first replica's half is longer
    return (np.arange(length)[None, :] < lengths[:, None]).astype("int32")


def _encoder_inputs(rng):
    mask = _mask(rng)
    return {
        "token_ids": rng.integers(1, VOCABULARY, (BATCH, LENGTH)).astype("int32") * mask,
        "segment_ids": (np.arange(LENGTH)[None, :] >= LENGTH // 2).astype("int32") * mask,
        "padding_mask": mask,
    }


def _batch(family, rng):
    if family in ("bert_classifier", "transformer_classifier"):
        return _encoder_inputs(rng), rng.integers(0, 3, BATCH).astype("int32")
    if family in ("bert_pretrainer", "unilm"):
        x = _encoder_inputs(rng)
        x["masked_positions"] = rng.integers(0, LENGTH, (BATCH, 4)).astype("int32")
        ids = rng.integers(1, VOCABULARY, (BATCH, 4)).astype("int32")
        weights = (rng.random((BATCH, 4)) < np.where(np.arange(BATCH) < BATCH // 2, 0.9, 0.4)[:, None])
        weights = weights.astype("float32")
        if family == "unilm":
            x["objective"] = (np.arange(BATCH) % 4).astype("int32")
            return x, ids, weights
        nsp = rng.integers(0, 2, BATCH).astype("int32")
        return x, {"mlm": ids, "nsp": nsp}, {"mlm": weights, "nsp": np.ones(BATCH, "float32")}
    if family == "seq2seq":
        source, target = _mask(rng), _mask(rng, minimum=2)
        x = {
            "encoder_token_ids": rng.integers(1, VOCABULARY, (BATCH, LENGTH)).astype("int32") * source,
            "encoder_padding_mask": source,
            "decoder_token_ids": rng.integers(1, VOCABULARY, (BATCH, LENGTH)).astype("int32") * target,
            "decoder_padding_mask": target,
        }
        return x, rng.integers(1, VOCABULARY, (BATCH, LENGTH)).astype("int32") * target, target.astype("float32")
    if family == "elmo":
        words = np.array(["<S>", "the", "cat", "sat", "on", "a", "mat", "Emma", ",", "."])
        mask = _mask(rng)
        tokens = np.where(mask == 1, words[rng.integers(0, len(words), (BATCH, LENGTH))], "")
        weights = mask.copy()
        weights[np.arange(BATCH), mask.sum(1) - 1] = 0  # the last token has no next word
        targets = {
            "next_word_ids": rng.integers(0, VOCABULARY, (BATCH, LENGTH)).astype("int32") * weights,
            "next_word_weights": weights,
            "previous_word_ids": rng.integers(0, VOCABULARY, (BATCH, LENGTH)).astype("int32") * mask,
            "previous_word_weights": mask,
        }
        return data.character_ids(tf.constant(tokens), 12).numpy(), targets
    raise ValueError(family)


def id_input(x):
    """`(name, ids, replaced)`: the first id input of a family's batch `x`, its value, and a
    function that gives `x` with that input replaced.

    `x` is a dict of inputs, or ELMo's character ids alone.
    """
    if not isinstance(x, dict):
        return "character_ids", x, lambda value: value
    name = next(k for k in ("token_ids", "encoder_token_ids") if k in x)
    return name, x[name], lambda value: {**x, name: value}


def first_batch(family, seed=0):
    """`(x, y, sample_weight)` of the first batch of `batches(family, seed=seed)` (weight None if none)."""
    x, y, *weights = _batch(family, np.random.default_rng(seed))
    return x, y, weights[0] if weights else None


def batches(family, count=3, seed=0):
    """`count` fixed batches, as a repeating dataset with the same order everywhere."""
    rng = np.random.default_rng(seed)
    items = [_batch(family, rng) for _ in range(count)]
    stacked = tf.nest.map_structure(lambda *xs: np.stack(xs), *items)
    return tf.data.Dataset.from_tensor_slices(stacked).repeat()


def model(family, dropout=0.0, dtype=None, **compile_kwargs):
    """A compiled tiny model of `family` (create it inside a strategy's scope)."""
    if family in ("bert_pretrainer", "bert_classifier"):
        backbone = models.BertBackbone(VOCABULARY, num_layers=1, num_heads=2, hidden_dim=16,
                                       dropout=dropout, max_sequence_length=LENGTH, dtype=dtype)
        built = (models.BertPretrainer(backbone) if family == "bert_pretrainer"
                 else models.BertClassifier(backbone, num_classes=3, dropout=dropout))
    elif family == "transformer_classifier":
        built = models.TransformerClassifier(VOCABULARY, 3, num_layers=1, num_heads=2, hidden_dim=16,
                                             dropout=dropout, dtype=dtype)
    elif family == "seq2seq":
        built = models.TransformerSeq2Seq(VOCABULARY, num_encoder_layers=1, num_decoder_layers=1,
                                          hidden_dim=16, num_heads=2, dropout=dropout, dtype=dtype)
    elif family == "unilm":
        backbone = models.UniLMBackbone(VOCABULARY, num_layers=1, num_heads=2, hidden_dim=16,
                                        dropout=dropout, max_sequence_length=LENGTH, dtype=dtype)
        built = models.UniLM(backbone)
    elif family == "elmo":
        built = models.ELMoBiLM(VOCABULARY, num_layers=2, units=16, projection_dim=8,
                                filters=((1, 4), (2, 4)), num_highway_layers=1, max_characters=12,
                                num_sampled=10, dropout=dropout, dtype=dtype)
    else:
        raise ValueError(family)
    built.compile(**compile_kwargs)
    return built
