"""UniLM generation: key/value cache vs recomputation, and vs keras-hub's cached samplers.

1. `UniLM.generate` (BERT-mini size: 4 layers, hidden 256, 4 heads, 8,000
   tokens) on 16 sources of 32 tokens, 16 / 64 / 128 new tokens, greedy and
   beam 4, with the cache vs recomputing the packed sequence every step
   (`use_cache=False`). The end token is disabled so every run decodes the
   full length. Reported: generated tokens/s and the median per-round
   speed-up (rounds alternate the two).
2. Per-token cost next to keras-hub's `GPT2CausalLM` of the same size (4
   layers, 256, 4 heads, FFN 1024, 8,000 tokens) with its cached greedy
   sampler, same batch, prompt and new tokens, both with and without
   `jit_compile` (keras-hub's default is on, tfnlp's off). UniLM feeds two
   tokens per step (the previous token and a `[MASK]`), a decoder-only LM one.
3. The translator: `TransformerSeq2Seq.generate` (`transformer_small`: 3 + 3
   layers, hidden 256, 4 heads, FFN 1024; one shared 8,000-token
   vocabulary, output tied to the embedding; random weights; greedy, cached,
   end token disabled) vs keras-hub's `BartSeq2SeqLM` of equal size
   (`BartBackbone(8000, num_layers=3, num_heads=4, hidden_dim=256,
   intermediate_dim=1024)`: BART's `num_layers` is the depth of the encoder
   and of the decoder; shared vocabulary, tied output; random weights, no
   preset, nothing downloaded) with its cached greedy sampler, on the same
   16 sources of 32 tokens, 64 new tokens after the start token, with and
   without `jit_compile`. keras-hub is driven without a preprocessor:
   `generate()` takes token ids (`encoder_token_ids`/`_padding_mask`, and a
   decoder prompt of 1 + 64 slots whose padding mask marks only the start
   token) and needs `stop_token_ids=None` (its `"auto"` reads the end token
   from the preprocessor), which also makes it decode the full length.
   The architectures differ only in details that barely change the cost:
   BART has learned positions, a LayerNorm on the embeddings and GELU;
   tfnlp sinusoidal positions, an output bias and ReLU (parameters of both
   are in the results). keras-hub's sampler also runs the decoder once over
   all 65 prompt slots to seed its cache; that is part of its time.

4. Sampling: `UniLM.continue_prompt` (the model of 1 and 2) vs keras-hub's
   `GPT2CausalLM` of part 2's size, top-k 40 and top-p 0.9 (temperature 1),
   16 prompts of 32 tokens (`[CLS]` and 31 tokens for UniLM, 32 tokens for
   GPT-2; all real, so nothing is padded), 64 new tokens, with and without
   `jit_compile`. tfnlp takes `top_k` / `top_p` / `temperature` / `seed`
   as inputs of one traced function (new values do not trace again).
   keras-hub is driven as in 2, with `compile(sampler=TopKSampler(k=40) |
   TopPSampler(p=0.9), jit_compile=...)` (one compiled model per sampler)
   and `generate` on token-id dicts with `stop_token_ids=None`; the end
   token is disabled in UniLM as in 1, so both decode the full length.
   What each step does beyond the network differs: for top-k tfnlp ranks
   the 64 largest logits (`tf.math.top_k`, the next power of two above k),
   for top-p it sorts the whole vocabulary, and it draws by Gumbel-max
   from counter-based Philox noise over the vocabulary; keras-hub's top-k
   takes `top_k(k=40)` of the softmax and draws among 40, its top-p (no `k`
   given) sorts the whole vocabulary too. Neither applies a repetition
   penalty here. keras-hub seeds its cache over all 32 + 64 slots (2, 3).
   UniLM still feeds two tokens per step (2).
5. `UniLM.continue_prompt` with the cache vs recomputing the whole sequence
   every step (`use_cache=False`), greedy and top-k 40 sampling, 8 prompts of
   32 tokens, 64 and 256 new tokens (end token disabled, `jit_compile`
   left at its default, as in 1). Reported like 1.

In 2, 3 and 4 the rounds alternate the two libraries (each function traced
first); reported: ms per decoding step (time / new tokens) and the median
per-round ratio keras-hub time / tfnlp time (> 1: tfnlp faster).

    pip install keras-hub==0.32.0   # benchmark-only dependency
    python benchmarks/generation_benchmark.py [--quick] [--rounds 3] [--parts ...] [--json PATH]
        [--lengths 16 64 128] [--new-tokens 64] [--continue-lengths 64 256]
"""

