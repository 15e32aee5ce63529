"""Calibrated scores: a monotone map from a backend's raw score to the probability that the
category is right, one map per answering source (``lookup``, ``nb``, ``xmlq``, ``xreg``) and
query length (1, 2, 3, 4-5, 6-8, 9+ tokens: a 10-token title and a 2-token query with the same
raw score are not equally often right). A length bin with too few validation queries uses the
source's map over all lengths.

The maps are fitted on validation queries by isotonic regression (``qcat.training.selection.calibrate``)
and stored in the bundle as ``calibration.json`` (hashed like every bundle file). Serving
interpolates linearly between the map's knots and mixes in ``RAW_SHARE`` of the raw score,
``p = (1 - RAW_SHARE) · map(s) + RAW_SHARE · s``, so the result is strictly increasing: it never
ties two categories the raw scores told apart, so it never changes a ranking. It reads one
score at a time, so a category's score does not depend on how many categories are returned.
Serving needs numpy only.
"""

from __future__ import annotations

import bisect
import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Sequence

import numpy as np

from qcat.bundles.bundle import Manifest
from qcat.errors import BundleError
from qcat.models.model import Predictions
from qcat.models.overrides import JUDGED
from qcat.text.normalize import tokenize

CALIBRATION_FILE = "calibration.json"
METHOD = "isotonic"
RAW_SHARE = 1e-3  # of the raw score, mixed in so the map is strictly increasing
LENGTH_EDGES = (1, 2, 3, 5, 8)  # length bins: 1, 2, 3, 4-5, 6-8, 9+ tokens


def length_bins(token_counts: np.ndarray) -> np.ndarray:
    return np.searchsorted(LENGTH_EDGES, token_counts, side="left")


def map_key(source: str, length_bin: int | None = None) -> str:
    """``source`` for a source's map over all lengths, ``source:bin`` for one length bin."""
    return source if length_bin is None else f"{source}:{length_bin}"


