"""Input pipelines and tokenizers: are they fast enough to never starve training?

1. Tokenizer throughput (sentences/s): tfnlp `WordPieceTokenizer`
   (FastBertTokenizer) vs tensorflow-text's reference `BertTokenizer` on the
   same vocabulary and the same bundled sentences, alternating rounds in one
   process; the median ratio is reported.
2. Pipeline throughput on ONE core (tf.data private thread pool of 1, intra-op
   parallelism 1): BERT pretraining examples (NSP + MLM, length 128) and
   classification examples (length 128), examples/s.
3. The training step rate of a BERT-mini-shaped model (4 layers, hidden 256,
   4 heads, FFN 1024; token + segment + position embeddings, masked-LM head on
   the gathered positions tied to the embedding, NSP head) built from tfnlp
   layers, batch 32 x 128, float32, on all cores: the examples/s training
   consumes. The ratio pipeline / training says how far input is from being
   the bottleneck.

    python benchmarks/data_benchmark.py [--json PATH]
"""

import argparse
import json
import os
import statistics
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_text as tf_text  # noqa: E402

from _common import write_json  # noqa: E402  (benchmarks/_common.py)
from tfnlp import data, datasets, layers  # noqa: E402

SEQUENCE_LENGTH, BATCH, PREDICTIONS = 128, 32, 20


def one_core(dataset):
    options = tf.data.Options()
    options.threading.private_threadpool_size = 1
    options.threading.max_intra_op_parallelism = 1
    return dataset.with_options(options)


def examples_per_second(dataset, batches):
    iterator = iter(dataset)
    next(iterator)  # build and warm up
    start = time.perf_counter()
    for _ in range(batches):
        next(iterator)
    return batches * BATCH / (time.perf_counter() - start)


def tokenizers(vocabulary, sentences, rounds):
    ours = data.WordPieceTokenizer(vocabulary)
    table = tf.lookup.StaticVocabularyTable(
        tf.lookup.KeyValueTensorInitializer(vocabulary, tf.range(len(vocabulary), dtype=tf.int64)), 1
    )
    reference = tf_text.BertTokenizer(table, lower_case=True, token_out_type=tf.int64)
    batch = tf.constant(sentences)
    ours_fn = tf.function(lambda x: ours(x).flat_values)
    reference_fn = tf.function(lambda x: reference.tokenize(x).flat_values)
    ours_fn(batch), reference_fn(batch)
    ours_times, reference_times = [], []
    for _ in range(rounds):
        for fn, times in ((ours_fn, ours_times), (reference_fn, reference_times)):
            start = time.perf_counter()
            fn(batch).numpy()
            times.append(time.perf_counter() - start)
    return {
        "sentences": len(sentences),
        "tfnlp_sentences_per_s": len(sentences) / statistics.median(ours_times),
        "bert_tokenizer_sentences_per_s": len(sentences) / statistics.median(reference_times),
        "speedup": statistics.median(r / o for o, r in zip(ours_times, reference_times, strict=True)),
    }


def bert_mini(vocabulary_size):
    """A BERT-mini-shaped pretraining model from tfnlp layers (a stand-in for BertPretrainer)."""
    inputs = {
        name: keras.Input((length,), dtype="int32", name=name)
        for name, length in [
            ("token_ids", SEQUENCE_LENGTH), ("segment_ids", SEQUENCE_LENGTH),
            ("padding_mask", SEQUENCE_LENGTH), ("masked_positions", PREDICTIONS),
        ]
    }
    embedding = keras.layers.Embedding(vocabulary_size, 256)
    x = embedding(inputs["token_ids"]) + keras.layers.Embedding(2, 256)(inputs["segment_ids"])
    x = keras.layers.Add()([x, layers.PositionEmbedding(SEQUENCE_LENGTH)(x)])
    x = keras.layers.LayerNormalization(epsilon=1e-12)(x)
    for _ in range(4):
        x = layers.TransformerBlock(4, 1024, activation="gelu", layer_norm_epsilon=1e-12)(
            x, padding_mask=inputs["padding_mask"]
        )
    gathered = keras.ops.take_along_axis(x, inputs["masked_positions"][:, :, None], axis=1)
    gathered = keras.layers.LayerNormalization(epsilon=1e-12)(
        keras.layers.Dense(256, activation="gelu")(gathered)
    )
    mlm = keras.ops.matmul(gathered, keras.ops.transpose(embedding.embeddings))
    nsp = keras.layers.Dense(2)(keras.layers.Dense(256, activation="tanh")(x[:, 0]))
    return keras.Model(inputs, {"mlm": mlm, "nsp": nsp})


