"""The exported text-to-text model, served without tfnlp: `tf.saved_model.load` and TF Serving's C++ loader."""

import keras
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text as tf_text

from tests.export.fresh_process import (
    BACKENDS,
    ServingProcess,
    check_any_batch_is_served,
    requests,
)
from tests.export.serving.harness import CppServer
from tfnlp import data, export, models
from tfnlp.models.unilm import prompt_ids

SOURCE_LENGTH, MAX_LENGTH = 12, 9
TEXTS = ["In the beginning God created the heaven and the earth.", "", "   ", "x " * 500_000,
         b"broken \xff\xfe utf-8", "emoji \U0001F600 中文 \u202eright-to-left\u0301",
         "nul\x00 and \x07 control"]


@pytest.fixture(scope="module", params=["transformer", "unilm"])
def exported(request, tmp_path_factory, corpus_vocabulary):
    keras.utils.set_random_seed(1234)
    if request.param == "transformer":
        source = data.WordPieceTokenizer(corpus_vocabulary)
        target = data.WordPieceTokenizer(corpus_vocabulary[:3000], lower_case=False)
        model = models.TransformerSeq2Seq(
            len(corpus_vocabulary), 3000, num_encoder_layers=1, num_decoder_layers=2,
            hidden_dim=32, num_heads=4, dropout=0.0,
        )
        bias, end_bias = model.token_logits.bias, 4.0
    else:
        source = target = data.WordPieceTokenizer(corpus_vocabulary)
        model = models.UniLM(models.UniLMBackbone(
            len(corpus_vocabulary), 2, 4, 32, dropout=0.0, max_sequence_length=32))
        bias, end_bias = model.masked_lm_head.output_bias, 0.3
    # Favour the end token so that this random model's outputs have different lengths.
    bias.assign(tf.tensor_scatter_nd_update(bias, [[target.sep_id]], [end_bias]))
    directory = tmp_path_factory.mktemp("saved_models") / "translate"
    settings = {"max_length": MAX_LENGTH, "beam_size": 3, "length_penalty": 0.6,
                "no_repeat_ngram_size": 3}
    path = export.export_seq2seq(model, str(directory), source_tokenizer=source, target_tokenizer=target,
                                 source_length=SOURCE_LENGTH, **settings)
    return path, model, source, target, settings


@pytest.fixture(scope="module")
def expected():
    """`expected_outputs` with the export's own settings, computed once per model and batch."""
    done = {}

    def outputs(exported, texts):
        path, model, source, target, settings = exported
        key = (path, tuple(texts))  # each parameter's export has its own directory
        if key not in done:
            done[key] = expected_outputs(model, source, target, texts, settings)
        return done[key]

    return outputs


def expected_outputs(model, source, target, texts, settings):
    if isinstance(model, models.UniLM):
        packed = data.BertPreprocessor(source, SOURCE_LENGTH)(tf.constant(texts))
        return model.generate(packed["token_ids"], packed["padding_mask"], end_id=target.sep_id,
                              mask_id=target.mask_id, **settings)
    tokens = source(tf.constant(texts))[:, : SOURCE_LENGTH - 1]
    tokens = tf.concat([tokens, tf.fill([tokens.nrows(), 1], source.sep_id)], 1)
    ids, mask = tf_text.pad_model_inputs(tokens, SOURCE_LENGTH)
    return model.generate(ids, mask, start_id=target.cls_id, end_id=target.sep_id, **settings)


@pytest.mark.parametrize("backend", BACKENDS)
def test_fresh_process_matches_in_memory_at_two_batch_sizes(exported, processes, expected, backend):
    path, _, _, target, _ = exported
    batches = [TEXTS[:1], TEXTS]
    served = requests(processes(path, backend),
                      [{"signature": "serving_default", "inputs": {"text": b}} for b in batches])
    for batch, result in zip(batches, served, strict=True):
        expected_batch = expected(exported, batch)
        np.testing.assert_array_equal(result["token_ids"], expected_batch["token_ids"])
        np.testing.assert_array_equal(result["lengths"], expected_batch["lengths"])
        np.testing.assert_allclose(result["scores"], expected_batch["scores"], atol=1e-5)
        texts = [t.encode() if isinstance(t, str) else t
                 for t in target.detokenize(expected_batch["token_ids"]).numpy()]
        assert result["output_text"] == [t.decode("utf-8", "replace") for t in texts]


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_input_terminates_with_finite_scores(exported, processes, backend):
    process = processes(exported[0], backend)
    (result,) = requests(process, [{"signature": "serving_default", "inputs": {"text": TEXTS}}])
    lengths = np.array(result["lengths"])
    assert np.all((lengths >= 1) & (lengths <= MAX_LENGTH))
    assert len(set(lengths.tolist())) > 1, "the end token must be able to stop decoding"
    assert np.all(np.isfinite(result["scores"]))
    assert np.array(result["token_ids"]).shape == (len(TEXTS), MAX_LENGTH)


