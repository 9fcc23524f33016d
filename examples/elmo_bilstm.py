"""ELMo added to a task model: a word BiLSTM classifier on the reviews, with and without ELMo.

Peters et al. (2018, section 3.3) add ELMo to an existing task model by
concatenating the ELMo vector `γ · Σ_j softmax(s)_j · h_j` (a `ScalarMix`
learned with the task, the biLM frozen) with each token's context-free
vector, at the input of the task's RNN. This script does exactly that on
the bundled fine-food reviews and trains the same task model twice, from
the same seed, on the same tokens:

- without ELMo: word embeddings (learned from the training reviews) ->
  dropout -> BiLSTM -> max-pooling over real tokens -> dropout -> softmax;
- with ELMo: the same, with the mixed ELMo vector (dropout 0.5, as in the
  paper) concatenated to each word embedding.

The biLM is the one written by `examples/pretrain_elmo.py`. Frozen, it runs
once per review: its `2L + 1` layers are stored and the task model learns
the mix on them; the script checks that the end-to-end model (character ids
-> `ELMoEmbedder` -> the same task layers) gives the same probabilities.
Each arm trains with early stopping on the validation split and restores
its best epoch; `--seeds N` repeats both arms over N seeds (the same
initial word embeddings per seed; dropout and batch order may differ, as
the arms draw different numbers of random values). Reports each test
accuracy and macro-F1, their mean and sd, and a paired bootstrap over the
test reviews of the difference in mean accuracy (the test set's sampling
noise, which the seeds do not show), to `results.json` in `--logs`.

    python examples/elmo_bilstm.py --bilm saved_models/elmo/bilm.keras \
        --logs runs/elmo_bilstm --seeds 3
"""

import argparse
import json
import logging
import os
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# tfnlp first: before TensorFlow is imported it picks the CPU settings read
# then (oneDNN on x86-64 Linux, tfnlp/_cpu_defaults.py).
from tfnlp import data, datasets, layers, metrics, models  # noqa: E402

# isort: split
import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from tfnlp.data.elmo import UNK  # noqa: E402

LABELS = list(datasets.FINE_FOOD_LABELS)


def scores(labels, predictions):
    report = metrics.classification_report(labels, predictions, LABELS)
    return {"accuracy": report["accuracy"], "macro_f1": report["macro_f1"]}


def padded_tokens(texts, max_tokens):
    """ELMo's token sequences `<S> words </S>`, padded with b"": bytes `(N, max_tokens)`."""
    ragged = data.sentence_tokens(tf.constant(list(texts), tf.string), max_tokens)
    return ragged.to_tensor("", shape=[None, max_tokens]).numpy()


def word_ids(tokens, vocabulary):
    """`(N, T)` int32 ids of padded tokens: vocabulary index + 1, 0 for padding."""
    index = {w.encode("utf-8"): i + 1 for i, w in enumerate(vocabulary)}
    index[b""] = 0
    unknown = index[UNK.encode("utf-8")]
    return np.array([[index.get(w, unknown) for w in row] for row in tokens], np.int32)


def elmo_layers(bilm, tokens, batch_size):
    """The frozen biLM's layers for padded tokens: float32 `(N, 2L + 1, T, 2P)`."""

    @tf.function(input_signature=[tf.TensorSpec([None, tokens.shape[1]], tf.string)])
    def run(words):
        ids = data.character_ids(words, bilm.max_characters)
        return tf.cast(bilm(ids, training=False)["layers"], tf.float32)

    return np.concatenate([run(tokens[start:start + batch_size]).numpy()
                           for start in range(0, len(tokens), batch_size)])


def paired_bootstrap(differences, seed=0, rounds=10_000):
    """Resamples the test reviews: the 95% interval of the mean accuracy
    difference, and the share of resamples where it is not above zero.

    `differences[i]`: for test review `i`, the with-ELMo arm's share of
    seeds right minus the other's.
    """
    rng = np.random.default_rng(seed)
    means = np.array([differences[rng.integers(0, len(differences), len(differences))].mean()
                      for _ in range(rounds)])
    return {
        "difference": round(float(differences.mean()), 4),
        "interval_95": [round(float(q), 4) for q in np.percentile(means, [2.5, 97.5])],
        "share_not_above_zero": round(float(np.mean(means <= 0)), 4),
        "rounds": rounds,
    }


