"""The training commands: ``qcat train ...`` and ``qcat data ...``, with the data flags they share.
Training from Python is :mod:`qcat.training.api` (re-exported by :mod:`qcat.training`)."""

from qcat.extras import require_extra

require_extra("data", "qcat.training.commands")
