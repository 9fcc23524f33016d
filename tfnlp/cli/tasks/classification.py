"""`--task classification`: a text classifier fine-tuned on a labelled TSV, CSV or JSONL file.

`tfnlp finetune` trains a `BertClassifier` on a `tfnlp pretrain bert` run
(`--pretrained`) or a `TransformerClassifier` from scratch (`--model
transformer`); `evaluate` writes its accuracy, macro-F1, per-class F1 and
confusion matrix; `predict` a label and its probability per text; `export`
a SavedModel that takes raw text. The default task of every command.
"""

import json
import os

import numpy as np

from tfnlp.cli import _runs
from tfnlp.cli._loading import data, datasets, export_lib, metrics, models, training
from tfnlp.cli._settings import (
    TABLE_EXTENSIONS,
    ConfigError,
    check_pretrained_length,
    check_wordpiece_file,
)
from tfnlp.cli.tasks import Task, register_task

LABELLED_FILE = "a TSV or CSV file with a header row, or a JSONL file (one object per line)"
COLUMNS = {
    "text_column": (str, "text", "column (JSONL key) of the texts", None),
    "text_pair_column": (str, "", "column of the second texts of text pairs (empty: single texts)", None),
    "label_column": (str, "label", "column of the labels (any strings: class names)", None),
}
FINETUNE = {
    "train": (str, "fine_food_reviews", f"training examples: {LABELLED_FILE}; or the bundled "
              "fine_food_reviews (with its own validation and test splits)", None),
    "validation": (str, "", "validation examples, same format (empty: `validation_fraction` of "
                   "the training file is held out)", None),
    "test": (str, "", "test examples, same format: accuracy, macro-F1, per-class F1 and the "
             "confusion matrix go to OUTPUT/results.json (empty: no test)", None),
    **COLUMNS,
    "model": (str, "bert", "bert: fine-tune a `tfnlp pretrain bert` model (--pretrained); "
              "transformer: a TransformerClassifier trained from scratch", ("bert", "transformer")),
    "pretrained": (str, "", "a `tfnlp pretrain bert` output directory (for --model bert)", None),
    "vocabulary": (str, "", "WordPiece vocabulary for --model transformer (empty: learn one from "
                   "the training texts)", None),
    "vocabulary_size": (int, 8000, "size of a learned vocabulary (--model transformer)", None),
    "sequence_length": (int, 0, "tokens per example (0: the 95th percentile of the training "
                        "examples' lengths, printed)", None),
    "bucket_boundaries": (str, "auto", "length buckets: auto (the 50th and 75th percentiles), "
                          "none, or increasing lengths such as 32,64", None),
    "epochs": (int, 5, "passes over the training examples", None),
    "steps": (int, 0, "optimizer steps in all (0: epochs x batches per epoch)", None),
    "learning_rate": (float, 0.0, "peak learning rate, linear warm-up and decay (0: by model "
                      "width: 1e-3 up to 256 (BERT-tiny, -mini, transformer), 3e-4 up to 512, "
                      "5e-5 wider)", None),
    "patience": (int, 2, "epochs without a better validation accuracy before training stops; "
                 "the best epoch's weights are kept (0: never stop early)", None),
    "validation_fraction": (float, 0.1, "share of the training file held out for validation "
                            "when no --validation file is given", None),
}
AS_IN_FINETUNE = {name: (kind, "", text + " (empty: as in finetune)", choices)
                  for name, (kind, _, text, choices) in COLUMNS.items()}
EVALUATE = {
    "data": (str, None, f"labelled examples: {LABELLED_FILE}", None),
    **AS_IN_FINETUNE,
    "output": (str, "", "JSON file for the results (empty: RUN/evaluation.json)", None),
    "batch_size": (int, 64, "texts per batch", None),
}
PREDICT = {
    "input": (str, None, "texts to classify: a text file (one text per line) or a TSV, CSV or "
              "JSONL file (its text column)", None),
    **{name: value for name, value in AS_IN_FINETUNE.items() if name != "label_column"},
    "output": (str, "", "TSV file for label<TAB>probability lines (empty: stdout)", None),
    "batch_size": (int, 64, "texts per batch", None),
}


