"""Taggers on the bundled English-EWT corpora: pretrained against from scratch, and a learning curve.

Trains the taggers of issue 57 ("arms") on one of the bundled tagged
corpora (`tfnlp.datasets.load_tagged`) and reports their test figures,
each arm from the same seed on the same sentences:

- `bert`: `BertTokenClassifier` on the BERT written by
  `examples/pretrain_bert.py` (`make demo`'s: `backbone.keras`,
  `vocab.txt` in `--pretrained`);
- `bert_scratch`: the same network from random weights (the control);
- `transformer`: `TransformerTokenClassifier` from scratch (2 blocks, 128
  wide), on the same WordPiece vocabulary;
- `elmo`: `BiLSTMTokenClassifier` (TagLM: learned word and character-CNN
  vectors, 2 BiLSTMs of 128) with the frozen ELMo biLM written by
  `examples/pretrain_elmo.py` (`--elmo`, its `bilm.keras`) mixed in;
- `bilstm`: the same tagger without ELMo (the control).

The word-level arms look words up in a vocabulary of the run's own
training sentences (lowercased, the words seen `--min-word-count` times).

`en_ewt_upos` (part of speech) trains on EWT train, validates on EWT dev
and is scored by test token accuracy. `en_uner_ewt` (entities) trains on
UniversalNER's dev split (its train split is not bundled) less 200
sentences held out for validation, and is tested on its test split; the
figure is seqeval's entity micro-F1 (`tfnlp.metrics`). Each run keeps
the weights of its epoch with the best validation figure (entity F1, not
the loss, which a tagger of `O` alone makes look good for many epochs). A
word past `--sequence-length` counts as wrong (as `O` for entities).

`--learning-curve 250 500 1000` also trains every arm on random subsets
of those sizes (a subset per seed, nested: each holds the smaller ones),
for at least `--min-steps` optimizer steps (more epochs on fewer
sentences), and plots the figure against the number of training
sentences (`--plot`, with the figures in a JSON file beside it).

    python examples/finetune_tagger.py --corpus en_uner_ewt --arms bert bert_scratch transformer \
        --learning-curve 250 500 1000 --seeds 3 --plot docs/tagging_curve.png
"""

import argparse
import json
import math
import os
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# tfnlp first: before TensorFlow is imported it picks the CPU settings read
# then (oneDNN on x86-64 Linux, tfnlp/_cpu_defaults.py).
from tfnlp import data, datasets, metrics, models, training  # noqa: E402

# isort: split
import keras  # noqa: E402
import numpy as np  # noqa: E402

ARMS = ("bert", "bert_scratch", "transformer", "elmo", "bilstm")
LABELS = {"bert": "BERT-tiny, pretrained (the demo's)", "bert_scratch": "the same BERT from random weights",
          "transformer": "Transformer from scratch (2 x 128)", "elmo": "BiLSTM + ELMo (the pretrained biLM)",
          "bilstm": "the same BiLSTM without ELMo"}
VALIDATION_SENTENCES = 200  # held out of UniversalNER's dev split


def corpus_splits(name, seed=1234):
    """`{"train", "validation", "test"}` `TaggedData` of a bundled corpus (see the module doc)."""
    test = datasets.load_tagged(name, "test")
    if name == "en_ewt_upos":
        return {"train": datasets.load_tagged(name, "train"),
                "validation": datasets.load_tagged(name, "validation"), "test": test}
    pool = datasets.load_tagged(name, "validation")
    order = np.random.default_rng(seed).permutation(len(pool))
    return {"train": subset(pool, order[VALIDATION_SENTENCES:]),
            "validation": subset(pool, order[:VALIDATION_SENTENCES]), "test": test}


def subset(tagged, indices):
    return data.TaggedData([tagged.words[i] for i in indices], [tagged.tags[i] for i in indices],
                           tagged.tag_names, tagged.path)


