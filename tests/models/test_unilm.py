"""UniLM: per-example objectives, BERT initialisation, cached seq2seq decoding."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfnlp import data, models
from tfnlp.layers import masks
from tfnlp.models import UniLM, UniLMBackbone

CLS, SEP, MASK = 2, 3, 4
# Two packed pairs: [CLS] S [SEP] T [SEP] then padding.
TOKENS = tf.constant([[CLS, 10, 11, 12, SEP, 20, 21, SEP, 0, 0],
                      [CLS, 13, SEP, 22, 23, 24, 25, SEP, 0, 0]])
SEGMENTS = tf.constant([[0, 0, 0, 0, 0, 1, 1, 1, 0, 0], [0, 0, 0, 1, 1, 1, 1, 1, 0, 0]])
PADDING = tf.cast(TOKENS > 0, tf.int32)


def backbone(**overrides):
    config = {"vocabulary_size": 40, "num_layers": 2, "num_heads": 2, "hidden_dim": 16,
              "intermediate_dim": 32, "dropout": 0.0, "max_sequence_length": 40}
    config.update(overrides)
    return UniLMBackbone(**config)


def run(model, objective, token_ids=TOKENS):
    return model({
        "token_ids": token_ids, "segment_ids": SEGMENTS, "padding_mask": PADDING,
        "objective": tf.fill([2], objective),
    })["sequence_output"].numpy()


def changed(model, objective, position):
    """Which positions' outputs change when the token at `position` changes."""
    other = tf.tensor_scatter_nd_update(TOKENS, [[0, position]], [30])
    difference = np.abs(run(model, objective, other) - run(model, objective))[0].max(-1)
    return set(np.flatnonzero(difference > 1e-6).tolist()) & set(range(8))  # real tokens


@pytest.mark.parametrize(
    "objective, position, expected",
    [
        (masks.BIDIRECTIONAL, 2, set(range(8))),
        (masks.LEFT_TO_RIGHT, 2, set(range(2, 8))),  # only itself and later tokens
        (masks.RIGHT_TO_LEFT, 5, set(range(6))),  # only itself and earlier tokens
        (masks.SEQ2SEQ, 2, set(range(8))),  # the source is seen by everyone
        (masks.SEQ2SEQ, 6, {6, 7}),  # a target token: only itself and later targets
    ],
)
def test_each_objective_sees_what_its_mask_allows(objective, position, expected):
    assert changed(backbone(), objective, position) == expected


def test_padding_is_never_seen():
    model = backbone()
    padded = tf.tensor_scatter_nd_update(TOKENS, [[0, 8], [1, 9]], [33, 34])
    for objective in range(4):
        np.testing.assert_allclose(run(model, objective, padded)[:, :8],
                                   run(model, objective)[:, :8], atol=1e-6)


def test_every_example_gets_the_mask_of_its_objective():
    """In a mixed batch, each example equals the batch run with its own objective."""
    model = backbone()
    tokens = tf.tile(TOKENS, [2, 1])
    objectives = tf.constant([0, 3, 1, 2])
    mixed = model({"token_ids": tokens, "segment_ids": tf.tile(SEGMENTS, [2, 1]),
                   "padding_mask": tf.tile(PADDING, [2, 1]), "objective": objectives})
    for b, objective in enumerate(objectives.numpy()):
        alone = run(model, int(objective))[b % 2]
        np.testing.assert_allclose(mixed["sequence_output"][b], alone, atol=1e-6)


@pytest.mark.parametrize("layer_norm_epsilon", [1e-12, 1e-5])
def test_from_bert_and_back(layer_norm_epsilon):
    bert = models.BertBackbone(40, 2, 2, 16, 32, dropout=0.0, max_sequence_length=40,
                               layer_norm_epsilon=layer_norm_epsilon)
    unilm = UniLMBackbone.from_bert(bert)
    assert unilm.layer_norm_epsilon == unilm.to_bert().layer_norm_epsilon == layer_norm_epsilon
    inputs = {"token_ids": TOKENS, "segment_ids": SEGMENTS, "padding_mask": PADDING}
    expected = bert(inputs)["sequence_output"]
    # Bidirectional UniLM == BERT, and to_bert() gives the same encoder back.
    np.testing.assert_allclose(run(unilm, masks.BIDIRECTIONAL), expected, atol=1e-6)
    np.testing.assert_allclose(unilm.to_bert()(inputs)["sequence_output"], expected, atol=1e-6)
    rows = unilm.segment_embedding.embeddings.numpy()
    bert_rows = bert.segment_embedding.embeddings.numpy()
    np.testing.assert_array_equal(rows, bert_rows[[0, 1, 0, 0, 0, 1]])
    with pytest.raises(ValueError, match="bert_backbone"):
        UniLMBackbone.from_bert(unilm)


