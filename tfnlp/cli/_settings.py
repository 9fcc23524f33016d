"""Settings: the schemas every command shares, their resolution, and the checks made before TensorFlow.

A schema maps a setting's name to `(type, default, help, choices)`; each
setting is a flag (`--batch-size`) and a key of a `--config` file. `resolve`
applies defaults < config file < flags and checks each value; `check_common`
and the other checks here refuse what can be refused before any data is read
or model built (`ConfigError`: exit status 2, a message naming the setting).
"""

import argparse
import collections
import json
import math
import os
import sys

BUNDLED_CORPORA = ("en_novels", "zh_poems", "fine_food_reviews")
# The extensions of tables (one row per text): TSV, CSV, JSONL.
TABLE_EXTENSIONS = (".tsv", ".csv", ".jsonl", ".json")
# tfnlp.data.SPECIAL_TOKENS and tfnlp.data.elmo's BOS, EOS, UNK, here without
# importing TensorFlow (tests/test_cli.py checks that they agree).
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
WORD_TOKENS = ("<S>", "</S>", "<UNK>")

CORPUS_HELP = (
    f"a bundled corpus ({', '.join(BUNDLED_CORPORA)}), a UTF-8 text file (one "
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

# A run directory (evaluate, predict, export): `--model` until the next release.
RUN_RENAMED = {"model": "run"}

# Boolean settings that may also be "auto" (resolved by Keras at compile).
MAY_BE_AUTO = ("jit_compile",)
# Settings that may be 0 (all other numbers must be positive; a task adds its own).
MAY_BE_ZERO = ("histogram_every", "seed", "validation_fraction", "validate_every")


class ConfigError(ValueError):
    """A configuration the command cannot run with (unknown key, wrong type)."""


class CommandError(SystemExit):
    """What stops a command once it runs (a bad row of a data file).

    Its code is the text `tfnlp: error: MESSAGE`, as before the CLI became a
    package: Python prints it on stderr and exits with status 1. Settings
    found wrong before anything runs are usage errors instead (`ConfigError`,
    status 2, argparse's).
    """

    def __init__(self, message):
        super().__init__(f"tfnlp: error: {message}")


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


def _flag(name):
    return "--" + name.replace("_", "-")


def deprecated(old, new, where=""):
    """Says on stderr that `old` is spelt `new` now: the old spelling works for one more release."""
    print(f"tfnlp: {old}{where} is deprecated: use {new}; the old spelling stops working in the "
          "next release.", file=sys.stderr, flush=True)


class _OldSpelling(argparse.Action):
    """A renamed option's old flag: stores into the new one's setting, and says so."""

    def __init__(self, option_strings, dest, new, **kwargs):
        self.new = new
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        deprecated(f"`{option_string}`", f"`{self.new}`")
        setattr(namespace, self.dest, values)


def add_options(parser, schema, renamed=None):
    """`--config` and a flag per setting of `schema`; `renamed` maps old names to new ones.

    An old name is a hidden flag (and a `--config` key, see `read_settings`)
    for its new one that works, with a deprecation message, for one release.
    """
    parser.add_argument("--config", help="JSON or YAML file of settings (flags override it)")
    for name, (kind, default, text, choices) in schema.items():
        shown = "required" if default is None else f"default: {default!r}"
        if kind is bool:
            parser.add_argument(_flag(name), dest=name, action=argparse.BooleanOptionalAction, default=None,
                                help=f"{text} ({shown})")
        else:
            parser.add_argument(_flag(name), dest=name, type=kind, choices=choices, default=None,
                                help=f"{text} ({shown})")
    for old, new in (renamed or {}).items():
        kind, _, _, choices = schema[new]
        parser.add_argument(_flag(old), dest=new, type=kind, choices=choices, default=None,
                            action=_OldSpelling, new=_flag(new), help=argparse.SUPPRESS)


def read_settings(args, schema, renamed=None):
    """The settings of parsed `args`: defaults < `--config` file < flags, checked against `schema`."""
    config = load_config(args.config) if args.config else {}
    for old, new in (renamed or {}).items():
        if old in config:
            if new in config:
                raise ConfigError(f"`--config` {args.config!r} sets both `{new}` and its old name `{old}`.")
            deprecated(f"the setting `{old}`", f"`{new}`", f" (in {args.config})")
            config[new] = config.pop(old)
    return resolve(schema, config, {name: getattr(args, name, None) for name in schema})


def check_common(settings, may_be_zero=()):
    """Numbers, fractions, corpora, vocabularies and run directories of any command."""
    for name, value in settings.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            zero = name in MAY_BE_ZERO or name in may_be_zero
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
    for name in ("pretrained", "run"):  # tfnlp output directories
        if settings.get(name) and not os.path.isfile(os.path.join(settings[name], "config.json")):
            raise ConfigError(f"`{name}` {settings[name]!r} is not a tfnlp output directory (no config.json).")


def check_training(settings):
    """`profile` within the steps of a training command."""
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


def check_pretrained_length(settings):
    """`sequence_length` within the position table of the `pretrained` run (its pretraining length)."""
    with open(os.path.join(settings["pretrained"], "config.json"), encoding="utf-8") as f:
        pretrained = json.load(f).get("settings", {})
    longest = pretrained.get("sequence_length")
    if isinstance(longest, int) and settings["sequence_length"] > longest:
        raise ConfigError(
            f"`sequence_length` ({settings['sequence_length']}) exceeds the pretrained model's "
            f"position table ({longest}, its pretraining `sequence_length`)."
        )


def check_wordpiece_file(path):
    """A `vocabulary` file with BERT's special tokens."""
    with open(path, encoding="utf-8", errors="replace") as f:
        tokens = {line.rstrip("\n") for line in f}
    missing = [t for t in SPECIAL_TOKENS if t not in tokens]
    if missing:
        raise ConfigError(
            f"`vocabulary` {path!r} is not a WordPiece vocabulary: it lacks {missing} "
            "(make one with `tfnlp vocab --kind wordpiece`)."
        )


def check_words_file(path):
    """A `vocabulary` file of words for ELMo's softmax: UTF-8, `<S> </S> <UNK>` first, no repeats."""
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
