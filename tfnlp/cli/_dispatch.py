"""What `finetune`, `evaluate` and `predict` share: `--task`, and the task's own settings."""

from tfnlp.cli import tasks
from tfnlp.cli._settings import add_options

# The run that `evaluate` and `predict` read.
RUN = {"run": (str, None, "a `tfnlp finetune` output directory", None)}


def add_parser(commands, command, summary, argv, base, renamed=None):
    """`command`'s sub-command: `--task`, then `base` and the settings of the task that `argv` names."""
    parser = commands.add_parser(command, help=summary)
    names = tasks.names(command)
    described = "; ".join(f"{name}: {tasks.get_task(name).help}" for name in names)
    parser.add_argument(
        "--task", choices=names, default=tasks.DEFAULT,
        help=f"what the model does ({described}; default: {tasks.DEFAULT}); `tfnlp {command} "
             "--task NAME --help` lists that task's settings",
    )
    add_options(parser, {**base, **tasks.get_task(tasks.named_in(argv)).options(command)}, renamed)


def task(args):
    """The task of parsed `args` (`--task`)."""
    return tasks.get_task(getattr(args, "task", None) or tasks.DEFAULT)


def schema(args, command, base):
    """The settings of `command` for the task of `args`."""
    return {**base, **task(args).options(command)}