def test_backbone_save_and_load(tmp_path):
    model = backbone(dtype="mixed_bfloat16")
    path = str(tmp_path / "unilm.keras")
    model.save(path)
    restored = keras.saving.load_model(path, safe_mode=True)
    assert isinstance(restored, UniLMBackbone)
    assert restored.get_config() == model.get_config()
    np.testing.assert_allclose(run(restored, 3), run(model, 3), atol=0)


def unilm_model(seed=5, **overrides):
    keras.utils.set_random_seed(seed)
    return UniLM(backbone(**overrides))


SOURCES = tf.constant([[CLS, 10, 11, 12, SEP, 0], [CLS, 13, SEP, 0, 0, 0]])


@pytest.mark.parametrize(
    "settings",
    [
        {"beam_size": 1},
        {"beam_size": 1, "no_repeat_ngram_size": 3},
        {"beam_size": 3, "length_penalty": 0.6},
        {"beam_size": 4, "no_repeat_ngram_size": 3},
    ],
    ids=["greedy", "greedy_trigram", "beam3_alpha", "beam4_trigram"],
)
def test_cached_generation_equals_recomputation(settings):
    model = unilm_model()
    common = {"end_id": SEP, "mask_id": MASK, "max_length": 10, **settings}
    mask = tf.cast(SOURCES > 0, tf.int32)
    cached = model.generate(SOURCES, mask, **common)
    recomputed = model.generate(SOURCES, mask, use_cache=False, **common)
    np.testing.assert_array_equal(cached["token_ids"], recomputed["token_ids"])
    np.testing.assert_array_equal(cached["lengths"], recomputed["lengths"])
    np.testing.assert_allclose(cached["scores"], recomputed["scores"], atol=1e-5)


def test_an_empty_source_decodes_the_same_cached_and_recomputed():
    model = unilm_model()
    common = {"end_id": SEP, "mask_id": MASK, "max_length": 4}
    empty = tf.zeros([2, 0], tf.int32)
    recomputed = model.generate(empty, **common, use_cache=False)
    # Eagerly, and traced with the source length known only at run time.
    traced = tf.function(lambda s: model.generate(s, **common),
                         input_signature=[tf.TensorSpec([None, None], tf.int32)])
    for cached in (model.generate(empty, **common), traced(empty)):
        np.testing.assert_array_equal(cached["token_ids"], recomputed["token_ids"])
        np.testing.assert_allclose(cached["scores"], recomputed["scores"], atol=1e-5)


def test_decoding_step_equals_the_training_view():
    """The step's logits == the masked-LM logits of the packed training input."""
    model = unilm_model()
    target = [20, 21, 22]
    state, context = model.initial_decoding_state(SOURCES[:1], SOURCES[:1] > 0, 6,
                                                  mask_id=MASK)
    previous = tf.constant([MASK])
    for index, token in enumerate(target + [SEP]):
        logits, state = model.decoding_step(previous, tf.constant(index), state, context)
        packed = [CLS, 10, 11, 12, SEP] + target[:index] + [MASK]
        expected = model({
            "token_ids": tf.constant([packed]),
            "segment_ids": tf.constant([[0] * 5 + [1] * (index + 1)]),
            "padding_mask": tf.ones((1, len(packed)), tf.int32),
            "objective": tf.constant([masks.SEQ2SEQ]),
            "masked_positions": tf.constant([[len(packed) - 1]]),
        })
        np.testing.assert_allclose(logits, expected[:, 0], atol=2e-5)
        previous = tf.constant([token])


