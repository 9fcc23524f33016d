"""The `tfnlp` command line: vocabularies, pretraining, fine-tuning, export, generation.

    tfnlp vocab --corpus en_novels --size 8000 --output vocab.txt
    tfnlp pretrain bert --corpus en_novels --steps 2000 --output runs/bert
    tfnlp pretrain elmo --config elmo.yaml --steps 5000
    tfnlp finetune --pretrained runs/bert --output runs/reviews
    tfnlp export --model runs/reviews --output saved_models/reviews
    tfnlp generate --saved-model saved_models/translate/1 --text "In the beginning"

Every training command takes its settings from a JSON (or, when PyYAML is
installed, YAML) file given with `--config`, overridden by flags. The whole
configuration is checked before any data is read or model built: an
unknown key, a value of the wrong type or range, or a missing file stops the
command (exit status 2) with a message naming it. Training runs
`tfnlp.training.fit` under the strategy chosen by `--strategy` (`auto`:
TPU, multi-worker from `TF_CONFIG`, several GPUs, or none), checkpoints to
`OUTPUT/checkpoints` and resumes from there when the same command is run
again, and logs to TensorBoard in `OUTPUT/logs`. The resolved configuration
is written to `OUTPUT/config.json`, which `export` reads.
"""

import argparse
import collections
import json
import logging
import math
import os
import sys

BUNDLED_CORPORA = ("en_novels", "zh_poems", "fine_food_reviews")
CORPUS_HELP = (
    "a bundled corpus (en_novels, zh_poems, fine_food_reviews), a UTF-8 text file (one "
    "sentence per line, documents separated by blank lines), or a TSV, CSV or JSONL file "
    "(its --text-column, one document per row)"
)
TEXT_COLUMN = (str, "text", "column (JSONL key) of the texts when the corpus is a TSV, CSV or "
               "JSONL file", None)

# Settings shared by the training commands: name -> (type, default, help, choices).
TRAINING = {
    "output": (str, None, "output directory (checkpoints, logs, model, config.json)", None),
    "steps": (int, 1000, "optimizer steps in all (a resumed run counts the restored ones)", None),
    "batch_size": (int, 32, "global batch size", None),
    "learning_rate": (float, 1e-3, "peak learning rate", None),
    "checkpoint_every": (int, 200, "steps between checkpoints", None),
    "log_every": (int, 20, "steps between TensorBoard scalars", None),
    "histogram_every": (int, 0, "steps between weight histograms (0: none)", None),
    "profile": (str, "", "profile these steps to TensorBoard, e.g. '10:15' (empty: no profile)", None),
    "dtype": (str, "float32", "dtype policy", ("float32", "mixed_bfloat16", "mixed_float16")),
    "jit_compile": (bool, "auto", "compile the training step with XLA (auto: Keras' rule, on when a GPU "
                    "or TPU is visible; faster on a GPU, not on CPUs: benchmarks/README.md)",
                    None),
    "strategy": (str, "auto", "tf.distribute strategy", ("auto", "default", "mirrored", "multi_worker", "tpu")),
    "seed": (int, 0, "random seed", None),
}
PRETRAIN = {
    "bert": {
        "corpus": (str, "en_novels", CORPUS_HELP, None),
        "text_column": TEXT_COLUMN,
        "objectives": (str, "mlm,nsp", "mlm,nsp: masked LM and next-sentence prediction (BERT); "
                       "mlm: masked LM only on full-length segments of consecutive text (RoBERTa), "
                       "for corpora of independent short texts", ("mlm,nsp", "mlm")),
        "vocabulary": (str, "", "WordPiece vocabulary file (empty: learn one from the corpus)", None),
        "vocabulary_size": (int, 8000, "size of a learned vocabulary", None),
        "preset": (str, "bert_tiny", "model size", ("bert_tiny", "bert_mini", "bert_small", "bert_medium", "bert_base")),
        "sequence_length": (int, 128, "tokens per example", None),
        "max_predictions": (int, 20, "masked positions per example", None),
        "learning_rate": (float, 5e-4, "peak learning rate (linear warm-up and decay)", None),
        "validation_fraction": (float, 0.05, "share of the corpus' documents held out: masked-LM "
                                "(and NSP) figures on them every --validate-every steps "
                                "(0: none)", None),
        "validate_every": (int, 0, "steps between held-out figures (0: at every checkpoint)", None),
    },
    "elmo": {
        "corpus": (str, "en_novels", CORPUS_HELP, None),
        "text_column": TEXT_COLUMN,
        "vocabulary": (str, "", "words vocabulary file for the softmax (`tfnlp vocab --kind words`; "
                       "empty: build one from the corpus)", None),
        "vocabulary_size": (int, 20000, "output words of a built vocabulary (the softmax); inputs are "
                            "characters", None),
        "preset": (str, "elmo_small", "model size", ("elmo_small", "elmo_original")),
        "sequence_length": (int, 40, "tokens per sentence, <S> and </S> included", None),
        "max_characters": (int, 50, "characters per word", None),
    },
}
PRETRAIN["unilm"] = {
    name: value for name, value in PRETRAIN["bert"].items()
    if name not in ("objectives", "validation_fraction", "validate_every")
}
PRETRAIN["unilm"]["batch_size"] = (int, 36, "global batch size (a multiple of 6)", None)
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
EVALUATE = {
    "model": (str, None, "a `tfnlp finetune` output directory", None),
    "data": (str, None, f"labelled examples: {LABELLED_FILE}", None),
    **{name: (kind, "", text + " (empty: as in finetune)", choices)
       for name, (kind, _, text, choices) in COLUMNS.items()},
    "output": (str, "", "JSON file for the results (empty: MODEL/evaluation.json)", None),
    "batch_size": (int, 64, "texts per batch", None),
}
PREDICT = {
    "model": (str, None, "a `tfnlp finetune` output directory", None),
    "input": (str, None, "texts to classify: a text file (one text per line) or a TSV, CSV or "
              "JSONL file (its text column)", None),
    **{name: (kind, "", text + " (empty: as in finetune)", choices)
       for name, (kind, _, text, choices) in COLUMNS.items() if name != "label_column"},
    "output": (str, "", "TSV file for label<TAB>probability lines (empty: stdout)", None),
    "batch_size": (int, 64, "texts per batch", None),
}
VOCAB = {
    "corpus": (str, None, CORPUS_HELP, None),
    "text_column": TEXT_COLUMN,
    "kind": (str, "wordpiece", "WordPiece (BERT, UniLM) or words (ELMo's softmax)", ("wordpiece", "words")),
    "size": (int, 8000, "vocabulary size", None),
    "output": (str, None, "file to write, one token per line", None),
}
EXPORT = {
    "model": (str, None, "a `tfnlp pretrain` or `tfnlp finetune` output directory", None),
    "output": (str, None, "SavedModel directory (a version subdirectory is added)", None),
    "version": (int, 1, "version subdirectory", None),
}


