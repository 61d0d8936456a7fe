"""``python -m rdpest`` runs the command line interface."""

import sys

from rdpest.cli import main

sys.exit(main())
