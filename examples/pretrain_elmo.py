"""Pretrain a small ELMo biLM on the bundled English novels.

Builds a word vocabulary from the training chapters (the output softmax;
inputs are characters, so no word is ever out of vocabulary on the input
side), trains `ELMoBiLM` with its sampled softmax, keeps the weights of the
best validation epoch, and reports the exact forward and backward
perplexity on held-out chapters next to a unigram model of the same targets
(add-one smoothed training counts). Writes TensorBoard logs and
`results.json` to `--logs`, the biLM (`bilm.keras`) and its word vocabulary
(`words.txt`) to `--output`; `--export` also writes a SavedModel that maps
raw text to ELMo vectors.

    python examples/pretrain_elmo.py --logs runs/elmo --output saved_models/elmo
"""

import argparse
import json
import os
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# tfnlp first: before TensorFlow is imported it picks the CPU settings read
# then (oneDNN on x86-64 Linux, tfnlp/_cpu_defaults.py).
from tfnlp import data, datasets, export, models  # noqa: E402

# isort: split
import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402


def sentences(split, limit=None):
    return [s for document in datasets.read_documents("en_novels", split) for s in document][:limit]


def unigram_perplexities(train, test):
    """Perplexity of add-one smoothed unigram models of each direction's targets."""
    result = {}
    for direction, ids, weights in (("forward", "next_word_ids", "next_word_weights"),
                                    ("backward", "previous_word_ids", "previous_word_weights")):
        counts = np.ones(train["size"], np.float64)
        np.add.at(counts, train[ids][train[weights] > 0], 1.0)
        log_probs = np.log(counts / counts.sum())
        result[direction] = float(np.exp(-log_probs[test[ids][test[weights] > 0]].mean()))
    return result


def targets_of(dataset, size):
    """All targets of a (character_ids, targets) dataset as flat numpy arrays."""
    parts = {k: [] for k in models.elmo.TARGET_KEYS}
    for _, targets in dataset:
        for k, v in targets.items():
            parts[k].append(v.numpy().reshape(-1))
    return {**{k: np.concatenate(v) for k, v in parts.items()}, "size": size}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--architecture", "--preset", dest="architecture",  # --preset: until the next release
                        default="elmo_small", choices=sorted(models.ELMO_ARCHITECTURES))
    parser.add_argument("--units", type=int, default=None, help="override the preset's LSTM cells")
    parser.add_argument("--projection-dim", type=int, default=None, help="override the preset")
    parser.add_argument("--num-sampled", type=int, default=None, help="override the preset")
    parser.add_argument("--filters", default=None,
                        help="override the preset, e.g. '1:8,2:8,3:16' (width:count)")
    parser.add_argument("--vocabulary-size", type=int, default=20000)
    parser.add_argument("--min-count", type=int, default=2)
    parser.add_argument("--sequence-length", type=int, default=40, help="tokens with <S>, </S>")
    parser.add_argument("--max-characters", type=int, default=50)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--steps-per-epoch", type=int, default=None)
    parser.add_argument("--learning-rate", type=float, default=1e-3)
    parser.add_argument("--dtype", default="mixed_bfloat16", choices=["float32", "mixed_bfloat16"])
    parser.add_argument("--max-train-sentences", type=int, default=None)
    parser.add_argument("--max-eval-sentences", type=int, default=None)
    parser.add_argument("--logs", default="runs/elmo")
    parser.add_argument("--output", default="saved_models/elmo",
                        help="directory for bilm.keras and words.txt")
    parser.add_argument("--export", default=None, help="also write a SavedModel here")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    start = time.time()
    keras.utils.set_random_seed(args.seed)
    os.makedirs(args.logs, exist_ok=True)
    os.makedirs(args.output, exist_ok=True)

    train = sentences("train", args.max_train_sentences)
    vocabulary = data.build_word_vocabulary(train, args.vocabulary_size, min_count=args.min_count)
    with open(os.path.join(args.output, "words.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(vocabulary) + "\n")

    def batches(texts, shuffle):
        dataset = data.elmo_dataset(
            tf.data.Dataset.from_tensor_slices(texts), vocabulary,
            sequence_length=args.sequence_length, max_characters=args.max_characters,
            batch_size=args.batch_size, shuffle_buffer=len(texts) if shuffle else 0,
            seed=args.seed, drop_remainder=shuffle,
        )
        return dataset.map(models.elmo_batch)

    overrides = {"max_characters": args.max_characters, "seed": args.seed, "dtype": args.dtype}
    for name in ("units", "projection_dim", "num_sampled"):
        if getattr(args, name) is not None:
            overrides[name] = getattr(args, name)
    if args.filters:
        overrides["filters"] = [tuple(int(n) for n in f.split(":")) for f in args.filters.split(",")]
    bilm = models.ELMoBiLM.from_architecture(args.architecture, len(vocabulary), **overrides)
    bilm.compile(optimizer=keras.optimizers.Adam(args.learning_rate, global_clipnorm=10.0))

    validation = batches(sentences("validation", args.max_eval_sentences), shuffle=False)
    test = batches(sentences("test", args.max_eval_sentences), shuffle=False)
    train_batches = batches(train, shuffle=True)
    if args.steps_per_epoch:
        train_batches = train_batches.repeat()
    callbacks = [
        keras.callbacks.TensorBoard(args.logs),
        keras.callbacks.EarlyStopping("val_loss", patience=1, restore_best_weights=True),
    ]
    train_start = time.time()
    history = bilm.fit(train_batches, validation_data=validation, epochs=args.epochs,
                       steps_per_epoch=args.steps_per_epoch, callbacks=callbacks, verbose=2,
                       shuffle=False)
    train_seconds = time.time() - train_start

    metrics = bilm.evaluate(test, return_dict=True, verbose=0)
    unigram = unigram_perplexities(targets_of(batches(train, shuffle=False), len(vocabulary)),
                                   targets_of(test, len(vocabulary)))
    result = {
        "test_perplexity": {
            "forward": float(metrics["forward_perplexity"]),
            "backward": float(metrics["backward_perplexity"]),
        },
        "unigram_perplexity": unigram,
        "epochs_trained": len(history.history["loss"]),
        "train_sentences": len(train),
        "vocabulary_size": len(vocabulary),
        "parameters": bilm.count_params(),
        "parameters_without_softmax": bilm.count_params() - bilm.word_softmax.count_params(),
        "train_seconds": round(train_seconds, 1),
        "dtype": args.dtype,
        "architecture": args.architecture,
    }
    with tf.summary.create_file_writer(os.path.join(args.logs, "test")).as_default():
        for direction in ("forward", "backward"):
            tf.summary.scalar(f"test_{direction}_perplexity", result["test_perplexity"][direction], step=0)
            tf.summary.scalar(f"unigram_{direction}_perplexity", unigram[direction], step=0)

    result["bilm"] = os.path.join(args.output, "bilm.keras")
    bilm.save(result["bilm"])
    if args.export:
        result["saved_model"] = export.export_elmo(bilm, args.export)
    result["seconds"] = round(time.time() - start, 1)
    with open(os.path.join(args.logs, "results.json"), "w") as f:
        json.dump(result, f, indent=2)
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
