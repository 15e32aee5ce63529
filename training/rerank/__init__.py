"""Training the second stage: candidates and features for the validation sets, cross-fitted
LightGBM lambdarank, and the trees exported to the arrays the serving core walks."""

from qcat.console.extras import require_extra

require_extra("train", "qcat.training.rerank")
