"""`tfnlp evaluate --run RUN --data FILE`: a fine-tuned model's figures on labelled examples."""

from tfnlp.cli._dispatch import RUN, TaskCommand
from tfnlp.cli._settings import RUN_RENAMED

_COMMAND = TaskCommand("evaluate", "score a fine-tuned model on a labelled file", RUN, RUN_RENAMED)
add_parser, schema, configure, run = _COMMAND.add_parser, _COMMAND.schema, _COMMAND.configure, _COMMAND.run