def test_generate_traces_once_and_rejects_bad_arguments():
    model = unilm_model()
    for sources in (SOURCES, SOURCES[:1], tf.tile(SOURCES, [2, 2])):
        model.generate(sources, end_id=SEP, mask_id=MASK, max_length=4, beam_size=2)
    (function,) = model._generate_functions.by_setting.values()
    assert function.experimental_get_tracing_count() == 1
    for bad, message in (({"mask_id": -1}, "mask_id"), ({"beam_size": 0}, "beam_size"),
                         ({"max_length": 0}, "max_length")):
        with pytest.raises(ValueError, match=message):
            model.generate(SOURCES, **{"end_id": SEP, "mask_id": MASK, **bad})
    with pytest.raises(ValueError, match="source_token_ids"):
        model.generate(tf.constant([1.0, 2.0]), end_id=SEP, mask_id=MASK)
    with pytest.raises(ValueError, match="position table"):
        model.generate(tf.ones((1, 30), tf.int32), end_id=SEP, mask_id=MASK, max_length=20)
    with pytest.raises(ValueError, match="`source_padding_mask` must have the shape of "
                                         "`source_token_ids`"):
        model.generate(SOURCES, tf.ones((2, 1), tf.int32), end_id=SEP, mask_id=MASK)


def test_generation_needs_the_position_table_for_the_real_source_only():
    """The last [MASK] sits at L + max_length - 1, as in training's [CLS] S [SEP] T."""
    model = unilm_model()  # a table of 40 positions; SOURCES' longest real source: L = 5
    padded = tf.pad(SOURCES, [[0, 0], [0, 39]])  # width 45, wider than the table
    common = {"end_id": 1, "mask_id": MASK}  # an end id never produced: all 35 tokens
    fits = model.generate(padded, padded > 0, max_length=35, **common)  # 5 + 35 = 40
    assert fits["token_ids"].shape == (2, 35)
    short = model.generate(SOURCES, SOURCES > 0, max_length=35, **common)
    np.testing.assert_array_equal(fits["token_ids"], short["token_ids"])  # padding costs nothing
    np.testing.assert_allclose(fits["scores"], short["scores"], atol=1e-5)
    for settings in ({"max_length": 36}, {"max_length": 36, "jit_compile": True},
                     {"max_length": 1, "use_cache": False}):  # no cache: 45 + 1 + 1 columns
        with pytest.raises(ValueError, match="exceeds the position table"):
            model.generate(padded, padded > 0, **common, **settings)
    # Inside a tf.function the same check runs as an assertion (XLA compiles it out).
    traced = tf.function(lambda source: model.generate(source, source > 0, max_length=36,
                                                       jit_compile=False, **common))
    with pytest.raises(tf.errors.InvalidArgumentError, match="exceeds the position table"):
        traced(padded)


def test_unilm_save_and_load(tmp_path):
    model = unilm_model()
    path = str(tmp_path / "model.keras")
    model.save(path)
    restored = keras.saving.load_model(path, safe_mode=True)
    settings = {"end_id": SEP, "mask_id": MASK, "max_length": 5, "beam_size": 2}
    np.testing.assert_array_equal(restored.generate(SOURCES, **settings)["token_ids"],
                                  model.generate(SOURCES, **settings)["token_ids"])


WORDS = [f"w{i}" for i in range(12)]


@pytest.mark.parametrize("pipeline, steps", [
    (data.unilm_finetuning_dataset, 300),  # the paper's: 70% of the target masked
    # s2s-ft's pseudo-masks: every target token, each from the real ones before it;
    # it left the plateau after about 600 steps here, the paper's after about 200.
    (data.unilm_pseudo_masked_dataset, 1200),
])
def test_fine_tuning_learns_to_reverse_and_generation_reproduces_it(pipeline, steps):
    """The fine-tuning pipeline -> fit -> generate, end to end on a toy task."""
    rng = np.random.default_rng(0)
    sources = [rng.choice(WORDS, size=rng.integers(2, 5)) for _ in range(768)]
    texts = [" ".join(s) for s in sources]
    reversed_texts = [" ".join(s[::-1]) for s in sources]
    tokenizer = data.WordPieceTokenizer(list(data.SPECIAL_TOKENS) + WORDS)
    pairs = tf.data.Dataset.from_tensor_slices((texts, reversed_texts))
    batches = pipeline(pairs, tokenizer, 16, batch_size=32,
                       shuffle_buffer=768).map(models.unilm_batch)
    keras.utils.set_random_seed(0)
    model = UniLM(UniLMBackbone(tokenizer.vocabulary_size(), 2, 4, 64, 128, dropout=0.0,
                                max_sequence_length=32))
    model.compile(optimizer=keras.optimizers.Adam(2e-3))
    model.fit(batches.repeat(), steps_per_epoch=steps, epochs=1, verbose=0)
    test = [rng.choice(WORDS, size=4) for _ in range(16)]
    packed = data.BertPreprocessor(tokenizer, 8)(tf.constant([" ".join(s) for s in test]))
    for beam_size in (1, 3):
        output = model.generate(packed["token_ids"], packed["padding_mask"], end_id=tokenizer.sep_id,
                                mask_id=tokenizer.mask_id, max_length=6, beam_size=beam_size)
        decoded = [t.decode() for t in tokenizer.detokenize(output["token_ids"]).numpy()]
        accuracy = np.mean([d == " ".join(s[::-1]) for d, s in zip(decoded, test, strict=True)])
        assert accuracy >= 0.8, (beam_size, accuracy, decoded[:4])


