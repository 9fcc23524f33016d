"""Models' sampling, streaming and UniLM's prompt continuation: seeds, traces, cache == recomputed."""

import numpy as np
import pytest
import tensorflow as tf

from tests.models.test_seq2seq_texts import FAMILIES, SOURCES, make
from tests.models.test_unilm import MASK, SEP, unilm_model
from tfnlp.layers import masks
from tfnlp.models.unilm import prompt_ids

PROMPTS = tf.constant([[2, 10, 11, 12, 13, 0], [2, 14, 0, 0, 0, 0], [2, 0, 0, 0, 0, 0]])
PROMPT_MASK = tf.cast(PROMPTS > 0, tf.int32)


def ids_and_settings(model):
    """Token-id sources of `SOURCES` and the special ids `generate` needs."""
    tokenizer = model.tokenizer if hasattr(model, "tokenizer") else model.target_tokenizer
    if hasattr(model, "tokenizer"):
        source, mask = prompt_ids(tokenizer, tf.constant(SOURCES), 8)
        return source, mask, {"end_id": tokenizer.sep_id, "mask_id": tokenizer.mask_id}
    tokens = model.source_tokenizer(tf.constant(SOURCES))
    source, mask = tokens.to_tensor(0), tf.cast(tokens.to_tensor(-1) >= 0, tf.int32)
    return source, mask, {"start_id": tokenizer.cls_id, "end_id": tokenizer.sep_id}


@pytest.mark.parametrize("family", FAMILIES)
def test_a_seed_reproduces_and_new_option_values_do_not_trace_again(family):
    model = make(family)
    source, mask, ids = ids_and_settings(model)
    first = model.generate(source, mask, max_length=6, temperature=1.5, top_p=1.0, seed=3, **ids)
    again = model.generate(source, mask, max_length=6, temperature=1.5, top_p=1.0, seed=3, **ids)
    np.testing.assert_array_equal(first["token_ids"], again["token_ids"])
    outputs = {tuple(first["token_ids"].numpy().reshape(-1))}
    for seed, temperature, top_p in ((4, 1.5, 1.0), ([9, 8, 7, 6], 2.0, 0.9), (5, 0.7, 0.5)):
        output = model.generate(source, mask, max_length=6, temperature=temperature, top_p=top_p,
                                seed=seed, **ids)
        outputs.add(tuple(output["token_ids"].numpy().reshape(-1)))
    assert len(outputs) > 1
    # One function for this set of options, traced once; other options, another.
    (function,) = model._generate_functions.by_setting.values()
    assert function.experimental_get_tracing_count() == 1
    # top_k=1 is greedy search, on the model too.
    greedy = model.generate(source, mask, max_length=6, **ids)
    np.testing.assert_array_equal(
        model.generate(source, mask, max_length=6, top_k=1, seed=0, **ids)["token_ids"],
        greedy["token_ids"])


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("options", [{}, {"temperature": 1.3, "top_k": 5, "seed": 11},
                                     {"repetition_penalty": 1.5, "max_new_tokens": 3}], ids=str)
def test_streamed_steps_are_the_decoded_tokens_and_texts(family, options):
    model = make(family)
    source, mask, ids = ids_and_settings(model)
    whole = model.generate(source, mask, max_length=6, **ids, **options)["token_ids"].numpy()
    steps = list(model.generate(source, mask, max_length=6, stream=True, **ids, **options))
    assert all(step.shape == (len(SOURCES),) for step in steps)
    streamed = np.stack(steps, axis=1)
    np.testing.assert_array_equal(streamed, whole[:, : len(steps)])
    assert (whole[:, len(steps):] == 0).all()
    texts = model.generate(SOURCES, **options)
    pieces = list(model.generate(SOURCES, stream=True, **options))
    assert ["".join(p[i] for p in pieces) for i in range(len(SOURCES))] == texts


@pytest.mark.parametrize("family", FAMILIES)
def test_sampling_compiled_with_xla_draws_the_same_tokens(family):
    model = make(family)
    source, mask, ids = ids_and_settings(model)
    settings = {"max_length": 6, "temperature": 1.4, "top_p": 0.9, "seed": 21, **ids}
    plain = model.generate(source, mask, **settings)
    compiled = model.generate(source, mask, jit_compile=True, **settings)
    np.testing.assert_array_equal(compiled["token_ids"], plain["token_ids"])
    np.testing.assert_allclose(compiled["scores"], plain["scores"], atol=1e-4)