# Boolean settings that may also be "auto" (resolved by Keras at compile).
MAY_BE_AUTO = ("jit_compile",)


class ConfigError(ValueError):
    """A configuration the command cannot run with (unknown key, wrong type)."""


def _check_value(name, value, kind, choices):
    if name == "profile" and isinstance(value, int) and not isinstance(value, bool):
        raise ConfigError(  # YAML 1.1 reads an unquoted 10:15 as the base-60 number 615
            f"`profile` must be a string 'START:STOP', got the number {value}: "
            "quote it in a YAML file ('10:15')."
        )
    if kind is float and isinstance(value, str):  # YAML 1.1 reads 1e-3 as text
        try:
            value = float(value)
        except ValueError:
            pass
    if kind is bool:
        ok = isinstance(value, bool) or (name in MAY_BE_AUTO and value == "auto")
    elif kind is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        value = float(value) if ok else value
    else:
        ok = isinstance(value, kind) and not isinstance(value, bool)
    if not ok:
        also = " or 'auto'" if name in MAY_BE_AUTO else ""
        raise ConfigError(f"`{name}` must be {kind.__name__}{also}, got {value!r}.")
    if choices and value not in choices:
        raise ConfigError(f"`{name}` must be one of {choices}, got {value!r}.")
    if kind is float and not math.isfinite(value):
        raise ConfigError(f"`{name}` must be a finite number, got {value!r}.")
    if kind in (int, float) and value < 0:
        raise ConfigError(f"`{name}` must not be negative, got {value!r}.")
    return value


