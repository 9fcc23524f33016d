"""Every export family in TensorFlow's C++ SavedModel loader, the one TF Serving runs.

`tests/export/serving/tfnlp_serve.cc` loads each export with `LoadSavedModel`
and answers TF Serving's `PredictRequest`s (see its header comment). The
family test files compare its outputs with the in-memory models on
hostile inputs; this file covers all fifteen signatures at once, in float32 and
from mixed-precision models, plus what only a server does: replaying the
warm-up file, refusing a request of the wrong shape with a clear error, and
`saved_model_cli run` (TensorFlow's graph-mode Python loader).
"""

import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the ops the SavedModels use)

from tests import families
from tests.export.serving.harness import CppServer, decode_utf8
from tests.families import SAMPLING
from tfnlp import data, export, models
from tfnlp.export._common import WARMUP_BATCH_SIZES, WARMUP_FILE

TEXTS = ["The cat sat on the [MASK].", "", "émigré café 中文 \U0001F600", b"\xff\xfe broken", "x" * 1_000_000]
# The same as pre-split words (a tagger's `words`: each row's words, then "").
WORDS = [["The", "cat", "sat", "on", "the", "[MASK]", "."], [], ["émigré", "café", "中文", "\U0001F600"],
         [b"\xff\xfe", "broken"], ["x" * 1_000_000]]


def words_array(sentences):
    """`sentences` (lists of words) as the `(B, W)` bytes array a `words` input takes."""
    width = max(len(s) for s in sentences)
    return np.array([[w if isinstance(w, bytes) else w.encode() for w in s] + [b""] * (width - len(s))
                     for s in sentences], dtype=object)
SIGNATURES = families.signatures()  # export -> its signatures and their inputs (tests/families.py)


def export_every_family(vocabulary, directory, dtype=None):
    """{export: path} of every registered family's exports (tests/families.py): tiny models under
    `dtype` (a policy name or None)."""
    kit = families.ExportKit(vocabulary, dtype)
    paths = {}
    for spec in families.exports():
        keras.utils.set_random_seed(7)
        paths[spec.name] = spec.build(kit, f"{directory}/{spec.name}")
    return paths


@pytest.fixture(scope="module")
def server():
    server = CppServer()
    yield server
    server.close()


@pytest.fixture(scope="module")
def float32_exports(corpus_vocabulary, tmp_path_factory):
    return export_every_family(corpus_vocabulary, tmp_path_factory.mktemp("float32"))


@pytest.fixture(scope="module")
def mixed_exports(corpus_vocabulary, tmp_path_factory):
    return export_every_family(corpus_vocabulary, tmp_path_factory.mktemp("bf16"), "mixed_bfloat16")


@pytest.fixture(scope="module")
def loaded(server, float32_exports):
    """Every float32 export loaded once for the module: in the C++ server, which then replays
    the export's warm-up file as TF Serving does on loading (the names replayed are kept for
    the warm-up test), and in this process with `tf.saved_model.load`."""
    replayed, in_process = {}, {}
    for family, path in float32_exports.items():
        server.load(path)
        replayed[family] = [name for name, _ in server.warmup(path)]
        in_process[family] = tf.saved_model.load(path)
    yield {"replayed": replayed, "models": in_process}
    if server.alive():
        for path in float32_exports.values():
            server.forget(path)


def _inputs(names):
    """Texts for the text inputs, and varied decoding options, one per text."""
    count = len(TEXTS)
    options = {
        "temperature": np.linspace(0.5, 2.0, count, dtype=np.float32),
        "top_k": np.arange(count, dtype=np.int32) % 4,
        "top_p": np.linspace(1.0, 0.3, count, dtype=np.float32),
        "seed": np.arange(count, dtype=np.int64) * 7919 + 2**40,
        "max_new_tokens": np.arange(count, dtype=np.int32) % 5 + 1,
        "repetition_penalty": np.linspace(1.0, 2.0, count, dtype=np.float32),
    }
    texts = [n for n in names if n not in options]
    return {name: options[name] if name in options else words_array(WORDS) if name == "words"
            else TEXTS if name == texts[0] else TEXTS[::-1] for name in names}


def check_served_as_in_python(server, path, loaded, signatures, name):
    """The C++ loader (`server`, where `path` is loaded) == `loaded` (`tf.saved_model.load(path)`)
    on each of `signatures` (`{signature: [input names]}`) of export `name`; their number."""
    for signature, names in signatures.items():
        inputs = _inputs(names)
        served = server.call(path, signature, **inputs)
        as_bytes = {k: tf.constant(v) if isinstance(v, np.ndarray) else
                    tf.constant([t if isinstance(t, bytes) else t.encode() for t in v])
                    for k, v in inputs.items()}
        expected = {k: v.numpy() for k, v in loaded.signatures[signature](**as_bytes).items()}
        assert set(served) == set(expected), (name, signature)
        for output, value in expected.items():
            assert served[output].shape == value.shape, (name, signature, output)
            if value.dtype == object:
                np.testing.assert_array_equal(served[output], decode_utf8(value),
                                              err_msg=f"{name} {output}")
            else:
                assert served[output].dtype == value.dtype, (name, signature, output)
                assert value.dtype != np.float16 and value.dtype.name != "bfloat16"  # float32 out
                if value.dtype.kind == "f":
                    assert np.isfinite(served[output]).all(), (name, signature, output)
                np.testing.assert_allclose(served[output], value, atol=1e-5,
                                           err_msg=f"{name} {output}")
    return len(signatures)


