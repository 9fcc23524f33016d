"""`tfnlp export --run RUN`: a raw-text SavedModel (TF Serving layout) of a pretraining or fine-tuning run.

The `kind` in RUN's config.json picks the exporter: a row of
`tfnlp.cli.pretrain.SPECS` (bert, unilm, elmo), or the task whose runs are
of that kind (`tfnlp.cli.tasks`).
"""

import os

from tfnlp.cli import _runs, pretrain, tasks
from tfnlp.cli._loading import keras
from tfnlp.cli._settings import RUN_RENAMED, add_options, check_common, read_settings

SCHEMA = {
    "run": (str, None, "a `tfnlp pretrain` or `tfnlp finetune` output directory", None),
    "output": (str, None, "SavedModel directory (a version subdirectory is added)", None),
    "version": (int, 1, "version subdirectory", None),
}


def add_parser(commands, argv=()):
    """The `export` sub-command."""
    add_options(commands.add_parser("export", help="write a raw-text SavedModel (TF Serving layout)"),
                SCHEMA, RUN_RENAMED)


def schema(args):
    """The settings of `tfnlp export`."""
    return SCHEMA


def configure(args):
    """The checked settings of `args`; a `ConfigError` names what is wrong."""
    settings = read_settings(args, SCHEMA, RUN_RENAMED)
    check_common(settings)
    return settings


def exporters():
    """Run kind -> `export(model, run, config, settings)`: the pretraining specs', then the tasks'."""
    found = {name: spec.export for name, spec in pretrain.SPECS.items()}
    for name in tasks.names("export"):
        task = tasks.get_task(name)
        found.setdefault(task.kind, task.export)
    return found


def run(args, settings):
    """Loads RUN's model and writes its SavedModel with the exporter of its kind."""
    directory, found = settings["run"], exporters()
    config = _runs.read_run(directory, tuple(found))
    model = keras.saving.load_model(os.path.join(directory, "model.keras"), safe_mode=True,
                                    compile=False)
    path = found[config["kind"]](model, directory, config, settings)
    print(f"SavedModel written to {path}")
    return 0
