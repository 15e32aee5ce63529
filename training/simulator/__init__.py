"""The demo corpus: the click simulator (queries, search index, clicks) over a real catalog, and
``qcat data build-demo``, which builds the demo corpus and the shipped demo model."""

from qcat.extras import require_extra

require_extra("data", "qcat.training.simulator")
