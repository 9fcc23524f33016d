"""Export time: every signature traced once, or twice as before.

`tfnlp.export` saves a root object holding the signatures and the
`tf.Variable`s they read, which it finds by tracing the signatures
(`export._common.captured_variables`). `tf.saved_model.save` then traces
them again unless the first trace happened in a save context: the save
context's variable policy is part of `tf.function`'s cache key. tfnlp traces
in one ("shipped"); "traced twice" is the earlier code, which traced outside
it. Both write the same SavedModel (checked here: the same signatures give
the same outputs on the same texts).

Each round exports fresh models of each kind with both settings, in
alternating order, in this process:

- "bert_classifier": `BertClassifier` on `bert_tiny` with its preprocessor
  (sequence length 128, 8,000-token vocabulary): `serving_default` and
  `classify_pairs`;
- "unilm": `UniLM` on a `bert_tiny`-sized backbone exported for generation
  (`serving_default`, `sample`, `continue`; beam 4, 32 new tokens).

    python benchmarks/export_benchmark.py [--rounds 3] [--json PATH]
"""

import argparse
import os
import statistics
import sys
import tempfile
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import tfnlp  # noqa: E402, F401  (tfnlp's CPU settings first)

# isort: split
import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from _common import markdown_table, write_json  # noqa: E402

from tfnlp import data, export, models  # noqa: E402
from tfnlp.export import _common as export_common  # noqa: E402

SETTINGS = ("shipped", "traced_twice")
TEXTS = ["Great coffee, would buy again!", "", "émigré café 中文"]


def _traced_outside_a_save_context(functions, options):
    """The earlier `captured_variables`: a trace that `tf.saved_model.save` cannot reuse."""
    seen, variables = set(), []
    for function in functions:
        for variable in function.get_concrete_function().variables:
            if id(variable) not in seen:
                seen.add(id(variable))
                variables.append(variable)
    return variables


def _vocabulary():
    words = [f"w{i}" for i in range(8000 - len(data.SPECIAL_TOKENS))]
    return list(data.SPECIAL_TOKENS) + words


def _export(kind, vocabulary, directory):
    keras.utils.set_random_seed(0)
    tokenizer = data.WordPieceTokenizer(vocabulary)
    if kind == "bert_classifier":
        backbone = models.BertBackbone.from_architecture("bert_tiny", vocabulary_size=len(vocabulary))
        classifier = models.BertClassifier(backbone, 2, preprocessor=data.BertPreprocessor(tokenizer, 128),
                                           labels=["no", "yes"])
        return export.export_classifier(classifier, directory)
    backbone = models.UniLMBackbone.from_architecture("bert_tiny", vocabulary_size=len(vocabulary))
    return export.export_seq2seq(models.UniLM(backbone), directory, source_tokenizer=tokenizer,
                                 target_tokenizer=tokenizer, source_length=64, max_length=32, beam_size=4)


def _timed(kind, setting, vocabulary, directory):
    shipped = export_common.captured_variables
    if setting == "traced_twice":
        export_common.captured_variables = _traced_outside_a_save_context
    try:
        start = time.perf_counter()
        path = _export(kind, vocabulary, directory)
        seconds = time.perf_counter() - start
    finally:
        export_common.captured_variables = shipped
    outputs = tf.saved_model.load(path).signatures["serving_default"](text=tf.constant(TEXTS))
    return seconds, {k: v.numpy() for k, v in outputs.items()}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    vocabulary = _vocabulary()
    rows = []
    with tempfile.TemporaryDirectory() as root:
        for kind in ("bert_classifier", "unilm"):
            seconds = {s: [] for s in SETTINGS}
            outputs = []
            for round_index in range(args.rounds):
                for setting in SETTINGS if round_index % 2 == 0 else SETTINGS[::-1]:
                    directory = os.path.join(root, f"{kind}_{setting}_{round_index}")
                    took, served = _timed(kind, setting, vocabulary, directory)
                    seconds[setting].append(took)
                    outputs.append(served)
            same = all(set(o) == set(outputs[0]) and all(
                np.array_equal(o[k], outputs[0][k]) for k in o) for o in outputs)
            ratios = [t / s for t, s in zip(seconds["traced_twice"], seconds["shipped"], strict=True)]
            rows.append({
                "export": kind,
                "shipped_s": round(statistics.median(seconds["shipped"]), 2),
                "traced_twice_s": round(statistics.median(seconds["traced_twice"]), 2),
                "speedup": round(statistics.median(ratios), 2),
                "same_outputs": same,
            })
            print(rows[-1], flush=True)
    path = args.json or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "export.json")
    write_json(path, rows, rounds=args.rounds)
    print(markdown_table(list(rows[0]), [list(r.values()) for r in rows]))
    return rows


if __name__ == "__main__":
    main()