import argparse
import json
import os
import statistics
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from _common import markdown_table, write_json  # noqa: E402  (benchmarks/_common.py)

from tfnlp import models  # noqa: E402

VOCABULARY, BATCH, PROMPT = 8000, 16, 32
START, END, MASK = 2, 3, 4  # START is also UniLM's [CLS]
CONTINUE_BATCH = 8  # part 5
SAMPLERS = (("top-k 40", {"top_k": 40}), ("top-p 0.9", {"top_p": 0.9}))  # part 4


def unilm():
    keras.utils.set_random_seed(0)
    backbone = models.UniLMBackbone.from_architecture(
        "bert_mini", vocabulary_size=VOCABULARY, dropout=0.0, max_sequence_length=512
    )
    model = models.UniLM(backbone)
    bias = model.masked_lm_head.output_bias  # never end: decode the full length
    bias.assign(tf.tensor_scatter_nd_update(bias, [[END]], [-1e4]))
    return model


def alternating(functions, rounds):
    """Per-round seconds of each function, rounds alternating them (each traced first)."""
    for function in functions:
        function()  # trace (and compile)
    times = [[] for _ in functions]
    for _ in range(rounds):
        for function, values in zip(functions, times, strict=True):
            started = time.perf_counter()
            function()
            values.append(time.perf_counter() - started)
    return times


def comparison_row(ours, theirs, length, **settings):
    """ms per decoding step of both and the median per-round keras-hub / tfnlp time."""
    return {
        **settings, "new_tokens": length,
        "tfnlp_ms_per_step": round(1000 * statistics.median(ours) / length, 2),
        "keras_hub_ms_per_step": round(1000 * statistics.median(theirs) / length, 2),
        "keras_hub_time_over_tfnlp": round(statistics.median(
            t / o for o, t in zip(ours, theirs, strict=True)), 2),
    }


def cache_vs_recomputation(model, sources, rounds, lengths):
    rows = []
    for beam_size in (1, 4):
        for length in lengths:
            settings = {"end_id": END, "mask_id": MASK, "max_length": length,
                        "beam_size": beam_size}
            times = {True: [], False: []}
            for use_cache in times:
                model.generate(sources, use_cache=use_cache, **settings)  # trace
            for _ in range(rounds):
                for use_cache in times:
                    started = time.perf_counter()
                    model.generate(sources, use_cache=use_cache, **settings)
                    times[use_cache].append(time.perf_counter() - started)
            cached, recomputed = (statistics.median(times[c]) for c in (True, False))
            row = {
                "beam_size": beam_size, "new_tokens": length,
                "cached_tokens_per_s": round(BATCH * length / cached),
                "recomputed_tokens_per_s": round(BATCH * length / recomputed),
                "cache_speedup": round(statistics.median(
                    r / c for c, r in zip(times[True], times[False], strict=True)), 2),
            }
            print(json.dumps(row))
            rows.append(row)
    return rows


