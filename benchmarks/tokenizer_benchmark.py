"""Tokenizer throughput: BERT's normalisation in-graph vs the NFKC one, tensorflow-text, Hugging Face.

`WordPieceTokenizer` splits text as BERT's `BasicTokenizer` does in
TensorFlow ops on code points (`tfnlp/data/_bert_text.py`), then runs
tensorflow-text's `FastWordpieceTokenizer` on the words. Before, it was
tensorflow-text's `FastBertTokenizer` (one C++ op, which also folds
compatibility characters; still `normalization="nfkc"`). This measures what
exactness costs, on the same 8,000-token vocabulary and the same sentences
(English novels; Chinese poems), in one process, rounds alternating:

- tfnlp `normalization="bert"` (the default) and `"nfkc"`, in a `tf.function`;
- tensorflow-text's reference `BertTokenizer` (NFKC as well);
- `transformers.BertTokenizer` (Rust `tokenizers`, batch call, its own
  threads), when transformers is installed.

Usage: `python benchmarks/tokenizer_benchmark.py [--rounds 7] [--sentences 20000]`.
Figures: benchmarks/README.md.
"""

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402
import tensorflow_text as tf_text  # noqa: E402

from tfnlp import data, datasets  # noqa: E402


def _sentences(corpus, count):
    sentences = [s for d in datasets.read_documents(corpus, "train") for s in d]
    return (sentences * (count // len(sentences) + 1))[:count]


def _candidates(vocabulary):
    found = {}
    for normalization in ("bert", "nfkc"):
        tokenizer = data.WordPieceTokenizer(vocabulary, normalization=normalization)
        found[f"tfnlp {normalization}"] = tf.function(lambda x, t=tokenizer: t(x).flat_values)
    table = tf.lookup.StaticVocabularyTable(
        tf.lookup.KeyValueTensorInitializer(vocabulary, tf.range(len(vocabulary), dtype=tf.int64)), 1)
    reference = tf_text.BertTokenizer(table, lower_case=True, token_out_type=tf.int64)
    found["tensorflow-text BertTokenizer"] = tf.function(lambda x: reference.tokenize(x).flat_values)
    try:
        import transformers
    except ImportError:
        return found
    path = os.path.join(tempfile.mkdtemp(), "vocab.txt")
    data.save_vocabulary(vocabulary, path)
    hugging_face = transformers.BertTokenizer(path, do_lower_case=True)
    found["transformers BertTokenizer (Rust)"] = lambda x: hugging_face(
        [t.decode("utf-8") for t in x.numpy().tolist()], add_special_tokens=False)["input_ids"]
    return found


def measure(corpus, vocabulary_size, count, rounds):
    sentences = _sentences(corpus, count)
    vocabulary = data.learn_wordpiece_vocabulary(sentences[:20000], vocabulary_size, progress=False)
    batch = tf.constant(sentences)
    candidates = _candidates(vocabulary)
    times = {name: [] for name in candidates}
    for fn in candidates.values():
        fn(batch)  # trace / warm up
    for _ in range(rounds):
        for name, fn in candidates.items():
            start = time.perf_counter()
            result = fn(batch)
            if hasattr(result, "numpy"):
                result.numpy()
            times[name].append(time.perf_counter() - start)
    anchor = statistics.median(times["tfnlp bert"])
    return [{"corpus": corpus, "tokenizer": name, "sentences": len(sentences),
             "sentences_per_s": round(len(sentences) / statistics.median(t)),
             "time_vs_tfnlp_bert": round(statistics.median(t) / anchor, 2)} for name, t in times.items()]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--sentences", type=int, default=20000)
    parser.add_argument("--vocabulary-size", type=int, default=8000)
    args = parser.parse_args()
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores, TF {tf.__version__}")
    for corpus in ("en_novels", "zh_poems"):
        for row in measure(corpus, args.vocabulary_size, args.sentences, args.rounds):
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
