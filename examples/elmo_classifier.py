"""Classify the bundled fine-food reviews with ELMo features from a pretrained biLM.

Loads the biLM written by `examples/pretrain_elmo.py`, freezes it, and trains
the same small classifier twice on the reviews: once on ELMo (a learned
`ScalarMix` of all `2L + 1` layers, Peters et al. eq. 1) and once on the
context-independent character-CNN vectors only (layer 0). Each review is
one sequence `<S> words </S>` (at most `--max-tokens` tokens); the
classifier mean-pools the vectors over its real tokens and applies dropout,
a ReLU layer and a softmax.

Because mean pooling is linear, the pooled mix equals the mix of the
pooled layers, so the frozen biLM runs once per review and the classifier
trains on the pooled layers `(L + 1, 2P)`; the script checks that the
end-to-end model (`ELMoEmbedder` -> pooling -> head, on character ids)
gives the same predictions. Reports test accuracy and macro-F1 of both
next to the majority class, and the learned layer weights, to
`results.json` in `--logs` (with TensorBoard logs). `--export` writes a
SavedModel of the task's `ELMoEmbedder`: raw text in, mixed and per-layer
ELMo vectors out.

    python examples/elmo_classifier.py --bilm saved_models/elmo/bilm.keras \
        --logs runs/elmo_classifier --export saved_models/elmo_reviews
"""

import argparse
import json
import os
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# tfnlp first: before TensorFlow is imported it picks the CPU settings read
# then (oneDNN on x86-64 Linux, tfnlp/_cpu_defaults.py).
from tfnlp import data, datasets, export, layers, models  # noqa: E402

# isort: split
import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

LABELS = list(datasets.FINE_FOOD_LABELS)


def character_batches(texts, max_tokens, max_characters, batch_size):
    """Raw reviews -> character ids `(B, T, C)` of `<S> words </S>`, in order."""

    def encode(text):
        return data.character_ids(data.sentence_tokens(text, max_tokens).to_tensor(""), max_characters)

    dataset = tf.data.Dataset.from_tensor_slices(list(texts)).batch(batch_size)
    return dataset.map(encode).prefetch(tf.data.AUTOTUNE)


def pooled_layers(bilm, texts, args):
    """Mean over each review's real tokens of every biLM layer: float32 `(N, L + 1, 2P)`.

    Also returns the number of real tokens read.
    """

    @tf.function(input_signature=[tf.TensorSpec([None, None, bilm.max_characters], tf.int32)])
    def pool(ids):
        outputs = bilm(ids, training=False)
        mask = tf.cast(outputs["padding_mask"], tf.float32)[:, None, :, None]
        layers_ = tf.cast(outputs["layers"], tf.float32)
        return tf.reduce_sum(layers_ * mask, axis=2) / tf.reduce_sum(mask, axis=2), tf.reduce_sum(mask)

    batches = character_batches(texts, args.max_tokens, bilm.max_characters, args.batch_size)
    pooled, tokens = zip(*[pool(ids) for ids in batches], strict=True)
    return np.concatenate([p.numpy() for p in pooled]), int(sum(float(t) for t in tokens))


def head(num_layers, width, args):
    """Pooled layers `(L', 2P)` -> ScalarMix -> dropout -> ReLU layer -> class probabilities."""
    pooled = keras.Input((num_layers, width), name="pooled_layers")
    mix = layers.ScalarMix(name="scalar_mix")
    x = keras.layers.Dropout(args.dropout)(mix(pooled))
    x = keras.layers.Dense(args.hidden_dim, activation="relu")(x)
    x = keras.layers.Dropout(args.dropout)(x)
    outputs = keras.layers.Dense(len(LABELS), activation="softmax")(x)
    model = keras.Model(pooled, outputs)
    model.compile(keras.optimizers.Adam(args.learning_rate), "sparse_categorical_crossentropy",
                  metrics=["accuracy"])
    return model, mix