@register_task("classification")
class Classification(Task):
    """A label per text (or text pair), from a labelled file's columns."""

    kind = "classifier"
    help = "a label per text (or text pair)"
    finetune_options = FINETUNE
    evaluate_options = EVALUATE
    predict_options = PREDICT
    # Settings whose 0 means "choose for me".
    may_be_zero = ("steps", "sequence_length", "learning_rate", "patience")

    def check(self, command, settings):
        _check_files(settings)
        if command == "finetune":
            _check_finetune(settings)

    def finetune(self, settings):
        return _finetune(settings)

    def evaluate(self, settings):
        return _evaluate(settings)

    def predict(self, settings):
        return _predict(settings)

    def export(self, model, run, config, settings):
        # The model carries its preprocessor and labels.
        return export_lib.export_classifier(model, settings["output"], version=settings["version"])


def _check_files(settings):
    for name in ("train", "validation", "test", "data", "input"):
        path = settings.get(name)
        if path and not (name == "train" and path == "fine_food_reviews") and not os.path.isfile(path):
            raise ConfigError(f"`{name}` {path!r} is not a file.")
        if path and name != "input" and os.path.isfile(path) and not path.lower().endswith(TABLE_EXTENSIONS):
            raise ConfigError(
                f"`{name}` {path!r} must be a .tsv, .csv or .jsonl file (its extension tells the format)."
            )


def _check_finetune(settings):
    if settings["model"] == "bert" and not settings["pretrained"]:
        raise ConfigError(
            "`pretrained` is required with --model bert (a `tfnlp pretrain bert` output "
            "directory); or train --model transformer from scratch."
        )
    if settings["model"] == "transformer" and settings["vocabulary"]:
        check_wordpiece_file(settings["vocabulary"])
    if settings["train"] == "fine_food_reviews" and settings["text_pair_column"]:
        raise ConfigError("`text_pair_column`: the bundled fine_food_reviews has single texts.")
    if settings["model"] == "transformer" and settings["pretrained"]:
        raise ConfigError("`pretrained` is for --model bert; --model transformer trains from scratch.")
    if (settings["validation_fraction"] == 0 and not settings["validation"]
            and settings["train"] != "fine_food_reviews"):  # that one has a validation split
        raise ConfigError("`validation_fraction` must be positive when no --validation file is given.")
    settings["bucket_boundaries"] = _bucket_boundaries(settings["bucket_boundaries"])
    if settings["model"] == "bert":
        check_pretrained_length(settings)


def _bucket_boundaries(text):
    """`auto`, `none` or increasing positive lengths such as `32,64` (a list then)."""
    if text in ("auto", "none"):
        return text
    try:
        values = [int(part) for part in text.split(",")]
    except ValueError:
        values = None
    if not values or values != sorted(set(values)) or values[0] <= 0:
        raise ConfigError(
            f"`bucket_boundaries` must be auto, none or increasing lengths such as 32,64; got {text!r}."
        )
    return values


def _labelled(settings, name, path, label_names=None):
    """`data.read_labelled` of a `--train`/`--validation`/`--test` file; its errors end the command."""
    pair = settings["text_pair_column"] or None
    try:
        return data.read_labelled(path, settings["text_column"], settings["label_column"],
                                  text_pair_column=pair, label_names=label_names)
    except (ValueError, OSError) as error:
        _runs.fail(f"`{name}`: {error}")


def _finetune_data(settings):
    """`(train, validation, test or None)` `LabelledData`: files, or the bundled reviews."""
    if settings["train"] == "fine_food_reviews":
        labels = list(datasets.FINE_FOOD_LABELS)

        def split(name):
            examples = datasets.read_fine_food_reviews(name)
            return data.LabelledData([t for t, _ in examples], None, [y for _, y in examples], labels,
                                     f"fine_food_reviews:{name}")

        train, validation, test = split("train"), split("validation"), split("test")
        if settings["validation"]:
            validation = _labelled(settings, "validation", settings["validation"], labels)
        if settings["test"]:
            test = _labelled(settings, "test", settings["test"], labels)
        return train, validation, test
    train = _labelled(settings, "train", settings["train"])
    names = train.label_names
    if settings["validation"]:
        validation = _labelled(settings, "validation", settings["validation"], names)
    else:  # held out from the training file, at random
        order = np.random.default_rng(settings["seed"]).permutation(len(train))
        count = max(1, round(settings["validation_fraction"] * len(train)))
        if count >= len(train):
            _runs.fail(f"`train` {settings['train']!r} has {len(train)} examples: too few to hold out "
                       "a validation split; give --validation.")
        validation, train = _subset(train, order[:count]), _subset(train, order[count:])
    test = _labelled(settings, "test", settings["test"], names) if settings["test"] else None
    return train, validation, test