def test_left_to_right_scores_equal_one_masked_pass_per_position():
    model = unilm_model()
    tokens = tf.constant([[CLS, 10, 11, 12, 13, SEP, 0]])
    padding = tf.cast(tokens > 0, tf.int32)
    scores = model.left_to_right_log_probs(tokens, padding, mask_id=MASK).numpy()
    assert scores[0, 6] == 0.0  # padding
    for t in range(6):
        masked = tokens.numpy().copy()
        masked[0, t] = MASK
        logits = model({
            "token_ids": tf.constant(masked), "segment_ids": tf.zeros_like(tokens),
            "padding_mask": padding,
            "objective": tf.constant([masks.LEFT_TO_RIGHT]), "masked_positions": tf.constant([[t]]),
        })
        expected = tf.nn.log_softmax(logits[0, 0])[int(tokens[0, t])]
        np.testing.assert_allclose(scores[0, t], expected, atol=2e-5)


def test_left_to_right_scoring_checks_and_mixed_precision():
    model = unilm_model(dtype="mixed_bfloat16")
    assert model.masked_lm_head.compute_dtype == "float32"  # whatever the policy
    tokens = tf.constant([[CLS, 10, 11, SEP]])
    scores = model.left_to_right_log_probs(tokens, mask_id=MASK)
    assert scores.dtype == tf.float32 and np.all(np.isfinite(scores)) and np.all(scores <= 0)
    output = model.generate(SOURCES, end_id=SEP, mask_id=np.int64(MASK), max_length=4)
    assert np.all(np.isfinite(output["scores"]))
    with pytest.raises(ValueError, match="token_ids"):
        model.left_to_right_log_probs(tf.constant([1, 2]), mask_id=MASK)
    with pytest.raises(ValueError, match=r"`token_ids` must be an int tensor of shape \(B, T\), "
                                         r"got float32"):
        model.left_to_right_log_probs(tf.cast(tokens, tf.float32), mask_id=MASK)
    with pytest.raises(ValueError, match=r"`token_ids` must be in \[0, "):  # not 2**32 + 10 -> 10
        model.left_to_right_log_probs(tf.constant([[CLS, 2**32 + 10, SEP]], tf.int64), mask_id=MASK)
    with pytest.raises(ValueError, match="mask_id"):
        model.left_to_right_log_probs(tokens, mask_id=-4)
    with pytest.raises(tf.errors.InvalidArgumentError, match="position table"):
        model.left_to_right_log_probs(tf.ones((1, 41), tf.int32), mask_id=MASK)


def test_a_left_to_right_batch_gives_one_masked_pass_per_position():
    """`model(x)` on a left-to-right LM batch: the logits of each token's own masked pass."""
    model = unilm_model(dropout=0.3)
    tokens = tf.constant([[CLS, 10, 11, 12, SEP, 0], [CLS, 13, 14, 15, 16, SEP]])
    padding = tf.cast(tokens > 0, tf.int32)
    x = {"token_ids": tokens, "padding_mask": padding, "mask_id": tf.fill([2], MASK)}
    logits = model(x)
    assert logits.shape == (2, 6, 40) and logits.dtype == tf.float32
    for row in range(2):
        for t in range(int(tf.reduce_sum(padding[row]))):
            masked = tokens[row].numpy().copy()
            masked[t] = MASK
            expected = model({
                "token_ids": tf.constant([masked]), "segment_ids": tf.zeros((1, 6), tf.int32),
                "padding_mask": padding[row:row + 1], "objective": tf.constant([masks.LEFT_TO_RIGHT]),
                "masked_positions": tf.constant([[t]]),
            })[0, 0]
            np.testing.assert_allclose(logits[row, t], expected, atol=2e-5, err_msg=(row, t))
    assert not np.allclose(model(x, training=True), logits, atol=1e-3)  # dropout
    symbolic = model({"token_ids": keras.Input((6,), dtype="int32"),
                      "padding_mask": keras.Input((6,), dtype="int32"),
                      "mask_id": keras.Input((), dtype="int32")})
    assert tuple(symbolic.shape) == (None, 6, 40) and symbolic.dtype == "float32"
    for bad, error, message in [
        ({"mask_id": tf.fill([2], 40)}, ValueError, "mask_id"),
        ({"token_ids": tf.cast(tokens, tf.float32)}, TypeError, "token_ids"),
        ({"masked_ids": tf.zeros_like(tokens)}, ValueError, "unexpected: \\['masked_ids'\\]"),
        ({"padding_mask": None}, ValueError, "missing: \\['padding_mask'\\]"),
        ({"token_ids": tf.ones((2, 41), tf.int32), "padding_mask": tf.ones((2, 41), tf.int32)},
         ValueError, "max_sequence_length"),
    ]:
        inputs = {k: v for k, v in {**x, **bad}.items() if v is not None}
        with pytest.raises(error, match=message):
            model(inputs)


