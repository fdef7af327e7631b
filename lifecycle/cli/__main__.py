"""``python -m lifecycle.cli``: the command line."""

import sys

from lifecycle.cli import main

sys.exit(main())
