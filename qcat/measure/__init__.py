"""qcat measure: what training and evaluation both measure with (top-k against truth, PR@k, GS
scores, head/torso/tail segments); it imports only the rest of qcat's core, and SciPy (``data``)."""

from qcat.console.extras import require_extra

require_extra("data", "qcat.measure")
