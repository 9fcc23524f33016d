"""Time to a pipeline's first batch: tfnlp's map functions as shipped vs converted by AutoGraph.

`Dataset.map` runs AutoGraph over the function it is given and, recursively,
over every function that one calls, tensorflow-text's included, before it
traces the graph: seconds of Python AST work per process for a pipeline such
as BERT pretraining. tfnlp's map functions are plain graph code (no Python
`if` or `for` on tensors), so they are marked
`tf.autograph.experimental.do_not_convert`. This script builds each tfnlp
pipeline on the bundled corpora and takes its first batch, in a fresh process
each time (AutoGraph caches conversions per process), as shipped
(`shipped`) and with the mark switched off (`autograph`), alternating which
goes first, and reports the median per-round ratio autograph / shipped
(> 1: the mark helps). Both must give the same first batch (a checksum).

Run it: `python benchmarks/first_batch_benchmark.py [--rounds 3]` (about 4
minutes). Writes `results/first_batch.json`.
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import markdown_table, run_child, write_json  # noqa: E402

PIPELINES = ("bert_pretraining", "unilm_pretraining", "unilm_finetuning", "classification",
             "encoder_decoder", "elmo")
SETTINGS = ("shipped", "autograph")


def _vocabularies(directory):
    """A WordPiece and an ELMo word vocabulary from the bundled texts, written once for every child."""
    from tfnlp import data, datasets

    texts = [s for d in datasets.read_documents("en_novels", "train")[:40] for s in d]
    data.save_vocabulary(data.learn_wordpiece_vocabulary(texts, 2000, progress=False),
                         os.path.join(directory, "wordpiece.txt"))
    data.save_vocabulary(data.build_word_vocabulary(texts, 2000), os.path.join(directory, "words.txt"))


def _pipeline(name, directory):
    import tensorflow as tf

    from tfnlp import data, datasets

    tokenizer = data.WordPieceTokenizer(data.load_vocabulary(os.path.join(directory, "wordpiece.txt")))
    if name in ("bert_pretraining", "unilm_pretraining"):
        build = data.bert_pretraining_dataset if name == "bert_pretraining" else data.unilm_pretraining_dataset
        return build(datasets.load_documents("en_novels", "train"), tokenizer, 128, batch_size=32)
    if name == "elmo":
        return data.elmo_dataset(datasets.load_documents("en_novels", "train"),
                                 data.load_vocabulary(os.path.join(directory, "words.txt")),
                                 sequence_length=32, max_characters=50, batch_size=32)
    if name == "classification":
        return data.classification_dataset(datasets.load_fine_food_reviews("train"),
                                           data.BertPreprocessor(tokenizer, 128), 32)
    pairs = datasets.read_text_pairs("bible_archaic_modern", "train")[:2000]
    pairs = tf.data.Dataset.from_tensor_slices(tuple(map(list, zip(*pairs, strict=True))))
    if name == "unilm_finetuning":
        return data.unilm_finetuning_dataset(pairs, tokenizer, 96, batch_size=32)
    return data.encoder_decoder_dataset(pairs, tokenizer, tokenizer, 64, 64, batch_size=32)


def _child(name, setting, directory):
    import tensorflow as tf

    if setting == "autograph":  # before tfnlp builds anything: every map function converted again
        tf.autograph.experimental.do_not_convert = lambda func=None: func
    import numpy as np

    import tfnlp  # noqa: F401

    start = time.perf_counter()
    dataset = _pipeline(name, directory)
    built = time.perf_counter()
    batch = next(iter(dataset))
    done = time.perf_counter()
    checksum = sum(int(np.asarray(t, "int64").sum()) for t in tf.nest.flatten(batch) if t.dtype.is_integer)
    return {"build_s": built - start, "first_batch_s": done - start, "checksum": checksum}


def _median(results, key):
    return round(statistics.median(r[key] for r in results), 2)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", default=None, help="results (default: results/first_batch.json)")
    parser.add_argument("--child", nargs=3, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(_child(*args.child)))
        return None
    rows = []
    with tempfile.TemporaryDirectory() as directory:
        _vocabularies(directory)
        for name in PIPELINES:
            results = {s: [] for s in SETTINGS}
            for round_index in range(args.rounds):
                for setting in SETTINGS if round_index % 2 == 0 else SETTINGS[::-1]:
                    results[setting].append(
                        run_child(__file__, ["--child", name, setting, directory], f"{name} {setting}", 600))

            ratios = [a["first_batch_s"] / s["first_batch_s"]
                      for a, s in zip(results["autograph"], results["shipped"], strict=True)]
            rows.append({
                "pipeline": name,
                "shipped_build_s": _median(results["shipped"], "build_s"),
                "autograph_build_s": _median(results["autograph"], "build_s"),
                "shipped_first_batch_s": _median(results["shipped"], "first_batch_s"),
                "autograph_first_batch_s": _median(results["autograph"], "first_batch_s"),
                "speedup": round(statistics.median(ratios), 2),
                "same_batch": len({r["checksum"] for s in SETTINGS for r in results[s]}) == 1,
            })
            print(rows[-1], flush=True)
    path = args.json or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "first_batch.json")
    write_json(path, rows, rounds=args.rounds)
    print(markdown_table(list(rows[0]), [list(r.values()) for r in rows]))
    return rows


if __name__ == "__main__":
    main()
