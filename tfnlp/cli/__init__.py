"""The `tfnlp` command line: vocabularies, pretraining, fine-tuning, export, generation.

    tfnlp vocab --corpus en_novels --size 8000 --output vocab.txt
    tfnlp pretrain bert --corpus en_novels --steps 2000 --output runs/bert
    tfnlp pretrain elmo --config elmo.yaml --steps 5000
    tfnlp finetune --pretrained runs/bert --output runs/reviews
    tfnlp export --run runs/reviews --output saved_models/reviews
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

Each command is a module of this package (`tfnlp.cli.finetune`, ...) with
`add_parser`, `schema`, `configure` (the checked settings, before
TensorFlow is imported) and `run`. `pretrain` reads one table of
pretraining specs (`tfnlp.cli.pretrain.SPECS`); `finetune`, `evaluate` and
`predict` dispatch on a task (`--task`, default classification) of the
registry `tfnlp.cli.tasks`, and `export` on the kind of the run it reads.
"""

import argparse
import importlib
import sys

from tfnlp.cli._loading import import_quietly
from tfnlp.cli._settings import (  # noqa: F401  (public)
    CommandError,
    ConfigError,
    load_config,
    resolve,
)

# The commands, in the order `tfnlp --help` lists them: each a module of this package.
COMMANDS = ("vocab", "pretrain", "finetune", "evaluate", "predict", "export", "generate")


def _command(name):
    return importlib.import_module(f"{__name__}.{name}")


def build_parser(argv=()):
    """The `tfnlp` argument parser: one sub-command per job, every setting a flag.

    `argv`, the command line to parse, names the `--task` whose settings
    `finetune`, `evaluate` and `predict` take (classification if none).
    """
    parser = argparse.ArgumentParser(prog="tfnlp", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--verbose", action="store_true",
        help="show TensorFlow's own log lines (C++ start-up messages, GPU probing, graph "
             "optimizer warnings), hidden by default",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    for name in COMMANDS:
        _command(name).add_parser(commands, argv)
    return parser


def _schema(args):
    """The settings schema of parsed `args`: name -> (type, default, help, choices)."""
    return _command(args.command).schema(args)


def main(argv=None):
    """Runs `tfnlp ARGV` (`sys.argv[1:]` when None); returns the exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    command = _command(args.command)
    try:
        settings = command.configure(args)
    except ConfigError as error:
        parser.error(str(error))  # exits with status 2
    import_quietly(args.verbose)  # TensorFlow only once the settings are valid
    return command.run(args, settings)