def test_a_pseudo_masked_batch_gives_each_target_the_logits_of_its_decoding_step():
    """`model(x)` on a pseudo-masked seq2seq batch: target `t` gets the logits of its
    own seq2seq masked pass, and of `decoding_step` fed the real targets before it."""
    model = unilm_model(dropout=0.3)
    x = {"token_ids": TOKENS, "segment_ids": SEGMENTS, "padding_mask": PADDING,
         "mask_id": tf.fill([2], MASK)}
    logits = model(x)
    assert logits.shape == (2, 10, 40) and logits.dtype == tf.float32
    sources = tf.constant([[CLS, 10, 11, 12, SEP], [CLS, 13, SEP, 0, 0]])
    state, context = model.initial_decoding_state(sources, tf.cast(sources > 0, tf.int32), 5,
                                                  mask_id=MASK)
    starts = [5, 3]  # each row's first target position
    targets = [TOKENS[row, start:] for row, start in enumerate(starts)]
    for m in range(5):
        previous = tf.constant([int(t[m - 1]) if m else 0 for t in targets])
        step, state = model.decoding_step(previous, m, state, context)
        for row, start in enumerate(starts):
            t = start + m
            if not SEGMENTS[row, t] or not PADDING[row, t]:
                continue  # past the row's target
            masked = TOKENS[row].numpy().copy()
            masked[t] = MASK
            expected = model({
                "token_ids": tf.constant([masked]), "segment_ids": SEGMENTS[row:row + 1],
                "padding_mask": PADDING[row:row + 1], "objective": tf.constant([masks.SEQ2SEQ]),
                "masked_positions": tf.constant([[t]]),
            })[0, 0]
            np.testing.assert_allclose(logits[row, t], expected, atol=2e-5, err_msg=(row, t))
            np.testing.assert_allclose(logits[row, t], step[row], atol=2e-5, err_msg=(row, m))
    assert not np.allclose(model(x, training=True), logits, atol=1e-3)  # dropout
    # unilm_batch: every real target token is a label, the final [SEP] included.
    _, labels, weights = models.unilm_batch(x)
    np.testing.assert_array_equal(labels, TOKENS)
    np.testing.assert_array_equal(weights, SEGMENTS * PADDING)
    symbolic = model({name: keras.Input((10,), dtype="int32")
                      for name in ("token_ids", "segment_ids", "padding_mask")}
                     | {"mask_id": keras.Input((), dtype="int32")})
    assert tuple(symbolic.shape) == (None, 10, 40) and symbolic.dtype == "float32"
    for bad, error, message in [
        ({"segment_ids": SEGMENTS * 2}, ValueError, "segment_ids"),
        ({"mask_id": tf.fill([2], 40)}, ValueError, "mask_id"),
        # An LM batch with segment ids would train nothing: refused.
        ({"segment_ids": tf.zeros_like(SEGMENTS)}, tf.errors.InvalidArgumentError,
         "needs target tokens"),
        ({"masked_positions": tf.zeros((2, 1), tf.int32)}, ValueError,
         "pseudo-masked seq2seq .* unexpected: \\['masked_positions'\\]"),
    ]:
        with pytest.raises(error, match=message):
            model({**x, **bad})


