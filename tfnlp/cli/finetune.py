"""`tfnlp finetune`: a model for a task (`--task`, default classification) trained on your labelled file."""

from tfnlp.cli._dispatch import TaskCommand
from tfnlp.cli._settings import TRAINING, check_training

_COMMAND = TaskCommand(
    "finetune", "train a model on your labelled file (TSV, CSV, JSONL); default: a text classifier",
    TRAINING, check=check_training, task_zeros=True,
)
add_parser, schema, configure, run = _COMMAND.add_parser, _COMMAND.schema, _COMMAND.configure, _COMMAND.run
