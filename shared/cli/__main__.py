"""`python -m shared.cli`: the same as the `jobwarden` script."""

import sys

from shared.cli.main import main

sys.exit(main())
