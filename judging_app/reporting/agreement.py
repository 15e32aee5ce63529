"""Inter-rater agreement of graded judgments: Krippendorff's alpha (ordinal) and Fleiss' kappa.

A *unit* is one thing judged: one listing on one side of one query. Its ratings are the
grades (0–3) the judges gave it.

Krippendorff's alpha (Krippendorff 2011, "Computing Krippendorff's Alpha-Reliability"): with
the coincidence matrix ``o[c, k] = Σ_u n_uc·(n_uk − [c = k]) / (m_u − 1)`` over units with
``m_u ≥ 2`` ratings, ``n_c = Σ_k o[c, k]``, ``n = Σ_c n_c`` and the ordinal distance
``δ²(c, k) = (Σ_{g=c..k} n_g − (n_c + n_k)/2)²``,
``alpha = 1 − (n − 1)·Σ o[c, k]·δ²(c, k) / Σ n_c·n_k·δ²(c, k)``.

Fleiss' kappa (Fleiss 1971) over units rated by the same number ``r`` of raters, from the
table ``counts[i, j]`` of raters giving unit ``i`` category ``j``:
``P_i = (Σ_j counts[i, j]² − r) / (r(r − 1))``, ``p_j = Σ_i counts[i, j] / (N r)``,
``kappa = (mean P_i − Σ p_j²) / (1 − Σ p_j²)``.

Both are NaN where undefined (no pairable unit; every rating the same value).
"""

from __future__ import annotations

import numpy as np

CATEGORIES = 4  # grades 0..3


def count_table(units: list[list[int]], categories: int = CATEGORIES) -> np.ndarray:
    """``(units, categories)`` counts of each grade per unit."""
    table = np.zeros((len(units), categories), dtype=np.float64)
    for i, ratings in enumerate(units):
        for grade in ratings:
            if not 0 <= grade < categories:
                raise ValueError(f"rating {grade} is not in 0..{categories - 1}")
            table[i, grade] += 1
    return table


def coincidences(counts: np.ndarray) -> np.ndarray:
    m = counts.sum(axis=1)
    pairable = counts[m >= 2]
    weights = 1.0 / (m[m >= 2] - 1.0)
    outer = np.einsum("u,uc,uk->ck", weights, pairable, pairable)
    return outer - np.diag((pairable * weights[:, None]).sum(axis=0))


def ordinal_distance(n_c: np.ndarray) -> np.ndarray:
    """``δ²(c, k)`` for every pair of categories, from the category totals."""
    cumulative = np.concatenate([[0.0], np.cumsum(n_c)])
    c, k = np.meshgrid(np.arange(len(n_c)), np.arange(len(n_c)), indexing="ij")
    low, high = np.minimum(c, k), np.maximum(c, k)
    between = cumulative[high + 1] - cumulative[low]  # Σ_{g=low..high} n_g
    return (between - (n_c[c] + n_c[k]) / 2.0) ** 2


def krippendorff_alpha_ordinal(counts: np.ndarray) -> float:
    """Ordinal alpha from a ``(units, categories)`` count table."""
    counts = np.asarray(counts, dtype=np.float64)
    if counts.ndim != 2 or len(counts) == 0:
        return float("nan")
    o = coincidences(counts)
    n_c = o.sum(axis=1)
    n = n_c.sum()
    if n < 2:
        return float("nan")
    delta = ordinal_distance(n_c)
    observed = (o * delta).sum()
    expected = (np.outer(n_c, n_c) * delta).sum() / (n - 1.0)
    return float("nan") if expected == 0 else float(1.0 - observed / expected)


def fleiss_kappa(counts: np.ndarray) -> float:
    """Fleiss' kappa from a ``(units, categories)`` count table whose rows all sum to the
    same number of raters (at least 2)."""
    counts = np.asarray(counts, dtype=np.float64)
    if counts.ndim != 2 or len(counts) == 0:
        return float("nan")
    raters = counts.sum(axis=1)
    if not np.all(raters == raters[0]) or raters[0] < 2:
        raise ValueError("Fleiss' kappa needs the same number (at least 2) of ratings per unit")
    r = raters[0]
    p_i = ((counts**2).sum(axis=1) - r) / (r * (r - 1.0))
    p_j = counts.sum(axis=0) / (len(counts) * r)
    chance = (p_j**2).sum()
    return float("nan") if chance == 1 else float((p_i.mean() - chance) / (1.0 - chance))


def pairwise_agreement(counts: np.ndarray) -> float:
    """The share of pairs of ratings of the same unit that are equal."""
    counts = np.asarray(counts, dtype=np.float64)
    m = counts.sum(axis=1)
    pairs = (m * (m - 1)).sum()
    return float("nan") if pairs == 0 else float((counts * (counts - 1)).sum() / pairs)


def agreement(units: list[list[int]], raters: int) -> dict:
    """Alpha over every unit with 2+ ratings; kappa over the units with exactly ``raters``."""
    table = count_table(units)
    m = table.sum(axis=1)
    full = table[m == raters]
    return {
        "units": int((m >= 2).sum()),
        "krippendorff_alpha_ordinal": krippendorff_alpha_ordinal(table),
        "fleiss_kappa_units": int(len(full)),
        "fleiss_kappa": fleiss_kappa(full) if len(full) and raters >= 2 else float("nan"),
        "pairwise_agreement": pairwise_agreement(table),
    }