def _terminated(outputs, batch):
    assert outputs["token_ids"].shape == (batch, MAX_LENGTH) and outputs["output_text"].shape == (batch,)
    assert ((outputs["lengths"] >= 1) & (outputs["lengths"] <= MAX_LENGTH)).all()
    assert (outputs["scores"] <= 0).all()  # log-probabilities (length-normalised)
    beyond = np.arange(MAX_LENGTH)[None, :] >= outputs["lengths"][:, None]
    assert not outputs["token_ids"][beyond].any()  # padding after the end


@pytest.mark.parametrize("backend", BACKENDS)
def test_any_batch_of_any_text_terminates_within_max_length(exported, processes, backend):
    check_any_batch_is_served(processes(exported[0], backend), "serving_default", ["text"], _terminated)


def test_empty_batch(exported, processes):
    outputs = processes(exported[0], "python")("serving_default", text=[])
    assert outputs["token_ids"].shape == (0, MAX_LENGTH) and outputs["output_text"].shape == (0,)


def test_bad_arguments_are_refused(exported, tmp_path, corpus_vocabulary):
    _, model, source, target, _ = exported
    other = data.WordPieceTokenizer(corpus_vocabulary[:2000])
    with pytest.raises(ValueError, match="_tokenizer"):
        export.export_seq2seq(model, str(tmp_path), source_tokenizer=source, target_tokenizer=other)
    tokenizers = {"source_tokenizer": source, "target_tokenizer": target}
    with pytest.raises(ValueError, match="beam_size"):
        export.export_seq2seq(model, str(tmp_path), **tokenizers, source_length=SOURCE_LENGTH,
                              max_length=9, beam_size=0)
    with pytest.raises(ValueError, match="model"):
        export.export_seq2seq(keras.Sequential(), str(tmp_path), **tokenizers)
    with pytest.raises(ValueError, match="jit_compile"):
        export.export_seq2seq(model, str(tmp_path), **tokenizers, jit_compile="auto")
    too_short = 2 if isinstance(model, models.UniLM) else 1  # no room for a token
    with pytest.raises(ValueError, match="source_length"):
        export.export_seq2seq(model, str(tmp_path), **tokenizers, source_length=too_short, max_length=9)
    with pytest.raises(ValueError, match="`length_penalty` must be a finite number"):
        export.export_seq2seq(model, str(tmp_path), **tokenizers, source_length=SOURCE_LENGTH,
                              max_length=9, beam_size=2, length_penalty=float("nan"))
    if isinstance(model, models.UniLM):  # a position table of 32
        for max_length in (20, np.int64(13)):  # NumPy ints were let through, to fail on requests
            with pytest.raises(ValueError, match="position table"):
                export.export_seq2seq(model, str(tmp_path), **tokenizers, source_length=20,
                                      max_length=max_length)
        # The last [MASK] of a full-length source sits at position 20 + 12 - 1 = 31.
        module = export.Seq2SeqServingModule(model, source, target, 20, 12)
        outputs = module.generate(tf.constant([" ".join(["the"] * 40), "a"]))
        assert outputs["token_ids"].shape == (2, 12)


@pytest.fixture(scope="module")
def xla_exported(exported, tmp_path_factory):
    """The same model exported with its decoding loop marked for XLA (one warm-up size)."""
    _, model, source, target, settings = exported
    return export.export_seq2seq(model, str(tmp_path_factory.mktemp("xla") / "xla"),
                                 source_tokenizer=source, target_tokenizer=target,
                                 source_length=SOURCE_LENGTH, jit_compile=True,
                                 warmup_batch_sizes=(3,), **settings)


