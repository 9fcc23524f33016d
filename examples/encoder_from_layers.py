"""A small Transformer encoder classifier assembled from tfnlp layers, on bundled reviews.

Builds a text classifier from tfnlp layers (token embedding + sinusoidal
positions + `TransformerBlock`s + masked mean pooling), trains it for a few
epochs on the bundled fine-food reviews, reports held-out accuracy next to
the majority-class baseline, saves it as a `.keras` file and checks that the
reloaded model (safe mode) predicts the same.

    python examples/encoder_from_layers.py --epochs 3 --output runs/encoder_from_layers
"""

import argparse
import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# tfnlp first: before TensorFlow is imported it picks the CPU settings read
# then (oneDNN on x86-64 Linux, tfnlp/_cpu_defaults.py).
from tfnlp import datasets, layers  # noqa: E402

# isort: split
import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402


def build_classifier(vocab_size, hidden_dim, num_layers, num_heads, num_classes, dropout):
    token_ids = keras.Input(shape=(None,), dtype="int32", name="token_ids")
    # mask_zero: padding (id 0) is masked all the way to the pooling layer.
    x = keras.layers.Embedding(vocab_size, hidden_dim, mask_zero=True, name="token_embedding")(
        token_ids
    )
    x = keras.layers.Add(name="add_positions")([x, layers.SinusoidalPositionEncoding()(x)])
    for i in range(num_layers):
        x = layers.TransformerBlock(
            num_heads=num_heads,
            intermediate_dim=4 * hidden_dim,
            dropout=dropout,
            activation="gelu",
            name=f"transformer_block_{i}",
        )(x)
    x = keras.layers.GlobalAveragePooling1D(name="mean_over_tokens")(x)
    x = keras.layers.Dropout(dropout)(x)
    probabilities = keras.layers.Dense(num_classes, activation="softmax", name="classes")(x)
    return keras.Model(token_ids, probabilities, name="transformer_classifier")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--sequence-length", type=int, default=128)
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--hidden-dim", type=int, default=64)
    parser.add_argument("--num-layers", type=int, default=2)
    parser.add_argument("--num-heads", type=int, default=4)
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--max-train-examples", type=int, default=None)
    parser.add_argument("--output", default="runs/encoder_from_layers")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    keras.utils.set_random_seed(args.seed)

    train = datasets.load_fine_food_reviews("train")
    if args.max_train_examples:
        train = train.take(args.max_train_examples)
    validation = datasets.load_fine_food_reviews("validation")
    test = datasets.load_fine_food_reviews("test")

    vectorize = keras.layers.TextVectorization(
        max_tokens=args.vocab_size, output_sequence_length=args.sequence_length
    )
    vectorize.adapt(train.map(lambda text, label: text).batch(256))

    def batches(dataset, shuffle):
        if shuffle:
            dataset = dataset.shuffle(4096, seed=args.seed)
        dataset = dataset.batch(args.batch_size)
        return dataset.map(
            lambda text, label: (tf.cast(vectorize(text), tf.int32), label),
            num_parallel_calls=tf.data.AUTOTUNE,
        ).prefetch(tf.data.AUTOTUNE)

    model = build_classifier(
        vectorize.vocabulary_size(), args.hidden_dim, args.num_layers, args.num_heads,
        len(datasets.FINE_FOOD_LABELS), args.dropout,
    )
    model.compile(
        optimizer=keras.optimizers.Adam(1e-3),
        loss="sparse_categorical_crossentropy",
        metrics=["accuracy"],
    )
    model.fit(batches(train, True), validation_data=batches(validation, False),
              epochs=args.epochs, verbose=2, shuffle=False)

    _, accuracy = model.evaluate(batches(test, False), verbose=0)
    test_labels = np.array([int(label) for _, label in test])
    majority = max(test_labels.mean(), 1 - test_labels.mean())
    print(f"test accuracy {accuracy:.4f}  (majority-class baseline {majority:.4f})")

    os.makedirs(args.output, exist_ok=True)
    path = os.path.join(args.output, "classifier.keras")
    model.save(path)
    with open(os.path.join(args.output, "vocab.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(vectorize.get_vocabulary()))
    restored = keras.saving.load_model(path, safe_mode=True)
    sample = next(iter(batches(test, False)))[0]
    difference = np.abs(restored.predict(sample, verbose=0) - model.predict(sample, verbose=0)).max()
    print(f"saved {path}; reloaded in safe mode, max prediction difference {difference:.2e}")
    return accuracy, majority


if __name__ == "__main__":
    main()