def keras_hub_comparison(model, sources, rounds, length):
    import keras_hub

    backbone = keras_hub.models.GPT2Backbone(
        VOCABULARY, 4, 4, 256, 1024, dropout=0.0, max_sequence_length=512
    )
    rows = []
    prompt = sources.numpy()
    inputs = {
        "token_ids": np.pad(prompt, [[0, 0], [0, length]]),
        "padding_mask": np.pad(np.ones_like(prompt), [[0, 0], [0, length]]),
    }
    for jit in (True, False):
        lm = keras_hub.models.GPT2CausalLM(backbone, preprocessor=None)
        lm.compile(sampler="greedy", jit_compile=jit)
        ours, theirs = alternating([
            lambda jit=jit: model.generate(sources, end_id=END, mask_id=MASK, max_length=length,
                                           jit_compile=jit)["token_ids"].numpy(),
            lambda lm=lm: lm.generate(inputs, stop_token_ids=None),
        ], rounds)
        row = comparison_row(ours, theirs, length, **{"jit_compile (both)": jit})
        print(json.dumps(row))
        rows.append(row)
    return rows


def prompts(batch):
    """`(B, 32)` `[CLS]`-led prompts of real tokens, and their (all ones) padding mask."""
    rng = np.random.default_rng(2)
    ids = np.concatenate([np.full((batch, 1), START),
                          rng.integers(5, VOCABULARY, (batch, PROMPT - 1))], 1)
    return tf.constant(ids, tf.int32), tf.ones([batch, PROMPT], tf.int32)


def continued(model, prompt, mask, length, **settings):
    """`continue_prompt`'s token ids (NumPy), checked to run the full length."""
    result = model.continue_prompt(prompt, mask, end_id=END, mask_id=MASK, max_length=length,
                                   **settings)
    assert int(tf.reduce_min(result["lengths"])) == length  # the full length decoded
    return result["token_ids"].numpy()


def sampling_comparison(model, rounds, length):
    import keras_hub

    keras.utils.set_random_seed(0)
    backbone = keras_hub.models.GPT2Backbone(
        VOCABULARY, 4, 4, 256, 1024, dropout=0.0, max_sequence_length=512
    )
    prompt, mask = prompts(BATCH)
    ids = prompt.numpy()  # GPT-2 reads the same 32 tokens (its [CLS] is just a token)
    inputs = {
        "token_ids": np.pad(ids, [[0, 0], [0, length]]),
        "padding_mask": np.pad(np.ones_like(ids), [[0, 0], [0, length]]),
    }

    def theirs(lm):
        result = lm.generate(inputs, stop_token_ids=None)
        assert result["token_ids"].shape == (BATCH, PROMPT + length)
        return result

    rows = []
    for name, option in SAMPLERS:
        for jit in (True, False):
            sampler = (keras_hub.samplers.TopKSampler(k=option["top_k"], seed=0)
                       if "top_k" in option else
                       keras_hub.samplers.TopPSampler(p=option["top_p"], seed=0))
            lm = keras_hub.models.GPT2CausalLM(backbone, preprocessor=None)
            lm.compile(sampler=sampler, jit_compile=jit)
            settings = {"top_k": 0, "top_p": 1.0, "temperature": 1.0, "seed": 0, **option}
            times = alternating([
                lambda jit=jit, settings=settings: continued(model, prompt, mask, length,
                                                             jit_compile=jit, **settings),
                lambda lm=lm: theirs(lm),
            ], rounds)
            row = comparison_row(*times, length, **{
                "sampling": name, "prompts": f"{BATCH} x {PROMPT}", "jit_compile (both)": jit,
                "tfnlp_parameters": model.count_params(), "keras_hub_parameters": lm.count_params(),
            })
            print(json.dumps(row))
            rows.append(row)
    return rows


def continue_cache_vs_recomputation(model, rounds, lengths):
    prompt, mask = prompts(CONTINUE_BATCH)
    rows = []
    for name, option in (("greedy", {}), *SAMPLERS[:1]):
        settings = {**option, "seed": 0} if option else {}
        for length in lengths:
            cached, recomputed = alternating([
                lambda use_cache=use_cache, length=length, settings=settings: continued(
                    model, prompt, mask, length, use_cache=use_cache, **settings)
                for use_cache in (True, False)
            ], rounds)
            row = {
                "decoding": name, "prompts": f"{CONTINUE_BATCH} x {PROMPT}",
                "new_tokens": length,
                "cached_tokens_per_s": round(CONTINUE_BATCH * length / statistics.median(cached)),
                "recomputed_tokens_per_s": round(
                    CONTINUE_BATCH * length / statistics.median(recomputed)),
                "cache_speedup": round(statistics.median(
                    r / c for c, r in zip(cached, recomputed, strict=True)), 2),
            }
            print(json.dumps(row))
            rows.append(row)
    return rows