def test_decoding_loop_exported_for_xla_needs_tf_servings_xla_flag(exported, xla_exported, expected):
    """The decoding loop is marked for XLA. tensorflow_model_server disables XLA unless
    --xla_cpu_compilation_enabled: the warm-up then fails (so the version does not load); with
    the flag the outputs are the model's (in TF Serving's C++ loader, the one that matters)."""
    from tensorflow.core.protobuf import saved_model_pb2

    with open(f"{xla_exported}/saved_model.pb", "rb") as file:  # read, not loaded here
        saved = saved_model_pb2.SavedModel.FromString(file.read())
    marked = [function.signature.name for function in saved.meta_graphs[0].graph_def.library.function
              if function.attr["_XlaMustCompile"].b]
    assert marked, "the decoding loop must be marked for XLA"
    model = exported[1]
    path = xla_exported  # loaded by two servers below
    with CppServer() as stock:
        stock.load(path)
        error = stock.warmup(path, expect_error=True)
        assert "XLA" in error and "warm-up record 1" in error, error[-2000:]
    with CppServer(xla=True) as server:
        server.load(path)
        names = ["serving_default", "sample"] + (["continue"] if isinstance(model, models.UniLM)
                                                 else [])
        assert [name for name, _ in server.warmup(path)] == names
        result = server.call(path, "serving_default", text=TEXTS[:3])
    in_memory = expected(exported, TEXTS[:3])
    np.testing.assert_array_equal(result["token_ids"], in_memory["token_ids"])
    np.testing.assert_allclose(result["scores"], in_memory["scores"], atol=1e-4)


@pytest.mark.parametrize("family", ["transformer", "unilm"])
def test_a_model_with_its_tokenizers_exports_alone_and_serves_its_generate(family, tmp_path):
    from tests.models.test_seq2seq_texts import SOURCES, make

    model = make(family)
    path = export.export_seq2seq(model, str(tmp_path / family), beam_size=2, warmup_batch_sizes=())
    served = tf.saved_model.load(path).signatures["serving_default"]
    outputs = served(text=tf.constant(SOURCES))["output_text"].numpy()
    generated = model.generate(SOURCES, beam_size=2, length_penalty=0.6)
    assert [t.decode() for t in outputs] == generated
    with ServingProcess(path, backend="cpp") as cpp:  # TF Serving's SavedModel loader
        assert cpp("serving_default", text=SOURCES)["output_text"].tolist() == generated
    with pytest.raises(TypeError, match="by keyword"):
        export.export_seq2seq(model, str(tmp_path / "again"), 8)
    with pytest.raises(ValueError, match="no tokenizers: pass `source_tokenizer`"):
        export.export_seq2seq(make(family, with_tokenizers=False), str(tmp_path / "bare"))


def sampling_options(count):
    """Decoding options that differ per text: a NumPy `(count,)` array each."""
    return {
        "temperature": np.linspace(0.7, 1.6, count, dtype=np.float32),
        "top_k": (np.arange(count, dtype=np.int32) * 7) % 40,
        "top_p": np.linspace(1.0, 0.6, count, dtype=np.float32),
        "seed": np.arange(count, dtype=np.int64) + 2**62,
        "max_new_tokens": np.arange(count, dtype=np.int32) % MAX_LENGTH + 1,
        "repetition_penalty": np.linspace(1.0, 1.8, count, dtype=np.float32),
    }


@pytest.mark.parametrize("backend", BACKENDS)
def test_sampled_and_continued_texts_served_equal_the_models_for_each_seed(exported, processes, backend):
    path, model, source, target, settings = exported
    options = sampling_options(len(TEXTS))
    in_memory = {"max_length": MAX_LENGTH, "no_repeat_ngram_size": settings["no_repeat_ngram_size"],
                 **{name: tf.constant(value) for name, value in options.items()}}
    unilm = isinstance(model, models.UniLM)
    signatures = ["sample"] + (["continue"] if unilm else [])
    calls = [{"signature": name, "inputs": {"text": TEXTS, **options}} for name in signatures]
    # One text alone gets what it gets in the batch: its own seed and options.
    calls.append({"signature": "sample", "inputs": {
        "text": TEXTS[5:6], **{name: value[5:6] for name, value in options.items()}}})
    process = processes(path, backend)
    served = requests(process, calls)
    texts = tf.constant([t if isinstance(t, bytes) else t.encode() for t in TEXTS])
    expected = {"sample": expected_outputs(model, source, target, TEXTS, in_memory)}
    if unilm:
        prompt, mask = prompt_ids(source, texts, SOURCE_LENGTH)
        expected["continue"] = model.continue_prompt(prompt, mask, end_id=target.sep_id,
                                                     mask_id=target.mask_id, **in_memory)
    for name, result in zip(signatures, served, strict=False):
        np.testing.assert_array_equal(result["token_ids"], expected[name]["token_ids"], name)
        np.testing.assert_allclose(result["scores"], expected[name]["scores"], atol=1e-4)
        assert (np.array(result["lengths"]) <= options["max_new_tokens"]).all()
    np.testing.assert_array_equal(served[-1]["token_ids"][0], served[0]["token_ids"][5])
    reseeded = requests(process, [{"signature": "sample", "inputs": {
        "text": TEXTS, **options, "seed": options["seed"] + 1}}])
    assert reseeded[0]["token_ids"] != served[0]["token_ids"]


