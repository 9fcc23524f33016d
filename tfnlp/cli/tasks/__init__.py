"""The tasks that `tfnlp finetune`, `evaluate`, `predict` and `export` dispatch on.

A task is a `Task` subclass registered under its `--task` name (fairseq's
`register_task`):

    @register_task("tagging")
    class Tagging(Task):
        kind = "tagger"  # the `kind` in the config.json of its runs
        help = "label every word of a text"
        finetune_options = {"train": (str, None, "labelled sentences", None), ...}

        def finetune(self, settings): ...

A new task is one module in this folder and its name in `BUILT_IN`: no
command module changes. The commands add the task's options for
themselves to their own (`tfnlp finetune --task tagging --help` lists
them), check the settings with `check` before TensorFlow is imported,
then call the task's method of the command's name; `export` finds the task
by the `kind` of the run it exports.
"""

import importlib

DEFAULT = "classification"
BUILT_IN = ("classification", "tagging")  # modules of this folder; each registers its task
TASKS = {}  # name -> Task subclass


class Task:
    """What a task brings to `tfnlp finetune`, `evaluate`, `predict` and `export`.

    Subclass it, set the attributes, override the methods of the commands the
    task supports, and register it with `register_task`.

    Attributes:
        name: its `--task` name (set by `register_task`).
        kind: the `kind` that `finetune` writes to a run's config.json, by which
            `evaluate`, `predict` and `export` recognise the run.
        help: one line for `--task`'s help.
        finetune_options, evaluate_options, predict_options: the command's
            settings: name -> (type, default, help, choices); `finetune`'s
            are added to the training settings (a setting of the same name
            replaces the training one).
        may_be_zero: settings of `finetune` whose 0 means "choose for me"
            (numbers must otherwise be positive).
    """

    name = None
    kind = None
    help = ""
    finetune_options = {}
    evaluate_options = {}
    predict_options = {}
    may_be_zero = ()

    def options(self, command):
        """The settings `command` takes for this task."""
        return getattr(self, f"{command}_options")

    @classmethod
    def supports(cls, command):
        """Whether the task has `command` (`finetune`, `evaluate`, `predict`, `export`): overrides it."""
        return getattr(cls, command) is not getattr(Task, command)

    def check(self, command, settings):
        """Refuses, with a `ConfigError`, settings of `command` it cannot run with; before TensorFlow."""

    def finetune(self, settings):
        """Trains a model into the run directory `settings["output"]`; returns the exit status."""
        raise NotImplementedError(f"the task {self.name!r} has no finetune")

    def evaluate(self, settings):
        """Scores the model of the run `settings["run"]`; returns the exit status."""
        raise NotImplementedError(f"the task {self.name!r} has no evaluate")

    def predict(self, settings):
        """Runs the model of the run `settings["run"]` on a file; returns the exit status."""
        raise NotImplementedError(f"the task {self.name!r} has no predict")

    def export(self, model, run, config, settings):
        """Writes the SavedModel of `model` (from `run`, whose config.json is `config`); its path."""
        raise NotImplementedError(f"the task {self.name!r} has no export")


def register_task(name):
    """A class decorator: registers a `Task` subclass as `--task name`."""

    def register(cls):
        if name in TASKS:
            raise ValueError(f"a task {name!r} is registered already ({TASKS[name].__qualname__}).")
        if not issubclass(cls, Task):
            raise TypeError(f"task {name!r}: {cls.__qualname__} must subclass tfnlp.cli.tasks.Task.")
        cls.name = name
        TASKS[name] = cls
        return cls

    return register


def names(command=None):
    """The registered tasks' names; those that support `command`, if given."""
    return sorted(name for name, cls in TASKS.items() if command is None or cls.supports(command))


def get_task(name):
    """The task registered as `name` (an instance of its class)."""
    return TASKS[name]()


def named_in(argv):
    """The task that a command line names with `--task` (`DEFAULT` when none, or an unknown one).

    Read before parsing, since a command's options depend on its task; an
    unknown name is then refused by `--task`'s choices. As argparse, it
    takes `--ta` and `--tas` for `--task`.
    """
    for i, word in enumerate(argv):
        flag, equals, value = word.partition("=")
        if len(flag) < 4 or not "--task".startswith(flag):
            continue
        name = value if equals else argv[i + 1] if i + 1 < len(argv) else None
        return name if name in TASKS else DEFAULT
    return DEFAULT


for _module in BUILT_IN:  # each registers its task
    importlib.import_module(f"{__name__}.{_module}")
