"""Texts in memory: preprocessed once into arrays (shipped) vs a tf.data pipeline per call.

A text classifier's `predict`, `evaluate` and `fit` take a list of texts.
They used to turn it into a `tf.data` pipeline that tokenized each batch;
every new iterator over such a pipeline (each `predict` call, each epoch of
`fit`) makes TensorFlow instantiate the tokenizer's graph again, about a
third of a second on a 2-core CPU before the first text is read. Texts in
memory are now preprocessed once, eagerly, into the model's input arrays,
which Keras batches as it batches token ids (`Task`, `TextArrays`). A
`tf.data.Dataset` of texts still goes through a pipeline (it may not fit in
memory); this script times that path as the "pipeline" column: the
classifier given `Dataset.from_tensor_slices(texts)`, batched by 32, which is
what in-memory texts went through before.

For a BERT-tiny `BertClassifier` (sequence length 128, 2 classes), in one
process: `predict` on 1, 32 and 1,000 reviews, and 3 epochs of `fit` on
1,000 reviews, each repeated, alternating which path goes first; the
median of each is reported, with the ratio pipeline / in memory (> 1: the
in-memory path is faster). Both paths must give the same predictions.

Run it: `python benchmarks/text_inputs_benchmark.py [--repeats 5]` (about 3
minutes). Writes `results/text_inputs.json`.
"""

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import markdown_table, write_json  # noqa: E402

# isort: split
import tfnlp  # noqa: E402, F401  (before TensorFlow: its CPU settings)

# isort: split
import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from tfnlp import data, datasets, models  # noqa: E402


def _classifier(vocabulary):
    keras.utils.set_random_seed(0)
    backbone = models.BertBackbone.from_architecture("bert_tiny", vocabulary_size=len(vocabulary))
    classifier = models.BertClassifier(
        backbone, preprocessor=data.BertPreprocessor(data.WordPieceTokenizer(vocabulary), 128),
        labels=list(datasets.FINE_FOOD_LABELS),
    )
    classifier.compile()
    return classifier


def _pipeline(texts, labels=None):
    """The texts (and class ids) as a dataset of batches of 32: the pipeline path."""
    parts = texts if labels is None else (texts, labels)
    return tf.data.Dataset.from_tensor_slices(parts).batch(32)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--output", default=os.path.join(os.path.dirname(__file__), "results",
                                                         "text_inputs.json"))
    args = parser.parse_args(argv)

    reviews = datasets.read_fine_food_reviews("train")[:1000]
    texts = [t for t, _ in reviews]
    labels = np.array([y for _, y in reviews], np.int32)  # class ids
    vocabulary = data.learn_wordpiece_vocabulary(texts, 2000, progress=False)
    classifier = _classifier(vocabulary)

    cases = {
        f"predict, {n} review{'s' if n > 1 else ''}": (
            lambda n=n: classifier.predict(texts[:n], verbose=0),
            lambda n=n: classifier.predict(_pipeline(texts[:n]), verbose=0),
        )
        for n in (1, 32, 1000)
    }
    cases["fit, 1,000 reviews, 3 epochs"] = (
        lambda: classifier.fit(texts, labels, batch_size=32, epochs=3, shuffle=False, verbose=0),
        lambda: classifier.fit(_pipeline(texts, labels), epochs=3, verbose=0),
    )
    # The same predictions both ways (and a first call of each, untimed).
    in_memory, pipeline = (np.asarray(f()) for f in cases["predict, 1000 reviews"])
    np.testing.assert_allclose(in_memory, pipeline, atol=1e-5)

    rows = []
    for name, (shipped, old) in cases.items():
        times = {"in memory": [], "pipeline": []}
        for repeat in range(args.repeats):
            order = [("in memory", shipped), ("pipeline", old)]
            for label, run in order if repeat % 2 == 0 else order[::-1]:
                started = time.perf_counter()
                run()
                times[label].append(time.perf_counter() - started)
        medians = {k: statistics.median(v) for k, v in times.items()}
        rows.append({"case": name, "in_memory_s": round(medians["in memory"], 4),
                     "pipeline_s": round(medians["pipeline"], 4),
                     "ratio": round(medians["pipeline"] / medians["in memory"], 2)})
        print(f"{name}: in memory {medians['in memory']:.3f} s, pipeline {medians['pipeline']:.3f} s",
              flush=True)
    print(markdown_table(["case", "in memory s", "pipeline s", "pipeline / in memory"],
                         [[r["case"], r["in_memory_s"], r["pipeline_s"], r["ratio"]] for r in rows]))
    write_json(args.output, rows, repeats=args.repeats, same_predictions=True)


if __name__ == "__main__":
    main()
