"""``python -m qcat.cli``: the ``qcat`` command."""

import sys

from qcat.cli import main

sys.exit(main())
