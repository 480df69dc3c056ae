"""``python -m mdcr.cli``: the ``mdcr`` command."""

import sys

from mdcr.cli import main

sys.exit(main())
