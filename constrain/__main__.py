"""``python -m constrain``: see :mod:`constrain.cli`."""

import sys

from constrain.cli import main

sys.exit(main())
