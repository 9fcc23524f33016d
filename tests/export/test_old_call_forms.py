"""The exporters' old positional forms work for one release, with a warning that names the new form."""

import functools
import warnings

import numpy as np
import pytest
import tensorflow as tf

from tfnlp import data, export, models
from tfnlp.export._old_call_forms import takes_old_call_form

VOCABULARY = list(data.SPECIAL_TOKENS) + ["good", "bad", "food", "taste"]
TEXTS = ["good food", "", "bad [MASK] taste"]


@functools.cache
def _families():
    """{family: (exporter, model, old positional arguments after the model and the export
    directory's place among them, new keyword arguments)}: the same export both ways."""
    tokenizer = data.WordPieceTokenizer(VOCABULARY)
    preprocessor = data.BertPreprocessor(tokenizer, 8)
    backbone = models.BertBackbone(len(VOCABULARY), 1, 2, 8, intermediate_dim=16, max_sequence_length=8)
    bilm = models.ELMoBiLM(word_vocabulary_size=20, num_layers=1, units=8, projection_dim=4,
                           filters=((1, 4),), num_highway_layers=1, num_sampled=None)
    seq2seq = models.TransformerSeq2Seq(len(VOCABULARY), num_encoder_layers=1, num_decoder_layers=1,
                                        hidden_dim=8, num_heads=2, intermediate_dim=16)
    return {
        "backbone": (export.export_backbone, backbone, (preprocessor, None),
                     {"preprocessor": preprocessor}),
        "fill_mask": (export.export_fill_mask, models.BertPretrainer(backbone),
                      (preprocessor, None, 3, 2), {"preprocessor": preprocessor, "top_k": 3, "max_masks": 2}),
        "classifier": (export.export_classifier, models.BertClassifier(backbone, 2),
                       (None, preprocessor, ["n", "p"]), {"preprocessor": preprocessor, "labels": ["n", "p"]}),
        "elmo": (export.export_elmo, models.ELMoEmbedder(bilm), (None, 6), {"max_tokens": 6}),
        "seq2seq": (export.export_seq2seq, seq2seq, (tokenizer, tokenizer, None, 6, 4, 2),
                    {"source_tokenizer": tokenizer, "target_tokenizer": tokenizer, "source_length": 6,
                     "max_length": 4, "beam_size": 2, "sampling": False}),
    }


def _served(path):
    """The export's signature names, and what `serving_default` answers to `TEXTS`."""
    signatures = tf.saved_model.load(path).signatures
    outputs = signatures["serving_default"](text=tf.constant(TEXTS))
    return sorted(signatures), {name: value.numpy() for name, value in outputs.items()}


FAMILIES = ["backbone", "fill_mask", "classifier", "elmo", "seq2seq"]


@pytest.mark.parametrize("family", FAMILIES)
def test_the_old_form_reaches_the_exporter_with_the_new_forms_arguments(family):
    """The old form's arguments, as the exporter receives them, are the new form's: the
    decorator's rule around a recorder in place of each exporter (one export below is real)."""
    exporter, model, old, new = _families()[family]
    received = []

    def record(*args, **kwargs):
        received.append((args, kwargs))

    record.__name__ = exporter.__name__
    recorder = takes_old_call_form(*exporter.old_call_form)(record)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        recorder(model, "new_dir", **new)
    assert not [w for w in caught if issubclass(w.category, DeprecationWarning)]
    old = tuple("old_dir" if value is None else value for value in old)
    with pytest.warns(DeprecationWarning, match=rf"`{exporter.__name__}\(.*\)` is deprecated .* call "
                                                rf"`{exporter.__name__}\(model, export_dir, "):
        recorder(model, *old, **({"sampling": False} if family == "seq2seq" else {}))
    (new_args, new_kwargs), (old_args, old_kwargs) = received
    assert new_args == (model, "new_dir") and old_args == ()
    assert old_kwargs == {"model": model, "export_dir": "old_dir", **new_kwargs}


def test_the_old_form_exports_the_same_with_a_warning_and_the_new_form_warns_not(tmp_path):
    exporter, model, old, new = _families()["classifier"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        path = exporter(model, str(tmp_path / "new"), **new, warmup_batch_sizes=())
    assert not [w for w in caught if issubclass(w.category, DeprecationWarning)]
    old = tuple(str(tmp_path / "old") if value is None else value for value in old)
    with pytest.warns(DeprecationWarning, match=r"`export_classifier\(.*\)` is deprecated .* call "
                                                r"`export_classifier\(model, export_dir, "):
        old_path = exporter(model, *old, warmup_batch_sizes=())
    assert old_path == str(tmp_path / "old" / "1")
    (names, outputs), (old_names, old_outputs) = _served(path), _served(old_path)
    assert old_names == names
    for name, value in outputs.items():
        np.testing.assert_array_equal(old_outputs[name], value, err_msg=name)


def test_the_old_name_of_the_first_argument_warns(tmp_path):
    exporter, model, _, new = _families()["classifier"]
    with pytest.warns(DeprecationWarning, match=r"`export_classifier\(classifier\)` is deprecated"):
        path = exporter(classifier=model, export_dir=str(tmp_path), **new, warmup_batch_sizes=())
    assert set(tf.saved_model.load(path).signatures) == {"serving_default", "classify_pairs"}


def test_calls_in_neither_form_are_refused_by_name(tmp_path):
    exporter, model, _, new = _families()["backbone"]
    with pytest.raises(TypeError, match="`export_dir` must be a directory path, got BertPreprocessor"):
        export.export_classifier(model, new["preprocessor"], str(tmp_path))
    with pytest.raises(TypeError, match="give the other arguments by keyword"):
        exporter(model, str(tmp_path), new["preprocessor"])
    with pytest.raises(TypeError, match="got multiple values for argument 'preprocessor'"):
        exporter(model, new["preprocessor"], str(tmp_path), preprocessor=new["preprocessor"])
    with pytest.raises(TypeError, match="at most 5 positional arguments"):
        exporter(model, new["preprocessor"], str(tmp_path), 1, (), "more")
    with pytest.raises(ValueError, match="`preprocessor` is required: this BertBackbone carries none"):
        exporter(model, str(tmp_path))
    assert not list(tmp_path.iterdir())
