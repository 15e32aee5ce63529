"""Training data: click tables split into train/validation/test, catalogs of listings, corpus
directories, real-text query sets, eBay's augmentation, and the provenance every bundle records."""

from qcat.console.extras import require_extra

require_extra("data", "qcat.training.data")