def translator():
    """`transformer_small` with one shared vocabulary (tied output), end token never chosen."""
    keras.utils.set_random_seed(0)
    model = models.TransformerSeq2Seq.from_architecture("transformer_small", VOCABULARY, dropout=0.0)
    bias = model.token_logits.bias  # never end: decode the full length
    bias.assign(tf.tensor_scatter_nd_update(bias, [[END]], [-1e4]))
    return model


def translator_comparison(rounds, length):
    import keras_hub

    model = translator()
    keras.utils.set_random_seed(0)
    backbone = keras_hub.models.BartBackbone(
        VOCABULARY, num_layers=3, num_heads=4, hidden_dim=256, intermediate_dim=1024,
        dropout=0.0, max_sequence_length=max(128, 1 + length),
    )
    rng = np.random.default_rng(1)
    sources = np.concatenate([rng.integers(5, VOCABULARY, (BATCH, PROMPT - 1)),
                              np.full((BATCH, 1), END)], 1).astype("int32")  # S [SEP]
    source_mask = np.ones_like(sources)
    prompt = np.zeros((BATCH, 1 + length), "int32")  # the start token, then `length` slots
    prompt[:, 0] = START
    inputs = {
        "encoder_token_ids": sources, "encoder_padding_mask": source_mask,
        "decoder_token_ids": prompt, "decoder_padding_mask": (prompt != 0).astype("int32"),
    }
    sources, source_mask = tf.constant(sources), tf.constant(source_mask)

    def ours(jit):
        result = model.generate(sources, source_mask, start_id=START, end_id=END,
                                max_length=length, jit_compile=jit)
        assert int(tf.reduce_min(result["lengths"])) == length  # the full length decoded
        return result["token_ids"].numpy()

    def theirs(lm):
        result = lm.generate(inputs, stop_token_ids=None)
        assert result["decoder_token_ids"].shape == (BATCH, 1 + length)
        return result

    rows = []
    for jit in (True, False):
        lm = keras_hub.models.BartSeq2SeqLM(backbone, preprocessor=None)
        lm.compile(sampler="greedy", jit_compile=jit)
        times = alternating([lambda jit=jit: ours(jit), lambda lm=lm: theirs(lm)], rounds)
        row = comparison_row(*times, length, **{
            "sources": f"{BATCH} x {PROMPT}", "jit_compile (both)": jit,
            "tfnlp_parameters": model.count_params(), "keras_hub_parameters": lm.count_params(),
        })
        print(json.dumps(row))
        rows.append(row)
    return rows


