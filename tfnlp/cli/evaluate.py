"""`tfnlp evaluate --run RUN --data FILE`: a fine-tuned model's figures on labelled examples."""

from tfnlp.cli import _dispatch
from tfnlp.cli._settings import RUN_RENAMED, check_common, read_settings


def add_parser(commands, argv=()):
    """The `evaluate` sub-command: `--run` and the settings of the task `argv` names."""
    _dispatch.add_parser(commands, "evaluate", "score a fine-tuned model on a labelled file", argv,
                         _dispatch.RUN, RUN_RENAMED)


def schema(args):
    """The settings of `tfnlp evaluate` for the task of `args`."""
    return _dispatch.schema(args, "evaluate", _dispatch.RUN)


def configure(args):
    """The checked settings of `args`; a `ConfigError` names what is wrong."""
    task = _dispatch.task(args)
    settings = read_settings(args, schema(args), RUN_RENAMED)
    check_common(settings)
    task.check("evaluate", settings)
    return settings


def run(args, settings):
    """The task's `evaluate`."""
    return _dispatch.task(args).evaluate(settings)