def _subset(examples, indices):
    indices = sorted(int(i) for i in indices)
    pairs = examples.text_pairs
    return data.LabelledData(
        [examples.texts[i] for i in indices], None if pairs is None else [pairs[i] for i in indices],
        examples.labels[indices], examples.label_names, examples.path,
    )


def _lengths(settings, tokenizer, train, longest):
    """`(sequence_length, bucket_boundaries)`: as set, or from the training examples' lengths."""
    suggested = data.suggest_sequence_length(tokenizer, train.texts, train.text_pairs,
                                             max_length=longest)
    shown = ", ".join(f"{p}th {n}" for p, n in suggested["percentiles"].items())
    print(f"training examples' lengths in tokens ([CLS] and [SEP] included): {shown}", flush=True)
    length = settings["sequence_length"] or suggested["sequence_length"]
    buckets = settings["bucket_boundaries"]
    if buckets == "auto":
        buckets = [b for b in suggested["bucket_boundaries"] if b < length]
    elif buckets == "none":
        buckets = []
    elif any(b >= length for b in buckets):
        _runs.fail(f"`bucket_boundaries` {buckets} must all be below `sequence_length` ({length}).")
    print(f"sequence_length {length}, bucket boundaries {buckets or 'none'}", flush=True)
    return length, buckets


