"""`tfnlp predict --run RUN --input FILE`: a fine-tuned model on the texts of a file."""

from tfnlp.cli._dispatch import RUN, TaskCommand
from tfnlp.cli._settings import RUN_RENAMED

_COMMAND = TaskCommand("predict", "run a fine-tuned model on the texts of a file", RUN, RUN_RENAMED)
add_parser, schema, configure, run = _COMMAND.add_parser, _COMMAND.schema, _COMMAND.configure, _COMMAND.run
