"""Choosing and calibrating models: the validation objective every choice is made on, PR@k on a
click table, and fitting the score calibration a bundle ships."""

from qcat.console.extras import require_extra

require_extra("data", "qcat.training.selection")