@pytest.mark.parametrize("precision", ["float32", "mixed_bfloat16"])
def test_all_fifteen_signatures_serve_in_the_cpp_loader_as_in_python(request, server, float32_exports,
                                                                 precision):
    """C++ loader == `tf.saved_model.load` on every signature (the family tests tie the latter to the models)."""
    float32 = precision == "float32"
    exports = float32_exports if float32 else request.getfixturevalue("mixed_exports")
    in_process = request.getfixturevalue("loaded")["models"] if float32 else {}  # loaded for the module
    count = 0
    for family, signatures in SIGNATURES.items():
        path = exports[family]
        if float32:
            loaded = in_process[family]
        else:
            server.load(path)
            loaded = tf.saved_model.load(path)
        count += check_served_as_in_python(server, path, loaded, signatures, family)
        if not float32:
            server.forget(path)
    assert count == 19


def test_every_export_replays_its_warm_up_requests(loaded):
    for family, signatures in SIGNATURES.items():
        replayed = loaded["replayed"][family]  # right after the export was loaded
        assert replayed == [s for s in signatures for _ in WARMUP_BATCH_SIZES], family


def test_the_warm_up_file_holds_tf_serving_predict_logs(float32_exports):
    from tensorflow_serving.apis import prediction_log_pb2

    path = float32_exports["backbone"]
    records = [prediction_log_pb2.PredictionLog.FromString(r.numpy())
               for r in tf.data.TFRecordDataset(os.path.join(path, WARMUP_FILE))]
    requests = [r.predict_log.request for r in records]
    assert [r.model_spec.signature_name for r in requests] == [
        "serving_default", "serving_default", "encode_pairs", "encode_pairs"]
    assert {r.model_spec.name for r in requests} == {"backbone"}  # the export directory's name
    assert [tf.make_ndarray(r.inputs["text_a" if "text_a" in r.inputs else "text"]).shape
            for r in requests] == [(1,), (32,), (1,), (32,)]
    assert set(requests[2].inputs) == {"text_a", "text_b"}


def check_a_text_input_of_the_wrong_rank_is_refused(server, path, signatures):
    """A scalar, or the (B, 1) a REST client sends for [["a"], ["b"]], instead of (B,), in each of
    `signatures` of the export at `path` (loaded in `server`): an error naming the input."""
    for signature, names in signatures.items():
        for name in [n for n in names if n not in SAMPLING]:
            words = name == "words"  # a batch of sentences (B, W), not of texts (B,)
            for shape in ((), (2,), (2, 1, 1)) if words else ((), (2, 1)):
                inputs = {n: _inputs([n])[n][:2] if n in SAMPLING else ["one", "two"]
                          for n in names}
                inputs[name] = np.full(shape, b"text", dtype=object)
                error = server.call(path, signature, expect_error=True, **inputs)
                assert "INVALID_ARGUMENT" in error
                what = ("sentences: a string tensor of shape [batch_size, max_words]" if words else
                        "texts: a string tensor of shape [batch_size]")
                assert f"`{name}` must be a batch of {what}" in error
                assert f"got shape [{', '.join(map(str, shape))}]" in error


@pytest.mark.parametrize("family", list(SIGNATURES))
def test_a_text_input_of_the_wrong_rank_gets_an_error_naming_it(server, float32_exports, loaded, family):
    """A scalar, or the (B, 1) a REST client sends for [["a"], ["b"]], instead of (B,)."""
    check_a_text_input_of_the_wrong_rank_is_refused(server, float32_exports[family], SIGNATURES[family])


SAVED_MODEL_CLI = (
    "import sys, tensorflow_text; from tensorflow.python.tools import saved_model_cli; "
    "sys.argv[0] = 'saved_model_cli'; saved_model_cli.main()"
)


