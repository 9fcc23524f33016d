"""`tfnlp predict --run RUN --input FILE`: a fine-tuned model on the texts of a file."""

from tfnlp.cli import _dispatch
from tfnlp.cli._settings import RUN_RENAMED, check_common, read_settings


def add_parser(commands, argv=()):
    """The `predict` sub-command: `--run` and the settings of the task `argv` names."""
    _dispatch.add_parser(commands, "predict", "run a fine-tuned model on the texts of a file", argv,
                         _dispatch.RUN, RUN_RENAMED)


def schema(args):
    """The settings of `tfnlp predict` for the task of `args`."""
    return _dispatch.schema(args, "predict", _dispatch.RUN)


def configure(args):
    """The checked settings of `args`; a `ConfigError` names what is wrong."""
    task = _dispatch.task(args)
    settings = read_settings(args, schema(args), RUN_RENAMED)
    check_common(settings)
    task.check("predict", settings)
    return settings


def run(args, settings):
    """The task's `predict`."""
    return _dispatch.task(args).predict(settings)
