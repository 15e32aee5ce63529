"""The click simulator over a real catalog: shoppers' queries, the BM25 search they click on,
its knobs and random streams (``qcat data simulate``; the demo builder is in commands/)."""

from qcat.console.extras import require_extra

require_extra("data", "qcat.training.simulator")