@dataclass(frozen=True)
class Calibration:
    """``maps[source] = (x, y)``: knots of a non-decreasing piecewise-linear map, x ascending."""

    maps: dict[str, tuple[np.ndarray, np.ndarray]]  # keyed by :func:`map_key`
    fitted_on: dict  # what the maps were fitted on (sets, weights, points per source)

    @property
    def sources(self) -> list[str]:
        return sorted({key.split(":")[0] for key in self.maps})

    def calibrate(self, key: str, scores: np.ndarray) -> np.ndarray:
        x, y = self.maps[key]
        return ((1.0 - RAW_SHARE) * np.interp(scores, x, y) + RAW_SHARE * scores).astype(scores.dtype)

    def map_for(self, source: str, length_bin: int) -> str | None:
        """The key of the map that calibrates ``source`` at ``length_bin``: the bin's own map,
        else the source's map over all lengths, else None (raw scores)."""
        for key in (map_key(source, length_bin), map_key(source)):
            if key in self.maps:
                return key
        return None

    def apply(self, predictions: Predictions, queries: Sequence[str]) -> Predictions:
        """The same predictions of ``queries`` with every returned category's score calibrated."""
        if len(queries) == 0:
            return predictions
        scores = predictions.scores.copy()
        names, source_of_row = np.unique(np.asarray(predictions.sources, dtype=object), return_inverse=True)
        bins = length_bins(np.fromiter((len(tokenize(q)) for q in queries), dtype=np.int64, count=len(queries)))
        n_bins = len(LENGTH_EDGES) + 1
        group_of_row = source_of_row * n_bins + bins
        for group in np.unique(group_of_row):  # only the (source, length bin) pairs of this batch
            key = self.map_for(names[group // n_bins], int(group % n_bins))
            if key is not None:
                rows = np.flatnonzero(group_of_row == group)
                present = predictions.labels[rows] >= 0
                scores[rows] = np.where(present, self.calibrate(key, scores[rows]), 0.0)
        return replace(predictions, scores=scores)

    def to_json(self) -> dict:
        return {"method": METHOD, "fitted_on": self.fitted_on,
                "maps": {s: {"x": x.tolist(), "y": y.tolist()} for s, (x, y) in self.maps.items()}}

    @classmethod
    def from_json(cls, data: dict, where: str) -> "Calibration":
        try:
            maps = {s: (np.asarray(m["x"], dtype=np.float64), np.asarray(m["y"], dtype=np.float64))
                    for s, m in data["maps"].items()}
            fitted_on = data.get("fitted_on", {})
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise BundleError(f"{where}: not a calibration ({exc})") from None
        for source, (x, y) in maps.items():
            if (x.ndim != 1 or x.shape != y.shape or len(x) == 0 or np.any(np.diff(x) < 0) or np.any(np.diff(y) < 0)
                    or not np.all(np.isfinite(x)) or np.any(y < 0) or np.any(y > 1)):
                raise BundleError(f"{where}: the map of {source!r} is not a non-decreasing map into [0, 1]")
        return cls(maps, fitted_on)


def calibrated(calibration: "Calibration | None", predictions: Predictions, queries: Sequence[str]) -> Predictions:
    return predictions if calibration is None else calibration.apply(predictions, queries)


def calibrated_one(calibration: "Calibration | None", predictions: Predictions, query: str) -> Predictions:
    """:func:`calibrated` for the single-query path: ``predictions`` (one row, made by the
    caller) has its scores calibrated in place by the compiled :func:`qcat.models.kernels.calibrate_row`."""
    if calibration is None:
        return predictions
    key = calibration.map_for(predictions.sources[0], bisect.bisect_left(LENGTH_EDGES, len(tokenize(query))))
    if key is not None:
        from qcat.models import kernels
        x, y = calibration.maps[key]
        kernels.calibrate_row(predictions.labels[0], predictions.scores[0], x, y, RAW_SHARE)
    return predictions


def save_calibration(calibration: "Calibration | None", directory: str | Path) -> None:
    """Write ``calibration.json`` into a bundle directory (before its manifest is written)."""
    path = Path(directory) / CALIBRATION_FILE
    if calibration is None:
        path.unlink(missing_ok=True)
        return
    path.write_text(json.dumps(calibration.to_json(), indent=1, sort_keys=True) + "\n", encoding="utf-8")


def load_calibration(manifest: Manifest) -> "Calibration | None":
    """The bundle's calibration, or None for a bundle without one (raw scores)."""
    if CALIBRATION_FILE not in manifest.data["files"]:
        return None
    path = manifest.file(CALIBRATION_FILE)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BundleError(f"model bundle {manifest.directory}: cannot read {CALIBRATION_FILE}: {exc}") from None
    return Calibration.from_json(data, f"model bundle {manifest.directory}: {CALIBRATION_FILE}")


def describe(calibration: "Calibration | None", source: str) -> str:
    """One line for ``--explain``."""
    if calibration is None or source not in calibration.sources:
        return "  scores are the model's raw scores (no calibration for this part)"
    return f"  scores are calibrated probabilities ({METHOD} maps by query length, fitted on validation queries)"


def scores_calibrated(model, source: str) -> bool:
    """Whether the scores of an answer ``model`` gave from ``source`` went through a calibration
    map (the model's own, or for a hybrid, that of the part that answered). A judged override's
    answer (:data:`qcat.models.overrides.JUDGED`: its judged categories at 1.0, then the model's own
    answers) counts as calibrated where the model calibrates any of its scores."""
    if source == JUDGED:
        return bool(calibrated_sources(model))
    own = getattr(model, "calibration", None)
    if own is not None and source in own.sources:
        return True
    return model.backend == "hybrid" and any(scores_calibrated(model.part(name), source) for name in model.parts)


def calibrated_sources(model) -> list[str]:
    """The answering sources whose scores a model (or a hybrid's parts) calibrates."""
    parts = [model.part(name) for name in model.parts] if model.backend == "hybrid" else []
    return sorted({source for part in parts + [model] if part.calibration is not None for source in part.calibration.sources})


def describe_verdict(source: str, verdict: dict) -> str:
    """Why one source's scores are calibrated or raw, from ``fitted_on["ece"]`` (qcat.training.selection.calibrate)."""
    if "why" in verdict:
        return f"{source} raw ({verdict['why']})"
    raw, crossed = f"{verdict['ece_raw']:.3f}", f"{verdict['ece_calibrated_held_out']:.3f}"
    if verdict["kept"]:
        return f"{source} calibrated: held-out ECE {raw} raw -> {crossed}"
    worse = "worse" if crossed != raw else "no better"  # a rise below the printed digits is no better, not worse
    return f"{source} raw (calibrating made it {worse}): held-out ECE {raw} raw -> {crossed}"


def describe_scores(model) -> str:
    """Whether a model's scores are calibrated probabilities, source by source, and why (for a
    hybrid, part by part: its own map recalibrates what the parts answer)."""
    owners = [(f"{name}/ ", model.part(name)) for name in model.parts] + [("hybrid ", model)] \
        if model.backend == "hybrid" else [("", model)]
    details = []
    for prefix, owner in owners:
        verdicts = owner.calibration.fitted_on.get("ece", {}) if owner.calibration is not None else {}
        details += [prefix + describe_verdict(source, verdict) for source, verdict in sorted(verdicts.items())]
    calibrated = calibrated_sources(model)
    head = (f"calibrated probabilities from {', '.join(calibrated)}" if calibrated
            else "raw scores, not calibrated probabilities")
    return head + (f" ({'; '.join(details)})" if details else "")
