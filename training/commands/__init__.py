"""The training commands: ``qcat train ...`` and ``qcat data ...`` (with ``build-demo``), and their data flags.
Training from Python is :mod:`qcat.training.api` (re-exported by :mod:`qcat.training`)."""

from qcat.console.extras import require_extra

require_extra("data", "qcat.training.commands")
