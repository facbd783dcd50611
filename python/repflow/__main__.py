"""``python -m repflow`` runs the ``repflow`` command."""

import sys

from repflow.cli import main

sys.exit(main())