def scores(labels, predictions):
    accuracy = float(np.mean(labels == predictions))
    f1 = []
    for c in range(len(LABELS)):
        tp = np.sum((predictions == c) & (labels == c))
        precision = tp / max(np.sum(predictions == c), 1)
        recall = tp / max(np.sum(labels == c), 1)
        f1.append(0.0 if tp == 0 else 2 * precision * recall / (precision + recall))
    return {"accuracy": accuracy, "macro_f1": float(np.mean(f1))}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bilm", default="saved_models/elmo/bilm.keras")
    parser.add_argument("--max-tokens", type=int, default=192)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--hidden-dim", type=int, default=64)
    parser.add_argument("--dropout", type=float, default=0.2)
    parser.add_argument("--epochs", type=int, default=60)
    parser.add_argument("--learning-rate", type=float, default=3e-3)
    parser.add_argument("--max-train-examples", type=int, default=None)
    parser.add_argument("--logs", default="runs/elmo_classifier")
    parser.add_argument("--export", default=None, help="also write the ELMoEmbedder SavedModel here")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    start = time.time()
    keras.utils.set_random_seed(args.seed)
    os.makedirs(args.logs, exist_ok=True)

    # compile=False: the pretraining optimizer has no place in the task model.
    bilm = keras.saving.load_model(args.bilm, safe_mode=True, compile=False)
    splits = {
        "train": datasets.read_fine_food_reviews("train")[: args.max_train_examples],
        "validation": datasets.read_fine_food_reviews("validation"),
        "test": datasets.read_fine_food_reviews("test"),
    }
    labels = {k: np.array([y for _, y in v]) for k, v in splits.items()}
    feature_start = time.time()
    features, tokens = {}, 0
    for name, split in splits.items():
        features[name], count = pooled_layers(bilm, [t for t, _ in split], args)
        tokens += count
    feature_seconds = time.time() - feature_start

    result = {}
    variants = {"elmo": slice(None), "layer_0_only": slice(0, 1)}
    heads = {}
    for name, which in variants.items():
        keras.utils.set_random_seed(args.seed)
        model, mix = head(features["train"][:, which].shape[1], features["train"].shape[-1], args)
        model.fit(
            features["train"][:, which], labels["train"], batch_size=args.batch_size,
            validation_data=(features["validation"][:, which], labels["validation"]),
            epochs=args.epochs, verbose=0,
            callbacks=[
                keras.callbacks.EarlyStopping("val_loss", patience=5, restore_best_weights=True),
                keras.callbacks.TensorBoard(os.path.join(args.logs, name)),
            ],
        )
        predictions = model.predict(features["test"][:, which], verbose=0).argmax(-1)
        result[name] = scores(labels["test"], predictions)
        result[name]["layer_weights"] = [round(float(w), 4) for w in mix.mixing_weights().numpy()]
        result[name]["scale"] = round(float(mix.scale.numpy()), 4)
        heads[name] = (model, mix)
    majority = int(np.mean(labels["train"]) >= 0.5)
    result["majority_class"] = scores(labels["test"], np.full_like(labels["test"], majority))

    # The same classifier end to end on character ids, through ELMoEmbedder.
    model, mix = heads["elmo"]
    embedder = models.ELMoEmbedder(bilm)
    embedder.scalar_mix.set_weights(mix.get_weights())
    ids = keras.Input((None, bilm.max_characters), dtype="int32")
    outputs = embedder(ids)
    mask = keras.ops.cast(outputs["padding_mask"], "float32")[:, :, None]
    mixed = keras.ops.cast(outputs["elmo"], "float32")
    pooled = keras.ops.sum(mixed * mask, axis=1) / keras.ops.sum(mask, axis=1)
    x = pooled
    for layer in model.layers[3:]:  # after input, ScalarMix and the first dropout
        x = layer(x)
    end_to_end = keras.Model(ids, x)
    sample = [t for t, _ in splits["test"][:64]]
    direct = np.concatenate([end_to_end.predict(b, verbose=0) for b in character_batches(
        sample, args.max_tokens, bilm.max_characters, args.batch_size)])
    pooled_way = model.predict(features["test"][:64], verbose=0)
    result["end_to_end_max_difference"] = float(np.abs(direct - pooled_way).max())

    result.update({
        "train_examples": len(splits["train"]),
        "feature_tokens": int(tokens),
        "feature_seconds": round(feature_seconds, 1),
        "feature_tokens_per_second": round(tokens / feature_seconds, 1),
    })
    with tf.summary.create_file_writer(os.path.join(args.logs, "test")).as_default():
        for name in variants:
            for metric in ("accuracy", "macro_f1"):
                tf.summary.scalar(f"{name}_test_{metric}", result[name][metric], step=0)
    if args.export:
        result["saved_model"] = export.export_elmo(embedder, args.export, max_tokens=args.max_tokens)
    result["seconds"] = round(time.time() - start, 1)
    with open(os.path.join(args.logs, "results.json"), "w") as f:
        json.dump(result, f, indent=2)
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