def test_left_to_right_lm_batches_train_under_mixed_precision():
    model = unilm_model(dtype="mixed_bfloat16")
    model.compile(optimizer=keras.optimizers.Adam(1e-3))
    tokens = np.tile([[CLS, 10, 11, 12, 13, SEP, 0, 0]], (4, 1)).astype("int32")
    batch = {"token_ids": tokens, "padding_mask": (tokens > 0).astype("int32"),
             "mask_id": np.full([4], MASK, "int32")}
    dataset = tf.data.Dataset.from_tensors(batch).map(models.unilm_batch).repeat(30)
    losses = model.fit(dataset, epochs=1, verbose=0).history["loss"]
    assert np.isfinite(losses).all() and model.evaluate(dataset.take(1), verbose=0)[0] < losses[0]


def test_left_to_right_lm_training_learns_a_text_that_continue_prompt_reproduces():
    """left_to_right_lm_dataset -> fit -> continue_prompt, end to end on a toy language."""
    rng = np.random.default_rng(0)
    # Sentences of consecutive words (w3 w4 w5 ...), wrapping after w11.
    sentences = [" ".join(WORDS[(start + i) % 12] for i in range(rng.integers(3, 7)))
                 for start in rng.integers(0, 12, size=600)]
    documents = tf.data.Dataset.from_tensor_slices([sentences[i:i + 6]
                                                    for i in range(0, 600, 6)])
    tokenizer = data.WordPieceTokenizer(list(data.SPECIAL_TOKENS) + WORDS)
    batches = data.left_to_right_lm_dataset(documents.repeat(), tokenizer, 16, batch_size=32,
                                            shuffle_buffer=200).map(models.unilm_batch)
    keras.utils.set_random_seed(0)
    model = UniLM(UniLMBackbone(tokenizer.vocabulary_size(), 2, 4, 64, 128, dropout=0.0,
                                max_sequence_length=32))
    model.compile(optimizer=keras.optimizers.Adam(2e-3))
    history = model.fit(batches, steps_per_epoch=150, epochs=2, verbose=0)
    # A word follows its predecessor, except after a sentence's end: per
    # target, at best log(number of sentence lengths) nats near an end.
    assert history.history["loss"][-1] < 0.6 * history.history["loss"][0]
    prompts = [f"{WORDS[k]} {WORDS[k + 1]}" for k in range(0, 10, 3)]
    packed = data.BertPreprocessor(tokenizer, 8)(tf.constant(prompts))
    ids = packed["token_ids"] * tf.cast(packed["token_ids"] != tokenizer.sep_id, tf.int32)
    output = model.continue_prompt(ids, tf.cast(ids > 0, tf.int32), end_id=tokenizer.sep_id,
                                   mask_id=tokenizer.mask_id, max_length=3)
    for k, row in zip(range(0, 10, 3), output["token_ids"].numpy(), strict=True):
        # The next word after "wk wk+1" is wk+2: a sentence has at least 3 words.
        assert tokenizer.get_vocabulary()[row[0]] == WORDS[(k + 2) % 12], (k, row)


@pytest.mark.parametrize("beam_size", [1, 3])
def test_xla_compiled_generation_matches(beam_size):
    model = unilm_model()
    settings = {"end_id": SEP, "mask_id": MASK, "max_length": 8, "beam_size": beam_size}
    plain = model.generate(SOURCES, SOURCES > 0, **settings)
    compiled = model.generate(SOURCES, SOURCES > 0, jit_compile=True, **settings)
    np.testing.assert_array_equal(compiled["token_ids"], plain["token_ids"])
    np.testing.assert_allclose(compiled["scores"], plain["scores"], atol=1e-4)


def test_generate_compiles_with_xla_by_default_only_where_a_gpu_is_visible(monkeypatch):
    model = unilm_model()
    settings = {"end_id": SEP, "mask_id": MASK, "max_length": 5}
    plain = model.generate(SOURCES, SOURCES > 0, **settings)  # this CPU: "auto" is no XLA
    assert [dict(key)["jit_compile"] for key in model._generate_functions.by_setting] == [False]
    devices = tf.config.list_physical_devices() + [type("Device", (), {"device_type": "GPU"})()]
    monkeypatch.setattr(tf.config, "list_physical_devices", lambda *args: devices)
    compiled = model.generate(SOURCES, SOURCES > 0, **settings)
    assert sorted(dict(key)["jit_compile"] for key in model._generate_functions.by_setting) == [False, True]
    np.testing.assert_array_equal(compiled["token_ids"], plain["token_ids"])