def markdown(rows):
    tables = []
    if rows.get("cache_vs_recomputation"):
        tables.append(markdown_table(
            ["decoding", "new tokens", "cached tok/s", "recomputed tok/s", "cache speed-up"],
            [("greedy" if r["beam_size"] == 1 else f"beam {r['beam_size']}", r["new_tokens"],
              f"{r['cached_tokens_per_s']:,}", f"{r['recomputed_tokens_per_s']:,}",
              r["cache_speedup"]) for r in rows["cache_vs_recomputation"]]))
    for name, ours, theirs in (("vs_keras_hub", "tfnlp UniLM", "keras-hub GPT-2"),
                               ("translator_vs_keras_hub", "tfnlp TransformerSeq2Seq",
                                "keras-hub BART")):
        if rows.get(name):
            tables.append(markdown_table(
                ["greedy, new tokens", "jit_compile", f"{ours} ms / step", f"{theirs} ms / step",
                 "keras-hub time / tfnlp time"],
                [(r["new_tokens"], "with" if r["jit_compile (both)"] else "without",
                  r["tfnlp_ms_per_step"], r["keras_hub_ms_per_step"],
                  r["keras_hub_time_over_tfnlp"]) for r in rows[name]]))
    if rows.get("sampling_vs_keras_hub"):
        tables.append(markdown_table(
            ["sampling", "new tokens", "jit_compile", "tfnlp UniLM ms / step",
             "keras-hub GPT-2 ms / step", "keras-hub time / tfnlp time"],
            [(r["sampling"], r["new_tokens"], "with" if r["jit_compile (both)"] else "without",
              r["tfnlp_ms_per_step"], r["keras_hub_ms_per_step"],
              r["keras_hub_time_over_tfnlp"]) for r in rows["sampling_vs_keras_hub"]]))
    if rows.get("continue_cache_vs_recomputation"):
        tables.append(markdown_table(
            ["continue_prompt", "new tokens", "cached tok/s", "recomputed tok/s",
             "cache speed-up"],
            [(r["decoding"], r["new_tokens"], f"{r['cached_tokens_per_s']:,}",
              f"{r['recomputed_tokens_per_s']:,}", r["cache_speedup"])
             for r in rows["continue_cache_vs_recomputation"]]))
    return "\n\n".join(tables)


PARTS = ("cache", "gpt2", "translator", "sampling", "continue_cache")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run: 1 round, 16 new tokens, greedy and beam over 8 "
                             "tokens, part 5 over 8 and 16")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--lengths", type=int, nargs="+", default=[16, 64, 128],
                        help="new tokens of part 1")
    parser.add_argument("--new-tokens", type=int, default=64,
                        help="new tokens of parts 2, 3 and 4")
    parser.add_argument("--continue-lengths", type=int, nargs="+", default=[64, 256],
                        help="new tokens of part 5")
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS),
                        help="cache: 1, gpt2: 2, translator: 3, sampling: 4, continue_cache: 5 "
                             "(default: all)")
    parser.add_argument("--only-keras-hub", action="store_true", help="parts 2, 3 and 4 only")
    parser.add_argument("--json", default=None,
                        help="JSON results (default benchmarks/results/generation[_quick].json)")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.lengths, args.new_tokens, args.continue_lengths = 1, [8], 16, [8, 16]
    if args.only_keras_hub:
        args.parts = [p for p in args.parts if p not in ("cache", "continue_cache")]
    args.json = args.json or f"benchmarks/results/generation{'_quick' if args.quick else ''}.json"
    rows = {}
    if {"cache", "gpt2", "sampling", "continue_cache"} & set(args.parts):
        model = unilm()
        rng = np.random.default_rng(0)
        sources = np.concatenate([np.full((BATCH, 1), START),
                                  rng.integers(5, VOCABULARY, (BATCH, PROMPT - 2)),
                                  np.full((BATCH, 1), END)], 1)
        sources = tf.constant(sources, tf.int32)
        if "cache" in args.parts:
            rows["cache_vs_recomputation"] = cache_vs_recomputation(model, sources, args.rounds,
                                                                    args.lengths)
        if "gpt2" in args.parts:
            rows["vs_keras_hub"] = keras_hub_comparison(model, sources, args.rounds,
                                                        args.new_tokens)
        if "sampling" in args.parts:
            rows["sampling_vs_keras_hub"] = sampling_comparison(model, args.rounds,
                                                                args.new_tokens)
        if "continue_cache" in args.parts:
            rows["continue_cache_vs_recomputation"] = continue_cache_vs_recomputation(
                model, args.rounds, args.continue_lengths)
    if "translator" in args.parts:
        rows["translator_vs_keras_hub"] = translator_comparison(args.rounds, args.new_tokens)
    write_json(args.json, rows, settings={k: v for k, v in vars(args).items() if k != "json"})
    print()
    print(markdown(rows))
    print(f"\nwritten to {args.json}")


if __name__ == "__main__":
    main()
