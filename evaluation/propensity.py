"""Jain et al.'s propensity model (KDD 2016 §5) and a fit of its parameters A and B.

A label seen ``N_l`` times among ``N`` training points is observed, when relevant, with
propensity ``p_l = 1 / (1 + C e^{-A log(N_l + B)}) = 1 / (1 + C (N_l + B)^{-A})`` where
``C = (log N - 1)(B + 1)^A`` (natural logarithms). Without a fit, A = 0.55 and B = 1.5,
the paper's recommendation for datasets without the meta-data to estimate them.

Fitting follows the paper's recipe: given, per label, the observed count ``N_l`` and an
estimate of its complete count ``N*_l`` (so ``p_l ≈ N_l / N*_l``), labels are sorted by
``N_l`` and binned into equal-height bins (20 labels each), and A, B are chosen by least
squares between each bin's mean estimated propensity and the model at the bin's mean
``N_l``. In qcat the complete count is a label's queries with any click and the observed
count its queries that pass the click threshold (see ``qcat evaluate --fit-propensity``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

DEFAULT_A = 0.55
DEFAULT_B = 1.5


@dataclass(frozen=True)
class PropensityModel:
    a: float = DEFAULT_A
    b: float = DEFAULT_B
    fitted: bool = False

    def __post_init__(self) -> None:
        # B = 0 would give a label never seen in training an infinite weight.
        if not (self.a > 0 and self.b > 0):
            raise ValueError(f"the propensity model needs A > 0 and B > 0, got A={self.a}, B={self.b}")

    def propensity(self, label_counts: np.ndarray, n_points: int) -> np.ndarray:
        """``p_l`` of every label from its count among ``n_points`` training points."""
        return 1.0 / self.inverse(label_counts, n_points)

    def inverse(self, label_counts: np.ndarray, n_points: int) -> np.ndarray:
        """``1 / p_l = 1 + C (N_l + B)^{-A}`` (eq. 2), the weight of each label."""
        counts = np.asarray(label_counts, dtype=np.float64)
        if n_points < 1 or (counts.size and counts.min() < 0):
            raise ValueError("label counts must be non-negative and the number of points positive")
        c = (np.log(n_points) - 1.0) * (self.b + 1.0) ** self.a
        return 1.0 + c * (counts + self.b) ** (-self.a)


def label_counts(truth) -> np.ndarray:
    """``N_l``: the number of rows (points) in which each label is true."""
    return np.bincount(truth.indices, minlength=truth.shape[1]).astype(np.float64)


def fit_propensity(observed: np.ndarray, complete: np.ndarray, n_points: int, bin_size: int = 20) -> PropensityModel:
    """Fit A and B to per-label estimates ``p_l = observed_l / complete_l``.

    Labels with ``complete_l == 0`` carry no information and are left out; at least two
    bins of ``bin_size`` labels must remain.
    """
    observed = np.asarray(observed, dtype=np.float64)
    complete = np.asarray(complete, dtype=np.float64)
    if observed.shape != complete.shape:
        raise ValueError("observed and complete counts must have one entry per label each")
    if np.any(observed > complete):
        raise ValueError("a label's observed count cannot exceed its complete count")
    keep = complete > 0
    observed, complete = observed[keep], complete[keep]
    order = np.argsort(observed, kind="stable")
    n_bins = len(order) // bin_size
    if n_bins < 2:
        raise ValueError(f"need at least {2 * bin_size} labels with a complete count to fit propensities, got {len(order)}")
    bins = np.array_split(order[: n_bins * bin_size], n_bins)
    bin_counts = np.array([observed[b].mean() for b in bins])
    bin_propensity = np.array([(observed[b] / complete[b]).mean() for b in bins])
    log_n = np.log(n_points)

    def residuals(params: np.ndarray) -> np.ndarray:
        a, b = params
        c = (log_n - 1.0) * (b + 1.0) ** a
        return 1.0 / (1.0 + c * (bin_counts + b) ** (-a)) - bin_propensity

    import scipy.optimize  # here: a quarter-second import every `qcat evaluate` would pay

    result = scipy.optimize.least_squares(
        residuals, x0=[DEFAULT_A, DEFAULT_B], bounds=([1e-3, 1e-3], [5.0, 100.0]), xtol=1e-12, ftol=1e-12
    )
    return PropensityModel(float(result.x[0]), float(result.x[1]), fitted=True)
