"""XReg training: tf-idf features, relevance weights, label trees, node regressors."""

from qcat.console.extras import require_extra

require_extra("data", "qcat.training.xreg")