def _finetune(settings):
    train, validation, test = _finetune_data(settings)  # bad files fail before anything starts
    strategy, paths = _runs.setup(settings)
    bert = settings["model"] == "bert"
    if bert:
        vocabulary, tokenizer, longest = _runs.pretrained_bert(settings["pretrained"])
    else:
        vocabulary = _runs.fine_tuning_vocabulary(settings, paths,
                                                  train.texts + (train.text_pairs or []))
        longest = 512
        tokenizer = data.WordPieceTokenizer(vocabulary)
    length, buckets = _lengths(settings, tokenizer, train, longest)
    preprocessor = data.BertPreprocessor(tokenizer, length)
    batch_size = settings["batch_size"]
    per_epoch = max(1, len(train) // batch_size)
    steps = settings["steps"] or settings["epochs"] * per_epoch
    print(f"{len(train)} training, {len(validation)} validation examples, "
          f"{len(train.label_names)} classes; {steps} steps of {batch_size} "
          f"({steps / per_epoch:.1f} epochs)", flush=True)
    dataset = data.classification_dataset(
        train.as_dataset(), preprocessor, batch_size, shuffle_buffer=len(train),
        seed=settings["seed"], bucket_boundaries=buckets or None,
    ).repeat()
    held_out = data.classification_dataset(
        validation.as_dataset(), preprocessor, batch_size, drop_remainder=False,
        bucket_boundaries=buckets or None,
    )
    with strategy.scope():
        if bert:
            backbone = _runs.pretrained_bert_backbone(settings["pretrained"], settings["dtype"])
            model = models.BertClassifier(backbone, preprocessor=preprocessor, labels=train.label_names)
        else:
            model = models.TransformerClassifier(preprocessor=preprocessor, labels=train.label_names,
                                                 num_segments=2 if train.text_pairs else 1)
        learning_rate = settings["learning_rate"] or _default_learning_rate(model)
        print(f"peak learning rate {learning_rate:g}", flush=True)
        schedule = training.LinearWarmupLinearDecay(learning_rate, max(1, steps // 10), steps)
        model.compile(optimizer=training.bert_adamw(schedule), jit_compile=settings["jit_compile"])
    if training.is_chief(strategy):
        _runs.write_lines(os.path.join(settings["output"], "vocab.txt"), vocabulary)
    callbacks = [training.ValidationEvaluation(
        held_out, per_epoch, monitor="accuracy", mode="max", patience=settings["patience"] or None,
        directory=os.path.join(settings["output"], "best"), restore_best=True, log_dir=paths["logs"],
    )]
    if bert:
        probe = train.texts[0]
        callbacks.append(_runs.attention_images(
            backbone, tokenizer, dict(settings, sequence_length=length), paths, probe
        ))
    history = _runs.fit(model, dataset, dict(settings, steps=steps), paths, callbacks)
    results = {
        "labels": train.label_names,
        "train_examples": len(train),
        "validation": callbacks[0].best,
        "sequence_length": length,
        "bucket_boundaries": buckets,
    }
    if test is not None:
        results["test"] = _report_on(model, test, batch_size)
        results["test"]["majority_class_accuracy"] = _majority(train, test)
    if training.is_chief(strategy):
        model.save(paths["model"])
        with open(os.path.join(settings["output"], "results.json"), "w", encoding="utf-8") as f:
            json.dump(results, f, indent=2)
    _runs.save_config(paths, Classification.kind, settings, strategy,
                      {"vocabulary": "vocab.txt", "labels": train.label_names,
                       "sequence_length": length, "bucket_boundaries": buckets,
                       "test_accuracy": results.get("test", {}).get("accuracy")})
    if test is not None:
        figures = results["test"]
        print(f"test accuracy {figures['accuracy']:.4f}, macro-F1 {figures['macro_f1']:.4f} on "
              f"{figures['examples']} held-out examples (majority class "
              f"{figures['majority_class_accuracy']:.4f}); results: "
              f"{os.path.join(settings['output'], 'results.json')}", flush=True)
    _runs.report(history, paths)
    return 0


def _default_learning_rate(model):
    """The fine-tuning learning rate for `--learning-rate 0`: smaller for wider models
    (`_runs.fine_tuning_learning_rate`); 1e-3 for a Transformer from scratch."""
    if isinstance(model, models.TransformerClassifier):
        return 1e-3
    return _runs.fine_tuning_learning_rate(model.backbone.hidden_dim)


def _majority(train, test):
    """Test accuracy of always predicting the training file's most frequent class."""
    majority = int(np.bincount(train.labels, minlength=len(train.label_names)).argmax())
    return float(np.mean(test.labels == majority))


def _report_on(model, examples, batch_size):
    """`metrics.classification_report` of `model` on `LabelledData`."""
    scores = model.predict(examples.x, batch_size=batch_size, verbose=0)
    return metrics.classification_report(examples.labels, np.argmax(scores, axis=-1),
                                         examples.label_names)


def _classifier(directory):
    """The fine-tuned classifier of a `tfnlp finetune` output directory, and its config."""
    return _runs.load_fine_tuned(directory, Classification.kind)


def _columns(settings, config):
    """The column settings of evaluate/predict: as given, else as in finetune."""
    trained = config["settings"]
    return {name: settings.get(name) or trained.get(name, "")
            for name in ("text_column", "text_pair_column", "label_column")}


def _evaluate(settings):
    model, config = _classifier(settings["run"])
    columns = _columns(settings, config)
    examples = _labelled(columns, "data", settings["data"], model.labels)
    results = _report_on(model, examples, settings["batch_size"])
    output = settings["output"] or os.path.join(settings["run"], "evaluation.json")
    with open(output, "w", encoding="utf-8") as f:
        json.dump(results, f, indent=2)
    print(f"accuracy {results['accuracy']:.4f}, macro-F1 {results['macro_f1']:.4f} on "
          f"{results['examples']} examples; results: {output}")
    return 0


def _predict(settings):
    model, config = _classifier(settings["run"])
    columns = _columns(settings, config)
    path = settings["input"]
    if path.lower().endswith(TABLE_EXTENSIONS):
        try:
            texts = data.read_texts(path, columns["text_column"], columns["text_pair_column"] or None)
        except (ValueError, OSError) as error:
            _runs.fail(f"`input`: {error}")
    elif columns["text_pair_column"]:
        _runs.fail(f"`input` {path!r}: this classifier reads text pairs (column "
                   f"{columns['text_pair_column']!r}); give a TSV, CSV or JSONL file with both columns.")
    else:  # one text per line
        try:
            with open(path, encoding="utf-8") as f:
                texts = [line.rstrip("\r\n") for line in f]
        except UnicodeDecodeError as error:
            _runs.fail(f"`input` {path!r} is not UTF-8 text: {error}.")
        while texts and not texts[-1]:
            texts.pop()
        if not texts:
            _runs.fail(f"`input` {path!r} holds no text.")
    scores = model.predict(texts, batch_size=settings["batch_size"], verbose=0)
    softmax = getattr(model, "activation", None) == "softmax"  # else logits
    probabilities = scores if softmax else _softmax(scores)
    ids = np.argmax(probabilities, axis=-1)
    lines = [f"{model.labels[i]}\t{p[i]:.4f}" for i, p in zip(ids, probabilities, strict=True)]
    if settings["output"]:
        _runs.write_lines(settings["output"], lines)
        print(f"{len(lines)} predictions written to {settings['output']}")
    else:
        print("\n".join(lines))
    return 0


def _softmax(scores):
    scores = scores - scores.max(axis=-1, keepdims=True)
    exp = np.exp(scores)
    return exp / exp.sum(axis=-1, keepdims=True)