@pytest.mark.parametrize("family", FAMILIES)
def test_options_that_need_greedy_or_sampling_refuse_beam_search(family):
    model = make(family)
    for options, message in (({"seed": 1}, "`seed` work with greedy"),
                             ({"top_p": 0.5}, "`top_p`, `seed` work with greedy"),
                             ({"max_new_tokens": 2}, "`max_new_tokens` work"),
                             ({"stream": True}, "Streaming decodes one hypothesis")):
        with pytest.raises(ValueError, match=message):
            model.generate(SOURCES, beam_size=2, **options)
    with pytest.raises(ValueError, match="`temperature` must be a finite number > 0"):
        model.generate(SOURCES, temperature=0)
    with pytest.raises(ValueError, match="`stream` must be True or False"):
        model.generate(SOURCES, stream="yes")


# --- UniLM continues a prompt ---

@pytest.mark.parametrize("options", [{}, {"temperature": 1.5, "top_k": 20, "seed": 4},
                                     {"repetition_penalty": 2.0, "no_repeat_ngram_size": 2}],
                         ids=str)
def test_continuation_cached_equals_recomputed_and_the_left_to_right_scores(options):
    model = unilm_model(max_sequence_length=24)
    settings = {"end_id": SEP, "mask_id": MASK, "max_length": 10, **options}
    cached = model.continue_prompt(PROMPTS, PROMPT_MASK, **settings)
    recomputed = model.continue_prompt(PROMPTS, PROMPT_MASK, use_cache=False, **settings)
    np.testing.assert_array_equal(cached["token_ids"], recomputed["token_ids"])
    np.testing.assert_allclose(cached["scores"], recomputed["scores"], atol=1e-4)
    assert cached["lengths"].numpy().max() > 2
    # The scores are the left-to-right log-probabilities of the generated tokens,
    # computed in one pass with pseudo-masks (an independent path).
    for row in range(3):
        prompt = PROMPTS[row][PROMPT_MASK[row] > 0].numpy()
        generated = cached["token_ids"][row, : cached["lengths"][row]].numpy()
        full = tf.constant([np.concatenate([prompt, generated])])
        log_probs = model.left_to_right_log_probs(full, mask_id=MASK).numpy()[0, len(prompt):]
        # (the model's own, before penalty, blocking or sampling processors)
        np.testing.assert_allclose(cached["scores"][row], log_probs.sum(), atol=1e-4)


def test_every_cached_continuation_step_equals_the_recomputed_step():
    model = unilm_model(max_sequence_length=24)
    states = [model.initial_decoding_state(PROMPTS, PROMPT_MASK, 8, use_cache, mask_id=MASK,
                                           objective=masks.LEFT_TO_RIGHT)
              for use_cache in (True, False)]
    tokens = tf.fill([3], MASK)
    rng = np.random.default_rng(0)
    for index in range(8):
        logits = []
        for number, (state, context) in enumerate(states):
            step_logits, state = model.decoding_step(tokens, tf.constant(index), state, context)
            states[number] = (state, context)
            logits.append(step_logits.numpy())
        np.testing.assert_allclose(logits[0], logits[1], atol=1e-4)
        tokens = tf.constant(rng.integers(5, 30, 3), tf.int32)


def test_continuation_on_texts_reads_the_end_of_long_prompts():
    model = make("unilm")
    texts = ["hello world", "", "the cat " * 20]
    prompt, mask = prompt_ids(model.tokenizer, tf.constant(texts), model.source_length)
    assert prompt.numpy()[2].tolist() == [model.tokenizer.cls_id] + model.tokenizer(
        tf.constant(["the cat " * 20])).numpy()[0][-7:].tolist()
    continued = model.continue_prompt(texts, seed=5, top_p=0.9)
    assert isinstance(continued, list) and len(continued) == 3
    ids = model.continue_prompt(prompt, mask, seed=5, top_p=0.9, max_length=model.max_length)
    tokenizer = model.tokenizer
    assert continued == [t.decode() for t in tokenizer.detokenize(ids["token_ids"]).numpy()]
    pieces = list(model.continue_prompt(texts, seed=5, top_p=0.9, stream=True))
    assert ["".join(p[i] for p in pieces) for i in range(3)] == continued