class TaskLayers:
    """The task model's layers, applied to word ids and (optionally) ELMo vectors."""

    def __init__(self, vocabulary_size, args):
        self.embedding = keras.layers.Embedding(vocabulary_size + 1, args.embedding_dim, name="words")
        self.input_dropout = keras.layers.Dropout(args.dropout)
        self.elmo_dropout = keras.layers.Dropout(0.5)
        self.bilstm = keras.layers.Bidirectional(
            keras.layers.LSTM(args.units, return_sequences=True), name="bilstm"
        )
        self.output_dropout = keras.layers.Dropout(args.dropout)
        self.classes = keras.layers.Dense(len(LABELS), activation="softmax", name="classes")

    def __call__(self, ids, elmo=None):
        mask = keras.ops.not_equal(ids, 0)
        x = self.input_dropout(self.embedding(ids))
        if elmo is not None:
            x = keras.ops.concatenate([x, self.elmo_dropout(keras.ops.cast(elmo, "float32"))], axis=-1)
        states = self.bilstm(x, mask=mask)
        # Max over real tokens only (padding gets -1e9 before the max).
        states = keras.ops.where(mask[:, :, None], states, -1e9)
        return self.classes(self.output_dropout(keras.ops.max(states, axis=1)))


def task_model(vocabulary_size, max_tokens, elmo_shape, args):
    """Word ids (and stored biLM layers) -> class probabilities; returns the model, its layers, its mix."""
    ids = keras.Input((max_tokens,), dtype="int32", name="word_ids")
    task = TaskLayers(vocabulary_size, args)
    if elmo_shape is None:
        model = keras.Model(ids, task(ids))
        mix = None
    else:
        stored = keras.Input(elmo_shape, name="elmo_layers")
        mix = layers.ScalarMix(name="scalar_mix")
        model = keras.Model([ids, stored], task(ids, mix(stored)))
    model.compile(keras.optimizers.Adam(args.learning_rate), "sparse_categorical_crossentropy",
                  metrics=["accuracy"])
    return model, task, mix


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bilm", default="saved_models/elmo/bilm.keras")
    parser.add_argument("--max-tokens", type=int, default=128, help="tokens with <S>, </S>")
    parser.add_argument("--vocabulary-size", type=int, default=10000)
    parser.add_argument("--min-count", type=int, default=2)
    parser.add_argument("--embedding-dim", type=int, default=100)
    parser.add_argument("--units", type=int, default=64)
    parser.add_argument("--dropout", type=float, default=0.3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--patience", type=int, default=3)
    parser.add_argument("--learning-rate", type=float, default=2e-3)
    parser.add_argument("--max-train-examples", type=int, default=None)
    parser.add_argument("--seeds", type=int, default=1, help="repeat both arms over seeds 0..N-1")
    parser.add_argument("--logs", default="runs/elmo_bilstm")
    args = parser.parse_args(argv)
    start = time.time()
    os.makedirs(args.logs, exist_ok=True)
    # Each arm and seed is a new model with its own traced steps: TensorFlow's
    # retracing notes about them say nothing wrong.
    logging.getLogger("tensorflow").setLevel(logging.ERROR)

    # compile=False: the pretraining optimizer has no place in the task model.
    bilm = keras.saving.load_model(args.bilm, safe_mode=True, compile=False)
    splits = {
        "train": datasets.read_fine_food_reviews("train")[: args.max_train_examples],
        "validation": datasets.read_fine_food_reviews("validation"),
        "test": datasets.read_fine_food_reviews("test"),
    }
    labels = {k: np.array([y for _, y in v]) for k, v in splits.items()}
    texts = {k: [t for t, _ in v] for k, v in splits.items()}
    vocabulary = data.build_word_vocabulary(texts["train"], args.vocabulary_size, min_count=args.min_count)
    tokens = {k: padded_tokens(v, args.max_tokens) for k, v in texts.items()}
    ids = {k: word_ids(v, vocabulary) for k, v in tokens.items()}
    feature_start = time.time()
    stored = {k: elmo_layers(bilm, v, args.batch_size) for k, v in tokens.items()}
    feature_seconds = time.time() - feature_start

    arms = {"bilstm": False, "bilstm_elmo": True}
    runs = {name: [] for name in arms}
    correct = {name: [] for name in arms}  # per seed, per test review
    kept = None
    for seed in range(args.seeds):
        for name, with_elmo in arms.items():
            keras.utils.set_random_seed(seed)
            model, task, mix = task_model(len(vocabulary), args.max_tokens,
                                          stored["train"].shape[1:] if with_elmo else None, args)

            def inputs(split, with_elmo=with_elmo):
                return [ids[split], stored[split]] if with_elmo else ids[split]

            stopping = keras.callbacks.EarlyStopping("val_loss", patience=args.patience,
                                                     restore_best_weights=True)
            history = model.fit(
                inputs("train"), labels["train"], batch_size=args.batch_size,
                validation_data=(inputs("validation"), labels["validation"]),
                epochs=args.epochs, verbose=0,
                callbacks=[stopping,
                           keras.callbacks.TensorBoard(os.path.join(args.logs, f"{name}_seed{seed}"))],
            )
            predictions = model.predict(inputs("test"), batch_size=128, verbose=0).argmax(-1)
            correct[name].append(predictions == labels["test"])
            val_losses = history.history["val_loss"]
            run = {"seed": seed, **scores(labels["test"], predictions),
                   "epochs": len(val_losses), "best_epoch": int(np.argmin(val_losses)) + 1}
            if mix is not None:
                run["layer_weights"] = [round(float(w), 4) for w in mix.mixing_weights().numpy()]
                run["scale"] = round(float(mix.scale.numpy()), 4)
                if kept is None:
                    kept = (model, task, mix)
            runs[name].append(run)
            print(f"seed {seed} {name}: test accuracy {run['accuracy']:.4f}, "
                  f"macro-F1 {run['macro_f1']:.4f} ({run['epochs']} epochs)", flush=True)

    result = {}
    for name, seeds in runs.items():
        summary = {"runs": seeds}
        for metric in ("accuracy", "macro_f1"):
            values = np.array([run[metric] for run in seeds])
            summary[f"{metric}_mean"] = round(float(values.mean()), 4)
            summary[f"{metric}_sd"] = round(float(values.std(ddof=1)) if len(values) > 1 else 0.0, 4)
        result[name] = summary
    result["elmo_minus_without"] = round(
        result["bilstm_elmo"]["accuracy_mean"] - result["bilstm"]["accuracy_mean"], 4
    )
    result["paired_bootstrap"] = paired_bootstrap(
        np.mean(correct["bilstm_elmo"], axis=0) - np.mean(correct["bilstm"], axis=0)
    )
    majority = int(np.mean(labels["train"]) >= 0.5)
    result["majority_class"] = scores(labels["test"], np.full_like(labels["test"], majority))

    # The ELMo arm end to end on character ids: ELMoEmbedder (the same frozen
    # biLM, the learned mix) -> the same task layers.
    model, task, mix = kept
    embedder = models.ELMoEmbedder(bilm)
    embedder.scalar_mix.set_weights(mix.get_weights())
    characters = keras.Input((args.max_tokens, bilm.max_characters), dtype="int32")
    words = keras.Input((args.max_tokens,), dtype="int32")
    end_to_end = keras.Model([characters, words], task(words, embedder(characters)["elmo"]))
    test_characters = data.character_ids(tf.constant(tokens["test"][:64]), bilm.max_characters)
    direct = end_to_end.predict([test_characters, ids["test"][:64]], verbose=0)
    stored_way = model.predict([ids["test"][:64], stored["test"][:64]], verbose=0)
    result["end_to_end_max_difference"] = float(np.abs(direct - stored_way).max())

    result.update({
        "train_examples": len(splits["train"]),
        "word_vocabulary_size": len(vocabulary),
        "feature_seconds": round(feature_seconds, 1),
    })
    with tf.summary.create_file_writer(os.path.join(args.logs, "test")).as_default():
        for name in arms:
            for metric in ("accuracy", "macro_f1"):
                tf.summary.scalar(f"{name}_test_{metric}_mean", result[name][f"{metric}_mean"], step=0)
    result["seconds"] = round(time.time() - start, 1)
    with open(os.path.join(args.logs, "results.json"), "w") as f:
        json.dump(result, f, indent=2)
    print(json.dumps({k: v for k, v in result.items() if k not in arms}, indent=2))
    for name in arms:
        print(f"{name}: accuracy {result[name]['accuracy_mean']:.4f} ± {result[name]['accuracy_sd']:.4f}, "
              f"macro-F1 {result[name]['macro_f1_mean']:.4f} ± {result[name]['macro_f1_sd']:.4f}")
    return result


if __name__ == "__main__":
    main()