def training_examples_per_second(vocabulary_size, steps):
    model = bert_mini(vocabulary_size)
    model.compile(
        optimizer="adam",
        loss={
            "mlm": keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            "nsp": keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        },
    )
    x = {
        "token_ids": tf.random.uniform((BATCH, SEQUENCE_LENGTH), 5, vocabulary_size, tf.int32),
        "segment_ids": tf.zeros((BATCH, SEQUENCE_LENGTH), tf.int32),
        "padding_mask": tf.ones((BATCH, SEQUENCE_LENGTH), tf.int32),
        "masked_positions": tf.random.uniform((BATCH, PREDICTIONS), 1, SEQUENCE_LENGTH, tf.int32),
    }
    y = {
        "mlm": tf.random.uniform((BATCH, PREDICTIONS), 5, vocabulary_size, tf.int32),
        "nsp": tf.zeros((BATCH,), tf.int32),
    }
    dataset = tf.data.Dataset.from_tensors((x, y)).repeat()
    model.fit(dataset, steps_per_epoch=3, verbose=0)  # trace and warm up
    start = time.perf_counter()
    model.fit(dataset, steps_per_epoch=steps, verbose=0)
    return steps * BATCH / (time.perf_counter() - start)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vocabulary-size", type=int, default=8000)
    parser.add_argument("--batches", type=int, default=40)
    parser.add_argument("--train-steps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--json", default="benchmarks/results/data.json")
    args = parser.parse_args()

    documents = datasets.load_documents("en_novels", "train")
    vocabulary = data.learn_wordpiece_vocabulary(documents, args.vocabulary_size, progress=False)
    tokenizer = data.WordPieceTokenizer(vocabulary)
    sentences = [s for d in datasets.read_documents("en_novels", "test") for s in d]
    results = {"tokenizer": tokenizers(vocabulary, sentences, args.rounds)}

    pretraining = data.bert_pretraining_dataset(
        documents.repeat(), tokenizer, SEQUENCE_LENGTH, PREDICTIONS, BATCH, shuffle_buffer=1000
    )
    reviews = datasets.load_fine_food_reviews("train").repeat()
    classification = data.classification_dataset(
        reviews, data.BertPreprocessor(tokenizer, SEQUENCE_LENGTH), BATCH, shuffle_buffer=1000
    )
    results["pipelines_one_core_examples_per_s"] = {
        "bert_pretraining": examples_per_second(one_core(pretraining), args.batches),
        "classification": examples_per_second(one_core(classification), args.batches),
    }
    training = training_examples_per_second(len(vocabulary), args.train_steps)
    results["bert_mini_training_examples_per_s"] = training
    results["pipeline_over_training"] = {
        k: v / training for k, v in results["pipelines_one_core_examples_per_s"].items()
    }
    pipelines = results["pipelines_one_core_examples_per_s"]
    rows = {
        "tokenizer": [results["tokenizer"]],
        "pipelines": [
            {"pipeline": name, "one_core_examples_per_s": pipelines[name],
             "pipeline_over_training": results["pipeline_over_training"][name]}
            for name in pipelines
        ],
        "training": [{"model": "bert_mini-shaped", "examples_per_s": training}],
    }
    write_json(args.json, rows, settings={k: v for k, v in vars(args).items() if k != "json"})
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