def build(arm, args, vocabulary, preprocessor, train):
    tag_names = train.tag_names
    if arm in ("elmo", "bilstm"):
        words = data.WordTaggerPreprocessor(
            data.build_tagger_vocabulary(train.words, min_count=args.min_word_count), tag_names,
            max_words=args.sequence_length)
        bilm = None
        if arm == "elmo":
            # Frozen, in the dtype policy it was pretrained in (mixed_bfloat16 for
            # `examples/pretrain_elmo.py`'s: its forward pass is most of a step).
            bilm = keras.saving.load_model(args.elmo, safe_mode=True, compile=False)
        return models.BiLSTMTokenClassifier(elmo=bilm, preprocessor=words, crf=args.crf,
                                            dropout=args.bilstm_dropout)
    if arm == "transformer":
        return models.TransformerTokenClassifier(preprocessor=preprocessor, tag_names=tag_names,
                                                 num_segments=1, crf=args.crf, dropout=args.dropout)
    saved = keras.saving.load_model(os.path.join(args.pretrained, "backbone.keras"), safe_mode=True)
    # Rebuilt with the fine-tuning dropout and float32 (the file keeps the pretraining's).
    backbone = models.BertBackbone.from_config(dict(saved.get_config(), dropout=args.dropout,
                                                    dtype="float32"))
    if arm == "bert":
        backbone.set_weights(saved.get_weights())
    return models.BertTokenClassifier(backbone, tag_names=tag_names, preprocessor=preprocessor,
                                      crf=args.crf, dropout=args.dropout)


def score(tagger, tagged, entities):
    """Entity micro-F1 (entity tags) or token accuracy of `tagger` on `TaggedData`."""
    predicted = tagger.predict_tags(tagged.words, untagged="O" if entities else None, batch_size=64)
    if entities:
        return metrics.entity_report(tagged.tags, predicted)["micro"]["f1"]
    return metrics.token_accuracy(tagged.tags, [[t or "" for t in row] for row in predicted])


class BestValidation(keras.callbacks.Callback):
    """Keeps the weights of the epoch with the best validation figure (`score`): entity F1 for
    entities, whose loss and accuracy an all-`O` tagger makes look good for many epochs."""

    def __init__(self, validation, entities):
        super().__init__()
        self.validation, self.entities = validation, entities
        self.best, self.best_epoch, self.weights = -1.0, None, None

    def on_epoch_end(self, epoch, logs=None):
        figure = score(self.model, self.validation, self.entities)
        if figure > self.best:
            self.best, self.best_epoch, self.weights = figure, epoch, self.model.get_weights()

    def on_train_end(self, logs=None):
        self.model.set_weights(self.weights)


