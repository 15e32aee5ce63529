"""Scores as probabilities: the leaf calibration maps (``leaves.py``: the probability that a returned
category is right) and the node calibration (``nodes.py``: the deepest node right at a stated precision)."""

from qcat.models.calibration.leaves import (  # noqa: F401 (the leaf calibration's names, as before issue 52)
    CALIBRATION_FILE,
    LENGTH_EDGES,
    METHOD,
    RAW_SHARE,
    Calibration,
    calibrated,
    calibrated_one,
    calibrated_sources,
    describe,
    describe_scores,
    describe_verdict,
    length_bins,
    load_calibration,
    map_key,
    save_calibration,
    scores_calibrated,
)
