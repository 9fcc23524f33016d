"""Time to the first `fit` step: the optimizer built before tracing vs inside it.

Without a `tf.distribute` strategy Keras 3.15 builds the optimizer while it
traces the first training step: every slot variable is created inside the
`tf.function`, with its own initializer `tf.cond`, and the function is traced
twice. tfnlp's trainable models build it first (`Task.make_train_function` in
`tfnlp/models/task.py`). This script times one `fit` call of one batch on
a freshly compiled model, in a fresh process each time (tracing caches are
per process), with it as shipped (`built_first`) and switched off
(`keras_default`), alternating which goes first, and reports the median
per-round ratio keras_default / built_first (> 1: building first is faster).
Both must end with the same loss: only when the variables are made differs.

Models (small, as in the tests and a first experiment): a 2-layer
`TransformerSeq2Seq` (hidden 32), BERT-tiny's `BertPretrainer` (vocabulary
300, length 16) and `elmo_small`'s `ELMoBiLM` (vocabulary 200).

Run it: `python benchmarks/first_fit_benchmark.py [--rounds 3]` (about 4
minutes). Writes `results/first_fit.json`.
"""

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import markdown_table, run_child, write_json  # noqa: E402

MODELS = ("seq2seq", "bert_pretrainer", "elmo")
SETTINGS = ("built_first", "keras_default")


def _model_and_batch(name):
    import numpy as np
    import tensorflow as tf

    from tfnlp import data, models

    rng = np.random.default_rng(0)
    if name == "seq2seq":
        model = models.TransformerSeq2Seq(50, num_encoder_layers=2, num_decoder_layers=2,
                                          hidden_dim=32, num_heads=4, intermediate_dim=64)
        ids = rng.integers(1, 50, (4, 12)).astype("int32")
        mask = np.ones((4, 12), "int32")
        x = {"encoder_token_ids": ids, "encoder_padding_mask": mask,
             "decoder_token_ids": ids, "decoder_padding_mask": mask}
        return model, (x, ids, mask.astype("float32"))
    if name == "bert_pretrainer":
        backbone = models.BertBackbone.from_architecture("bert_tiny", vocabulary_size=300, max_sequence_length=16)
        model = models.BertPretrainer(backbone)
        x = {"token_ids": rng.integers(5, 300, (4, 16)).astype("int32"),
             "segment_ids": np.zeros((4, 16), "int32"), "padding_mask": np.ones((4, 16), "int32"),
             "masked_positions": rng.integers(1, 16, (4, 3)).astype("int32")}
        y = {"mlm": rng.integers(5, 300, (4, 3)).astype("int32"), "nsp": np.zeros(4, "int32")}
        weights = {"mlm": np.ones((4, 3), "float32"), "nsp": np.ones(4, "float32")}
        return model, (x, y, weights)
    vocabulary = data.build_word_vocabulary(["the cat sat on the mat ."] * 4, 200)
    model = models.ELMoBiLM.from_architecture("elmo_small", 200, max_characters=16, num_sampled=50)
    sentences = tf.data.Dataset.from_tensor_slices(["the cat sat on the mat ."] * 8)
    batch = next(iter(data.elmo_dataset(sentences, vocabulary, sequence_length=10, max_characters=16,
                                        batch_size=4).map(models.elmo_batch)))
    return model, batch


def _child(name, setting):
    import keras

    from tfnlp.models.task import Task

    if setting == "keras_default":
        Task.make_train_function = keras.Model.make_train_function
    keras.utils.set_random_seed(0)
    model, batch = _model_and_batch(name)
    model.compile()
    dataset = __import__("tensorflow").data.Dataset.from_tensors(batch)
    start = time.perf_counter()
    history = model.fit(dataset, epochs=1, verbose=0)
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "loss": float(history.history["loss"][0])}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", default=None, help="results (default: results/first_fit.json)")
    parser.add_argument("--child", nargs=2, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(_child(*args.child)))
        return None
    rows = []
    for name in MODELS:
        times = {s: [] for s in SETTINGS}
        losses = {s: set() for s in SETTINGS}
        for round_index in range(args.rounds):
            order = SETTINGS if round_index % 2 == 0 else SETTINGS[::-1]
            for setting in order:
                result = run_child(__file__, ["--child", name, setting], f"{name} {setting}", 600)
                times[setting].append(result["seconds"])
                losses[setting].add(round(result["loss"], 5))
        ratios = [d / b for d, b in zip(times["keras_default"], times["built_first"], strict=True)]
        rows.append({
            "model": name,
            "built_first_s": round(statistics.median(times["built_first"]), 2),
            "keras_default_s": round(statistics.median(times["keras_default"]), 2),
            "speedup": round(statistics.median(ratios), 2),
            "same_loss": losses["built_first"] == losses["keras_default"],
        })
        print(rows[-1], flush=True)
    path = args.json or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "first_fit.json")
    write_json(path, rows, rounds=args.rounds)
    print(markdown_table(list(rows[0]), [list(r.values()) for r in rows]))
    return rows


if __name__ == "__main__":
    main()
