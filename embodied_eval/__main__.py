"""`python -m embodied_eval` runs the CLI."""

import sys

from embodied_eval.cli.main import main

sys.exit(main())