def load_config(path):
    """A JSON or YAML (needs PyYAML) mapping from `path`."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as error:
        raise ConfigError(f"cannot read `--config` {path!r}: {error}") from None
    if path.endswith((".yaml", ".yml")):
        try:
            import yaml
        except ImportError:
            raise ConfigError("YAML configs need PyYAML (`pip install pyyaml`); or use JSON.") from None
        try:
            config = yaml.safe_load(text)
        except yaml.YAMLError as error:
            raise ConfigError(f"`--config` {path!r} is not valid YAML: {error}") from None
    else:
        try:
            config = json.loads(text)
        except json.JSONDecodeError as error:
            raise ConfigError(f"`--config` {path!r} is not valid JSON: {error}") from None
    if not isinstance(config, dict):
        raise ConfigError(f"`--config` {path!r} must hold a mapping of settings, got {type(config).__name__}.")
    return config


def resolve(schema, config, flags):
    """Defaults < config file < flags, every value checked against `schema`."""
    unknown = sorted(set(config) - set(schema))
    if unknown:
        raise ConfigError(f"unknown setting(s) {unknown}; allowed: {sorted(schema)}.")
    values = {}
    for name, (kind, default, _, choices) in schema.items():
        value = flags.get(name)
        if value is None:
            value = config.get(name, default)
        if value is None:
            raise ConfigError(f"`{name}` is required (flag --{name.replace('_', '-')} or in --config).")
        values[name] = _check_value(name, value, kind, choices)
    return values


def _add_options(parser, schema):
    parser.add_argument("--config", help="JSON or YAML file of settings (flags override it)")
    for name, (kind, default, text, choices) in schema.items():
        flag = "--" + name.replace("_", "-")
        shown = "required" if default is None else f"default: {default!r}"
        if kind is bool:
            parser.add_argument(flag, dest=name, action=argparse.BooleanOptionalAction, default=None,
                                help=f"{text} ({shown})")
        else:
            parser.add_argument(flag, dest=name, type=kind, choices=choices, default=None,
                                help=f"{text} ({shown})")


def build_parser():
    """The `tfnlp` argument parser: one sub-command per job, every setting a flag."""
    parser = argparse.ArgumentParser(prog="tfnlp", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--verbose", action="store_true",
        help="show TensorFlow's own log lines (C++ start-up messages, GPU probing, graph "
             "optimizer warnings), hidden by default",
    )
    commands = parser.add_subparsers(dest="command", required=True)

    vocab = commands.add_parser("vocab", help="learn a vocabulary from a corpus")
    _add_options(vocab, VOCAB)

    pretrain = commands.add_parser("pretrain", help="pretrain BERT, UniLM or ELMo")
    models_ = pretrain.add_subparsers(dest="model_name", required=True)
    for name, schema in PRETRAIN.items():
        _add_options(models_.add_parser(name, help=f"pretrain {name}"), {**TRAINING, **schema})

    finetune = commands.add_parser(
        "finetune", help="train a text classifier on your labelled file (TSV, CSV, JSONL)"
    )
    _add_options(finetune, {**TRAINING, **FINETUNE})

    evaluate = commands.add_parser("evaluate", help="score a fine-tuned classifier on a labelled file")
    _add_options(evaluate, EVALUATE)

    predict = commands.add_parser("predict", help="classify the texts of a file")
    _add_options(predict, PREDICT)

    export = commands.add_parser("export", help="write a raw-text SavedModel (TF Serving layout)")
    _add_options(export, EXPORT)

    generate = commands.add_parser("generate", help="run a SavedModel on text lines")
    generate.add_argument("--saved-model", required=True, help="a SavedModel version directory")
    generate.add_argument("--text", action="append", help="input text (repeatable; default: stdin lines)")
    sampling = generate.add_argument_group(
        "sampling", "decode with the `sample` signature (or `continue` with --continue) of a "
        "text-to-text export: sampled with --temperature, --top-k, --top-p or --seed, else greedy")
    sampling.add_argument("--temperature", type=float, help="> 0 (default 1)")
    sampling.add_argument("--top-k", type=int, help="keep the k most probable tokens (default 0: all)")
    sampling.add_argument("--top-p", type=float, help="nucleus mass in (0, 1] (default 1: all)")
    sampling.add_argument("--seed", type=int, help="each text gets its own seed made from this one (default 0)")
    sampling.add_argument("--max-new-tokens", type=int, help="at most the export's max_length (default)")
    sampling.add_argument("--repetition-penalty", type=float, help="> 0 (default 1: off)")
    sampling.add_argument("--continue", dest="continue_prompt", action="store_true",
                          help="continue each text as a prompt (a UniLM export's `continue`)")
    return parser


def _schema(args):
    if args.command == "pretrain":
        return {**TRAINING, **PRETRAIN[args.model_name]}
    return {"vocab": VOCAB, "finetune": {**TRAINING, **FINETUNE}, "export": EXPORT,
            "evaluate": EVALUATE, "predict": PREDICT}[args.command]


def main(argv=None):
    """Runs `tfnlp ARGV` (`sys.argv[1:]` when None); returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "generate":
        return _generate(args)
    flags = {k: v for k, v in vars(args).items()
             if k not in ("command", "model_name", "config", "verbose")}
    schema = _schema(args)
    try:
        config = load_config(args.config) if args.config else {}
        settings = resolve(schema, config, flags)
        _check_settings(getattr(args, "model_name", None) or args.command, settings)
        if args.command in ("pretrain", "finetune"):
            _check_training(settings)
    except ConfigError as error:
        parser.error(str(error))  # exits with status 2
    _commands = _import_commands(args.verbose)  # TensorFlow only once the config is valid

    command = {"vocab": _commands.vocab, "finetune": _commands.finetune, "export": _commands.export,
               "evaluate": _commands.evaluate, "predict": _commands.predict}
    if args.command == "pretrain":
        return _commands.pretrain(args.model_name, settings)
    return command[args.command](settings)


