"""Training data: click tables split into train/validation/test, corpus directories, real-text query
sets, eBay's data augmentation, and the provenance every bundle records."""

from qcat.extras import require_extra

require_extra("data", "qcat.training.data")
