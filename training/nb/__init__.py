"""Training the Naive Bayes backend (eBay §3.2): click-count tables, its threshold and smoothing
chosen on the validation objective."""

from qcat.console.extras import require_extra

require_extra("data", "qcat.training.nb")
