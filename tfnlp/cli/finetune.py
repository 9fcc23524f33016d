"""`tfnlp finetune`: a model for a task (`--task`, default classification) trained on your labelled file."""

from tfnlp.cli import _dispatch
from tfnlp.cli._settings import TRAINING, check_common, check_training, read_settings


def add_parser(commands, argv=()):
    """The `finetune` sub-command: the training settings and those of the task `argv` names."""
    _dispatch.add_parser(commands, "finetune", "train a model on your labelled file (TSV, CSV, JSONL); "
                         "default: a text classifier", argv, TRAINING)


def schema(args):
    """The settings of `tfnlp finetune` for the task of `args`."""
    return _dispatch.schema(args, "finetune", TRAINING)


def configure(args):
    """The checked settings of `args`; a `ConfigError` names what is wrong."""
    task = _dispatch.task(args)
    settings = read_settings(args, schema(args))
    check_common(settings, task.may_be_zero)
    task.check("finetune", settings)
    check_training(settings)
    return settings


def run(args, settings):
    """The task's `finetune`."""
    return _dispatch.task(args).finetune(settings)
