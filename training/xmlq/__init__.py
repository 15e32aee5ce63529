"""XML-Q (eBay §3.3): the CNN-RNN query classifier, its losses, training and export."""

from qcat.console.extras import require_extra

require_extra("train", "qcat.training.xmlq")