# Settings that may be 0 (all other numbers must be positive).
MAY_BE_ZERO = ("histogram_every", "seed", "validation_fraction", "validate_every")
# ... and, for finetune, the settings whose 0 means "choose for me".
FINETUNE_AUTO = ("steps", "sequence_length", "learning_rate", "patience")
LABELLED_EXTENSIONS = (".tsv", ".csv", ".jsonl", ".json")


def _check_settings(command, settings):
    """Everything that can be checked before data is read or a model is built."""
    for name, value in settings.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            zero = name in MAY_BE_ZERO or (command == "finetune" and name in FINETUNE_AUTO)
            if value < 0 or (value == 0 and not zero):
                raise ConfigError(f"`{name}` must be positive, got {value}.")
    if settings.get("validation_fraction", 0) >= 1:
        raise ConfigError(
            f"`validation_fraction` must be below 1, got {settings['validation_fraction']}."
        )
    corpus = settings.get("corpus")
    if corpus and corpus not in BUNDLED_CORPORA and not os.path.isfile(corpus):
        raise ConfigError(f"`corpus` {corpus!r} is neither a bundled corpus {BUNDLED_CORPORA} nor a file.")
    if settings.get("vocabulary") and not os.path.isfile(settings["vocabulary"]):
        raise ConfigError(f"`vocabulary` {settings['vocabulary']!r} is not a file.")
    directories = ["pretrained"] if command == "finetune" else ["model"]
    for name in directories:
        if settings.get(name) and not os.path.isfile(os.path.join(settings[name], "config.json")):
            raise ConfigError(f"`{name}` {settings[name]!r} is not a tfnlp output directory (no config.json).")
    for name in ("train", "validation", "test", "data", "input"):
        path = settings.get(name)
        if path and not (name == "train" and path == "fine_food_reviews") and not os.path.isfile(path):
            raise ConfigError(f"`{name}` {path!r} is not a file.")
        if path and name != "input" and os.path.isfile(path) and not path.lower().endswith(LABELLED_EXTENSIONS):
            raise ConfigError(
                f"`{name}` {path!r} must be a .tsv, .csv or .jsonl file (its extension tells the format)."
            )
    if command in ("bert", "unilm") and settings["sequence_length"] < 5:
        raise ConfigError(
            "`sequence_length` must be at least 5 ([CLS] A [SEP] B [SEP]), "
            f"got {settings['sequence_length']}."
        )
    if command in ("bert", "unilm") and settings["vocabulary"]:
        _check_wordpiece_file(settings["vocabulary"])
    if command == "elmo" and settings["vocabulary"]:
        _check_words_file(settings["vocabulary"])
    if command == "vocab":
        # The reserved tokens: [PAD] [UNK] [CLS] [SEP] [MASK]; <S> </S> <UNK> for words.
        reserved = 5 if settings["kind"] == "wordpiece" else 3
        if settings["size"] <= reserved:
            raise ConfigError(
                f"`size` must exceed the {reserved} reserved tokens of a {settings['kind']} "
                f"vocabulary, got {settings['size']}."
            )
    if command == "finetune":
        _check_finetune(settings)
    if command == "unilm" and settings["sequence_length"] < 6:
        raise ConfigError(
            "`sequence_length` must be at least 6 for UniLM (half of it, at least 3 tokens, "
            f"for the source text), got {settings['sequence_length']}."
        )
    if command == "unilm" and settings["batch_size"] % 6:
        raise ConfigError(
            "`batch_size` must be a multiple of 6 for UniLM (the four objectives in every batch), "
            f"got {settings['batch_size']}."
        )


SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")  # tfnlp.data.SPECIAL_TOKENS