@pytest.mark.parametrize("family", ["backbone", "bert_classifier", "elmo", "translator"])
def test_saved_model_cli_run(float32_exports, loaded, family, tmp_path):
    """`saved_model_cli run` (graph-mode loader) on one signature per family, with tensorflow-text's ops."""
    path = float32_exports[family]
    texts = ["great coffee", "中文 \U0001F600", ""]
    result = subprocess.run(
        [sys.executable, "-c", SAVED_MODEL_CLI, "run", "--dir", path, "--tag_set", "serve",
         "--signature_def", "serving_default", "--input_exprs", f"text={texts!r}",
         "--outdir", str(tmp_path)],
        capture_output=True, text=True, timeout=300, check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    expected = loaded["models"][family].signatures["serving_default"](text=tf.constant(texts))
    for name, value in expected.items():
        written = np.load(tmp_path / f"{name}.npy", allow_pickle=True)
        if value.dtype == tf.string:
            np.testing.assert_array_equal(written, value.numpy())
        else:
            np.testing.assert_allclose(written, value.numpy(), atol=1e-5)


def test_the_harness_fails_where_tf_serving_fails(server, tmp_path):
    """A Keras model held by a plain tf.Module and saved as is: `tf.saved_model.load` runs it, the
    graph-mode loader does not (tensorflow/serving#2250). The harness must say so, as TF Serving does."""
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])

    class Module(tf.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32, name="x")])
        def serve(self, x):
            return {"y": self.model(x)}

    module = Module()
    path = str(tmp_path / "1")
    tf.saved_model.save(module, path, signatures={"serving_default": module.serve})
    x = np.ones((1, 3), np.float32)
    tf.saved_model.load(path).signatures["serving_default"](x=tf.constant(x))  # runs in eager
    server.load(path)
    assert "input keys do not match" in server.call(path, "serving_default", expect_error=True)
    assert "Could not find variable" in server.call(path, "serving_default", expect_error=True, x=x)


def test_a_machine_without_a_compiler_fails_with_a_clear_message(monkeypatch):
    from tests.export.serving import harness

    monkeypatch.setenv("CXX", "no-such-compiler-g++")
    with pytest.raises(harness.HarnessError, match="needs a C\\+\\+ compiler, and `no-such-compiler-g\\+\\+`"):
        harness.build_command("out")


def test_output_filter_and_the_pair_count_check_as_tf_serving_answers_them(server, float32_exports, loaded):
    path = float32_exports["bert_classifier"]  # loaded in `server` for the module
    outputs = server.call(path, "serving_default", output_filter=["label"], text=["good", ""])
    assert list(outputs) == ["label"] and outputs["label"].shape == (2,)
    error = server.call(path, "serving_default", expect_error=True, output_filter=["logits"], text=["a"])
    assert "output tensor alias not found in signature: logits" in error
    error = server.call(path, "classify_pairs", expect_error=True, text_a=["a", "b"], text_b=["c"])
    assert "`text_a` and `text_b` must hold the same number of texts" in error


def test_warmup_batch_sizes_choose_the_warm_up_requests(server, corpus_vocabulary, tmp_path):
    from tensorflow_serving.apis import prediction_log_pb2

    preprocessor = data.BertPreprocessor(data.WordPieceTokenizer(corpus_vocabulary), 16)
    model = models.TransformerClassifier(len(corpus_vocabulary), 2, num_layers=1, num_heads=2,
                                         hidden_dim=16, num_segments=1)
    path = export.export_classifier(model, str(tmp_path / "a"), preprocessor=preprocessor, labels=["n", "y"],
                                    warmup_batch_sizes=(4, 2, 1))
    records = [prediction_log_pb2.PredictionLog.FromString(r.numpy())
               for r in tf.data.TFRecordDataset(os.path.join(path, WARMUP_FILE))]
    assert [r.predict_log.request.inputs["text"].tensor_shape.dim[0].size for r in records] == [4, 2, 1]
    server.load(path)
    assert len(server.warmup(path)) == 3
    path = export.export_classifier(model, str(tmp_path / "b"), preprocessor=preprocessor, labels=["n", "y"],
                                    warmup_batch_sizes=())
    assert not os.path.exists(os.path.join(path, WARMUP_FILE))
    for bad in (0, [1, 0], "32", [2.5]):
        with pytest.raises(ValueError, match="`warmup_batch_sizes`"):
            export.export_classifier(model, str(tmp_path / "c"), preprocessor=preprocessor, labels=["n", "y"],
                                     warmup_batch_sizes=bad)
    assert not os.path.exists(tmp_path / "c" / "1")


def test_every_weight_is_saved_once(float32_exports, corpus_vocabulary):
    """Tracking the Keras variables as well as the tf.Variables they hold would save each twice."""
    shapes = tf.train.load_checkpoint(
        os.path.join(float32_exports["bert_classifier"], "variables", "variables")
    ).get_variable_to_shape_map()
    saved = sum(int(np.prod(s)) for k, s in shapes.items() if k.endswith("VARIABLE_VALUE"))
    backbone = models.BertBackbone(len(corpus_vocabulary), 1, 2, 16, max_sequence_length=16)
    classifier = models.BertClassifier(backbone, 3)
    # The classifier reads every weight but the pretraining-only ones: all of them here.
    assert saved == classifier.count_params()
