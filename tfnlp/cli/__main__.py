"""`python -m tfnlp.cli`: the `tfnlp` command."""

import sys

from tfnlp.cli import main

sys.exit(main())
