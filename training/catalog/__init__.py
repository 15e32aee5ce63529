"""Catalogs as a training source: listings read and validated for training, turned into weighted
training pairs, and the short forms of listing titles and long queries."""

from qcat.console.extras import require_extra

require_extra("data", "qcat.training.catalog")
