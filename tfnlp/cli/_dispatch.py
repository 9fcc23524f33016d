"""What `finetune`, `evaluate` and `predict` share: `--task`, and the task's own settings."""

from tfnlp.cli import tasks
from tfnlp.cli._settings import add_options, check_common, read_settings

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


class TaskCommand:
    """A command that runs what the task of `--task` does for it (`finetune`, `evaluate`, `predict`).

    Its module exposes the four functions `tfnlp.cli` calls: `add_parser`,
    `schema`, `configure` and `run` (this object's methods).

    Args:
        command: the command's name, also the task's method that runs it.
        summary: its one-line help.
        base: the settings every task of the command takes (a schema).
        renamed: `{old flag: new flag}` still accepted, with a message.
        check: a function of the settings, run after the task's own check.
        task_zeros: whether the task's `may_be_zero` settings may be 0 here.
    """

    def __init__(self, command, summary, base, renamed=None, check=None, task_zeros=False):
        self.command, self.summary, self.base, self.renamed = command, summary, base, renamed
        self.check, self.task_zeros = check, task_zeros

    def add_parser(self, commands, argv=()):
        """The sub-command: `--task`, the base settings and those of the task `argv` names."""
        add_parser(commands, self.command, self.summary, argv, self.base, self.renamed)

    def schema(self, args):
        """The command's settings for the task of `args`."""
        return schema(args, self.command, self.base)

    def configure(self, args):
        """The checked settings of `args`; a `ConfigError` names what is wrong."""
        chosen = task(args)
        settings = read_settings(args, self.schema(args), self.renamed)
        check_common(settings, chosen.may_be_zero if self.task_zeros else ())
        chosen.check(self.command, settings)
        if self.check is not None:
            self.check(settings)
        return settings

    def run(self, args, settings):
        """What the task does for the command."""
        return getattr(task(args), self.command)(settings)