def test_bad_decoding_options_fail_the_request_with_a_message_that_names_them(exported, processes):
    server = processes(exported[0], "cpp")  # TF Serving's C++ loader
    cases = [
        ("temperature", 0.0, "`temperature` must be a finite number > 0"),
        ("top_p", 1.5, "`top_p` must be a number in (0, 1]"),
        ("top_k", -1, "`top_k` must be an int >= 0"),
        ("max_new_tokens", MAX_LENGTH + 1, f"`max_new_tokens` must be an int in [1, {MAX_LENGTH}]"),
        ("repetition_penalty", float("nan"), "`repetition_penalty` must be a finite number > 0"),
        ("seed", None, "`seed` must hold one value per sequence"),
    ]
    for name, value, message in cases:
        options = sampling_options(2)
        if value is None:
            options[name] = options[name][:1]
        else:
            options[name] = np.full(2, value, options[name].dtype)
        error = server.refused("sample", text=TEXTS[:2], **options)
        assert message in error, (name, error[-2000:])


def test_any_batch_of_any_text_and_any_options_is_served_or_refused_by_name(exported, processes):
    """Fuzz `sample` in TF Serving's C++ loader: 0-4 texts of any kind with options
    drawn in and out of range; valid ones decode within max_new_tokens with finite
    scores, invalid ones fail the request with a message naming one bad option."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from tests.export.fresh_process import text_strategy

    path, model, _, _, _ = exported
    vocabulary = (model.backbone.vocabulary_size if isinstance(model, models.UniLM)
                  else model.token_logits.vocabulary_size)
    specs = {
        "temperature": (np.float32, st.floats(-1, 5, width=32) | st.sampled_from(
            [0.0, float("nan"), float("inf"), 1e-30, 1e30]), lambda v: 0 < v < np.inf),
        "top_k": (np.int32, st.integers(-3, 50) | st.sampled_from([2**31 - 1, -2**31]),
                  lambda v: v >= 0),
        "top_p": (np.float32, st.floats(-0.5, 1.5, width=32) | st.sampled_from(
            [0.0, 1.0, float("nan"), 1e-30]), lambda v: 0 < v <= 1),
        "seed": (np.int64, st.integers(-2**63, 2**63 - 1), lambda v: True),
        "max_new_tokens": (np.int32, st.integers(-1, MAX_LENGTH + 2), lambda v: 1 <= v <= MAX_LENGTH),
        "repetition_penalty": (np.float32, st.floats(-1, 4, width=32) | st.sampled_from(
            [0.0, float("inf"), float("nan")]), lambda v: 0 < v < np.inf),
    }
    row = st.tuples(text_strategy(), *[strategy for _, strategy, _ in specs.values()])

    server = processes(path, "cpp")  # TF Serving's C++ loader

    @settings(max_examples=20, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(rows=st.lists(row, max_size=4))
    def served(rows):
        inputs = {"text": [r[0] for r in rows]}
        bad = set()
        for i, (name, (dtype, _, valid)) in enumerate(specs.items()):
            inputs[name] = np.array([r[i + 1] for r in rows], dtype).reshape(len(rows))
            if not all(valid(v) for v in inputs[name].tolist()):
                bad.add(name)
        if bad:
            error = server.refused("sample", **inputs)
            assert any(f"`{name}` must be" in error for name in bad), (bad, error[-1500:])
            return
        outputs = server("sample", **inputs)
        assert outputs["token_ids"].shape == (len(rows), MAX_LENGTH)
        assert np.isfinite(outputs["scores"]).all()
        assert (outputs["lengths"] <= inputs["max_new_tokens"]).all()
        assert ((outputs["token_ids"] >= 0) & (outputs["token_ids"] < vocabulary)).all()

    served()