def train_arm(arm, seed, train, splits, args, vocabulary, preprocessor, entities):
    keras.utils.set_random_seed(seed)  # before any layer is built: weights and dropout
    tagger = build(arm, args, vocabulary, preprocessor, train)
    per_epoch = math.ceil(len(train) / args.batch_size)
    epochs = max(args.epochs, math.ceil(args.min_steps / per_epoch))
    steps = epochs * per_epoch
    learning_rate = args.learning_rate if arm == "bert" else args.scratch_learning_rate
    tagger.compile(optimizer=training.bert_adamw(
        training.LinearWarmupLinearDecay(learning_rate, max(1, steps // 10), steps)))
    best = BestValidation(splits["validation"], entities)
    started = time.perf_counter()
    tagger.fit(train.words, train.tags, batch_size=args.batch_size, epochs=epochs, verbose=0,
               callbacks=[best])
    seconds = time.perf_counter() - started
    return score(tagger, splits["test"], entities), epochs, seconds, best


def run_point(args, splits, train_count, vocabulary, preprocessor, entities):
    """Every arm over the seeds on `train_count` training sentences (None: all)."""
    point = {"train_sentences": train_count or len(splits["train"])}
    for arm in args.arms:
        figures = []
        for seed in range(args.seed, args.seed + args.seeds):
            train = splits["train"]
            if train_count:
                order = np.random.default_rng(seed).permutation(len(train))
                train = subset(train, order[:train_count])  # nested: a prefix of one permutation
            figure, epochs, seconds, best = train_arm(arm, seed, train, splits, args, vocabulary,
                                                      preprocessor, entities)
            figures.append(figure)
            print(json.dumps({"arm": arm, "seed": seed, "train_sentences": len(train),
                              "test": round(figure, 4), "validation": round(best.best, 4),
                              "best_epoch": best.best_epoch + 1, "epochs": epochs,
                              "seconds": round(seconds, 1)}), flush=True)
        point[arm] = {"mean": float(np.mean(figures)), "runs": figures,
                      "sd": float(np.std(figures, ddof=1)) if len(figures) > 1 else 0.0}
    return point


def plot(points, path, corpus, entities):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    counts = [p["train_sentences"] for p in points]
    figure, axes = plt.subplots(figsize=(6, 4), dpi=120)
    for arm in ARMS:
        if arm in points[0]:
            axes.errorbar(counts, [100 * p[arm]["mean"] for p in points],
                          yerr=[100 * p[arm]["sd"] for p in points], marker="o", capsize=3,
                          label=LABELS[arm])
    axes.set_xscale("log")
    axes.set_xticks(counts, [str(c) for c in counts])
    axes.set_xlabel("training sentences")
    axes.set_ylabel("test entity micro-F1 (%)" if entities else "test token accuracy (%)")
    axes.set_title(f"{corpus} test, mean ± sd of seeds")
    axes.legend(fontsize=8)
    axes.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default="en_uner_ewt", choices=["en_uner_ewt", "en_ewt_upos"])
    parser.add_argument("--arms", nargs="+", default=list(ARMS), choices=ARMS)
    parser.add_argument("--pretrained", default="runs/bert_pretrain")
    parser.add_argument("--elmo", default="runs/elmo_bilm/bilm.keras", help="the ELMo arm's biLM")
    parser.add_argument("--sequence-length", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--min-steps", type=int, default=300,
                        help="train each run for at least this many steps (more epochs)")
    parser.add_argument("--learning-rate", type=float, default=1e-3, help="the pretrained arm's peak")
    parser.add_argument("--scratch-learning-rate", type=float, default=1e-3,
                        help="the from-scratch arms' peak")
    parser.add_argument("--dropout", type=float, default=0.1, help="the Transformer arms'")
    parser.add_argument("--bilstm-dropout", type=float, default=0.5, help="the BiLSTM arms' (TagLM's)")
    parser.add_argument("--min-word-count", type=int, default=2,
                        help="the BiLSTM arms' vocabulary: training words seen this often (rarer: "
                        "<UNK>, whose vector then learns what unseen words need)")
    parser.add_argument("--crf", action="store_true", help="a CRF on every arm")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--learning-curve", type=int, nargs="+", metavar="N")
    parser.add_argument("--plot", default="tagging_curve.png", help="the learning curve's PNG")
    args = parser.parse_args(argv)
    if args.seeds < 1 or args.epochs < 1 or args.min_steps < 0:
        parser.error("--seeds and --epochs must be at least 1, --min-steps at least 0")

    entities = args.corpus == "en_uner_ewt"
    splits = corpus_splits(args.corpus)
    vocabulary = data.load_vocabulary(os.path.join(args.pretrained, "vocab.txt"))
    preprocessor = data.BertPreprocessor(data.WordPieceTokenizer(vocabulary), args.sequence_length)
    sizes = sorted({n for n in args.learning_curve or [] if n < len(splits["train"])})
    points = [run_point(args, splits, n, vocabulary, preprocessor, entities) for n in sizes]
    points.append(run_point(args, splits, None, vocabulary, preprocessor, entities))
    result = {"corpus": args.corpus, "figure": "entity micro-F1" if entities else "token accuracy",
              "settings": vars(args), "points": points}
    if args.learning_curve:
        os.makedirs(os.path.dirname(os.path.abspath(args.plot)), exist_ok=True)
        plot(points, args.plot, args.corpus, entities)
        with open(os.path.splitext(args.plot)[0] + ".json", "w") as f:
            json.dump(result, f, indent=2)
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
