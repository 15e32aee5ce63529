"""qcat evaluation: metrics, propensities, ``qcat evaluate`` and its reports, and the golden-data
search harness (golden/). The measures training shares with it are in :mod:`qcat.measure`."""

from qcat.console.extras import require_extra

require_extra("eval", "qcat.evaluation")
