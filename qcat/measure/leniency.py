"""Strict, lenient and severe top-1 (DESIGN.md, "Taxonomies overlap").

Per query with at least one true category (the rows :class:`~qcat.measure.metrics.Matched`
averages over), of the model's top-1 answer:

- **strict**: it is a true category (the same as PR@1);
- **lenient**: it is a true category or confusable with one, per a
  :class:`~qcat.taxonomy.confusable.ConfusableMap` (pairs, not their closure);
- **severe**: it sits under another top-level node of the taxonomy than every true category
  (the errors that send a search to the wrong department) and is not credited: an answer the map
  pairs with a true category is lenient-correct, never severe too, even where the pair crosses
  departments (a map is a team's, and may pair such leaves); a query without an answer is not
  severe, only wrong. Without a map, severe is as before: wrong department, not strict;
- **severe, confident**: the same among the queries whose top-1 scores at least a threshold
  (0.5 by default): wrong departments the model was sure of.

Each figure comes with its standard error over queries (the sample standard deviation of the
per-query 0/1 outcomes / sqrt(n)), and :func:`top1_outcomes` gives the per-query outcomes that
paired comparisons need.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import scipy.sparse as sp

from qcat.measure.metrics import Matched
from qcat.taxonomy import Taxonomy
from qcat.taxonomy.confusable import ConfusableMap

CONFIDENT = 0.5
FIGURES = ("top-1 strict", "top-1 lenient", "severe", "severe confident")


@dataclass(frozen=True)
class Leniency:
    """What strict/lenient/severe need about a label space (``label_ids``, the truth's columns)."""

    department: np.ndarray  # int64 per label: position of its top-level node (-1 if unknown)
    confusable: sp.csr_matrix | None  # (labels, labels) bool with a true diagonal; None without a map
    map: ConfusableMap | None = None

    @classmethod
    def build(cls, label_ids: Sequence[str], taxonomy: Taxonomy, confusable: ConfusableMap | None = None) -> "Leniency":
        tops: dict[str, int] = {}
        department = np.full(len(label_ids), -1, dtype=np.int64)
        for i, label in enumerate(label_ids):
            if label in taxonomy:
                top = taxonomy.paths[taxonomy.index(label)][0]
                department[i] = tops.setdefault(top, len(tops))
        return cls(department, None if confusable is None else confusable_matrix(confusable, label_ids), confusable)


def confusable_matrix(confusable: ConfusableMap, labels: Sequence[str]) -> sp.csr_matrix:
    """Boolean ``(labels, labels)``: true on the diagonal and for every pair of ``labels`` in the map."""
    position = {label: i for i, label in enumerate(labels)}
    rows = list(range(len(position)))
    cols = list(range(len(position)))
    for a, b in confusable.pairs:
        if a in position and b in position:
            rows += [position[a], position[b]]
            cols += [position[b], position[a]]
    return sp.csr_matrix((np.ones(len(rows), dtype=bool), (rows, cols)), shape=(len(position), len(position)))


def top1_outcomes(matched: Matched, leniency: Leniency, confident: float = CONFIDENT) -> dict[str, np.ndarray]:
    """Per valid query (rows with a true category): boolean ``strict``, ``lenient`` (None
    without a map), ``severe`` and ``confident`` (the top-1 scores at least ``confident``)."""
    valid = matched.valid
    n_labels = len(leniency.department)
    top = matched.labels[valid, 0] if matched.k else np.full(int(valid.sum()), -1)
    truth = (matched.truth[valid][:, :n_labels] > 0).tocsr()  # columns past n_labels are never true
    known = (top >= 0) & (top < n_labels)
    rows = np.arange(len(top))
    strict = matched.hits[valid, 0] if matched.k else np.zeros(len(top), dtype=bool)
    lenient = None
    if leniency.confusable is not None:
        partners = leniency.confusable[np.where(known, top, 0)]
        lenient = strict | (known & (np.asarray(truth.multiply(partners).sum(axis=1)).ravel() > 0))
    departments = max(int(leniency.department.max(initial=-1)) + 1, 1)
    labelled = leniency.department >= 0
    to_department = sp.csr_matrix((np.ones(int(labelled.sum())), (np.nonzero(labelled)[0], leniency.department[labelled])),
                                  shape=(n_labels, departments))
    true_departments = (truth.astype(np.float64) @ to_department).tocsr()
    answer_department = np.where(known, leniency.department[np.where(known, top, 0)], -1)
    shares = np.asarray(true_departments[rows, np.maximum(answer_department, 0)]).ravel() if len(rows) else np.zeros(0)
    credited = strict if lenient is None else lenient  # an answer the map credits is no error, so not severe
    severe = (answer_department >= 0) & (shares == 0) & ~credited
    scores = matched.scores[valid, 0] if matched.k else np.zeros(len(top))
    return {"strict": strict, "lenient": lenient, "severe": severe, "confident": (top >= 0) & (scores >= confident)}


def mean_and_se(values: np.ndarray) -> tuple[float, float]:
    """The mean of per-query outcomes and its standard error (NaN for fewer than 2 values)."""
    values = np.asarray(values, dtype=np.float64)
    if len(values) == 0:
        return float("nan"), float("nan")
    se = float(values.std(ddof=1) / np.sqrt(len(values))) if len(values) > 1 else float("nan")
    return float(values.mean()), se


def leniency_summary(matched: Matched, leniency: Leniency, confident: float = CONFIDENT) -> dict[str, float | None]:
    """``top-1 strict``, ``top-1 lenient`` (None without a map), ``severe`` and ``severe
    confident`` (among answers scoring at least ``confident``), each with its ``… SE``, and
    ``confident share`` (the share of queries so answered)."""
    outcome = top1_outcomes(matched, leniency, confident)
    out: dict[str, float | None] = {}
    for name, values in (("top-1 strict", outcome["strict"]), ("top-1 lenient", outcome["lenient"]),
                         ("severe", outcome["severe"]), ("severe confident", outcome["severe"][outcome["confident"]])):
        mean, se = (None, None) if values is None else mean_and_se(values)
        out[name], out[f"{name} SE"] = mean, se
    out["confident share"] = float(outcome["confident"].mean()) if len(outcome["confident"]) else float("nan")
    return out