def _check_wordpiece_file(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        tokens = {line.rstrip("\n") for line in f}
    missing = [t for t in SPECIAL_TOKENS if t not in tokens]
    if missing:
        raise ConfigError(
            f"`vocabulary` {path!r} is not a WordPiece vocabulary: it lacks {missing} "
            "(make one with `tfnlp vocab --kind wordpiece`)."
        )


WORD_TOKENS = ("<S>", "</S>", "<UNK>")  # tfnlp.data.elmo's BOS, EOS, UNK


def _check_words_file(path):
    try:
        with open(path, encoding="utf-8") as f:
            words = [line.rstrip("\n") for line in f if line.rstrip("\n")]
    except UnicodeDecodeError as error:
        raise ConfigError(f"`vocabulary` {path!r} is not UTF-8 text: {error}.") from None
    if tuple(words[:3]) != WORD_TOKENS:
        raise ConfigError(
            f"`vocabulary` {path!r} is not a words vocabulary: it must start with "
            f"{list(WORD_TOKENS)}, got {words[:3]} (make one with `tfnlp vocab --kind words`)."
        )
    repeated = sorted(w for w, n in collections.Counter(words).items() if n > 1)
    if repeated:
        raise ConfigError(f"`vocabulary` {path!r} lists words more than once: {repeated[:5]}.")


def _check_finetune(settings):
    if settings["model"] == "bert" and not settings["pretrained"]:
        raise ConfigError(
            "`pretrained` is required with --model bert (a `tfnlp pretrain bert` output "
            "directory); or train --model transformer from scratch."
        )
    if settings["model"] == "transformer" and settings["vocabulary"]:
        _check_wordpiece_file(settings["vocabulary"])
    if settings["train"] == "fine_food_reviews" and settings["text_pair_column"]:
        raise ConfigError("`text_pair_column`: the bundled fine_food_reviews has single texts.")
    if settings["model"] == "transformer" and settings["pretrained"]:
        raise ConfigError("`pretrained` is for --model bert; --model transformer trains from scratch.")
    if (settings["validation_fraction"] == 0 and not settings["validation"]
            and settings["train"] != "fine_food_reviews"):  # that one has a validation split
        raise ConfigError("`validation_fraction` must be positive when no --validation file is given.")
    settings["bucket_boundaries"] = _bucket_boundaries(settings["bucket_boundaries"])
    if settings["model"] != "bert":
        return
    with open(os.path.join(settings["pretrained"], "config.json"), encoding="utf-8") as f:
        pretrained = json.load(f).get("settings", {})
    longest = pretrained.get("sequence_length")
    if isinstance(longest, int) and settings["sequence_length"] > longest:
        raise ConfigError(
            f"`sequence_length` ({settings['sequence_length']}) exceeds the pretrained model's "
            f"position table ({longest}, its pretraining `sequence_length`)."
        )


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


def _check_training(settings):
    if settings["profile"]:
        try:
            start, stop = (int(part) for part in settings["profile"].split(":"))
        except ValueError:
            raise ConfigError(f"`profile` must look like 'START:STOP', got {settings['profile']!r}.") from None
        last = settings["steps"] or stop  # finetune's 0: known once the data is read
        if not 0 < start <= stop <= last:
            raise ConfigError(
                f"`profile` needs 0 < START <= STOP <= steps ({settings['steps']}), "
                f"got {settings['profile']!r}."
            )


def _import_commands(verbose):
    """`tfnlp._commands`, which imports TensorFlow: quietly unless `verbose`.

    TensorFlow's C++ libraries print start-up lines to the process' stderr
    as they load (before any log level applies: oneDNN, "Could not find
    cuda drivers", twice), then probe for a GPU ("failed call to cuInit" on
    a CPU machine) and log graph-optimizer notes while training. Quiet, the
    loading is done with file descriptor 2 pointed at a temporary file (its
    content is replayed if the import fails), TensorFlow's C++ logging is
    limited to fatal errors (`TF_CPP_MIN_LOG_LEVEL=3`, unless set already)
    and its Python logger to errors (no tf.function retracing notes). Python
    exceptions and warnings are not affected.
    """
    if verbose or "tensorflow" in sys.modules:
        from tfnlp import _commands

        return _commands
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tempfile

    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            from tfnlp import _commands
        except BaseException:
            os.dup2(saved, 2)
            captured.seek(0)
            sys.stderr.write(captured.read().decode("utf-8", "replace"))
            raise
        finally:
            os.dup2(saved, 2)
            os.close(saved)
    # TensorFlow's Python warnings (tf.function retracing notes) likewise.
    logging.getLogger("tensorflow").setLevel(logging.ERROR)
    return _commands


def _generate(args):
    _commands = _import_commands(args.verbose)

    texts = args.text if args.text else [line.rstrip("\n") for line in sys.stdin]
    options = {name: getattr(args, name) for name in _commands.SAMPLING_OPTIONS}
    for line in _commands.generate(args.saved_model, texts, options, args.continue_prompt):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())

