"""`python -m opsd.cli`: the same as the `opsd` console script."""

import sys

from opsd.cli.main import main

sys.exit(main())
