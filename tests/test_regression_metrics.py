"""XReg metrics against a dense reference, Lemma 3.1 as a property, and the propensity fit."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from qcat.evaluation import regression as R
from qcat.evaluation.propensity import PropensityModel, fit_propensity
from qcat.measure.metrics import Matched

relevance = st.one_of(st.just(0.0), st.floats(0.0, 1.0, allow_nan=False))


@st.composite
def problems(draw, positive_scores: bool):
    n_labels = draw(st.integers(2, 9))
    y = np.array(draw(st.lists(relevance, min_size=n_labels, max_size=n_labels)))
    if y.max() == 0:
        y[draw(st.integers(0, n_labels - 1))] = draw(st.floats(0.01, 1.0))
    low = 1e-3 if positive_scores else 0.0
    y_hat = np.array(draw(st.lists(st.one_of(st.just(low), st.floats(low, 1.0)), min_size=n_labels, max_size=n_labels)))
    k = draw(st.integers(1, 4))
    return y, y_hat, k


def sparse_predictions(y: np.ndarray, y_hat: np.ndarray, width: int | None = None) -> Matched:
    """List the labels with ŷ > 0, best first (ties to the lower label), as a top-k list."""
    order = np.lexsort((np.arange(len(y_hat)), -y_hat))
    order = order[y_hat[order] > 0][:width]
    labels = np.full((1, len(y_hat)), -1)
    scores = np.zeros((1, len(y_hat)))
    labels[0, : len(order)] = order
    scores[0, : len(order)] = y_hat[order]
    return Matched.build(labels, scores, sp.csr_matrix(y[None, :]))


def dense_tau(y: np.ndarray, y_hat: np.ndarray, k: int) -> float:
    by_prediction = np.lexsort((np.arange(len(y)), -y_hat))[:k]
    true_labels = np.nonzero(y > 0)[0]
    by_truth = true_labels[np.lexsort((true_labels, -y[true_labels]))][:k]
    union = sorted(set(by_prediction) | set(by_truth))
    pairs = [(a, b) for i, a in enumerate(union) for b in union[i + 1:] if y[a] != y[b]]
    if not pairs:
        return 1.0
    return sum(np.sign((y[a] - y[b]) * (y_hat[a] - y_hat[b])) for a, b in pairs) / len(pairs)


def dense_reference(y: np.ndarray, y_hat: np.ndarray, k: int) -> dict[str, float]:
    errors = np.sort(np.abs(y_hat - y))[::-1][:k]
    by_prediction = np.lexsort((np.arange(len(y)), -y_hat))[:k]
    by_truth = np.sort(y)[::-1][:k]
    return {
        "tau": dense_tau(y, y_hat, k),
        "xmad": errors.sum() / k,
        "xrmse": np.sqrt((errors**2).sum() / k),
        "mad": np.abs(y_hat - y).mean(),
        "wp": y[by_prediction].sum() / k,
        "regret": by_truth.sum() / k - y[by_prediction].sum() / k,
    }


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(problems(positive_scores=True))
def test_regression_metrics_match_dense_definitions(problem) -> None:
    y, y_hat, k = problem
    matched = sparse_predictions(y, y_hat)
    expected = dense_reference(y, y_hat, k)
    assert R.xmad_at_k(matched, k) == pytest.approx(expected["xmad"], abs=1e-12)
    assert R.xrmse_at_k(matched, k) == pytest.approx(expected["xrmse"], abs=1e-12)
    assert R.mad(matched) == pytest.approx(expected["mad"], abs=1e-12)
    assert R.wp_at_k(matched, k) == pytest.approx(expected["wp"], abs=1e-12)
    assert R.wp_regret_at_k(matched, k) == pytest.approx(expected["regret"], abs=1e-12)
    assert R.tau_at_k(matched, k) == pytest.approx(expected["tau"], abs=1e-12)


def test_tau_with_k_beyond_the_label_count() -> None:
    # Two labels, ranked exactly reversed: -1 whatever k, no phantom labels past the second.
    matched = sparse_predictions(np.array([1.0, 0.5]), np.array([0.1, 0.9]))
    assert [R.tau_at_k(matched, k) for k in (2, 3, 10)] == [-1.0, -1.0, -1.0]


@pytest.mark.slow
@settings(max_examples=500, deadline=None)
@given(problems(positive_scores=False), st.integers(1, 9))
def test_lemma_3_1_wp_regret_is_bounded_by_twice_xmad_at_2k(problem, width) -> None:
    """XReg Lemma 3.1: 0 <= WP-regret@k <= 2 XMAD@2k, for sparse (truncated) predictions too."""
    y, y_hat, k = problem
    matched = sparse_predictions(y, y_hat, width)
    regret = R.wp_regret_at_k(matched, k)
    assert -1e-12 <= regret <= 2 * R.xmad_at_k(matched, 2 * k) + 1e-12


def test_propensity_formula_hand_computed() -> None:
    # N = e^2 points, so log N - 1 = 1 and C = (B + 1)^A = 2 with A = 1, B = 1.
    model = PropensityModel(a=1.0, b=1.0)
    inverse = model.inverse(np.array([0.0, 1.0, 3.0]), n_points=int(round(np.exp(2) * 1e6)) // 10**6)
    c = (np.log(7) - 1) * 2.0  # n_points rounds to 7
    np.testing.assert_allclose(inverse, 1 + c / np.array([1.0, 2.0, 4.0]))
    np.testing.assert_allclose(model.propensity(np.array([1.0]), 7), 1 / (1 + c / 2))
    with pytest.raises(ValueError):
        model.inverse(np.array([-1.0]), 7)
    with pytest.raises(ValueError, match="B > 0"):
        PropensityModel(a=0.55, b=0.0)  # a label unseen in training would weigh infinitely


@pytest.mark.parametrize("a, b", [(0.55, 1.5), (0.5, 0.4), (0.6, 2.6), (0.9, 8.0)])
def test_fit_recovers_the_parameters(a: float, b: float) -> None:
    n_points = 50_000
    observed = np.repeat(np.geomspace(1, 5000, 40).round(), 20)  # 40 bins of 20 equal counts
    complete = observed / PropensityModel(a, b).propensity(observed, n_points)
    fitted = fit_propensity(observed, complete, n_points)
    assert fitted.fitted
    assert fitted.a == pytest.approx(a, rel=1e-4) and fitted.b == pytest.approx(b, rel=1e-3)


def test_fit_rejects_impossible_counts() -> None:
    with pytest.raises(ValueError, match="cannot exceed"):
        fit_propensity(np.array([3.0]), np.array([2.0]), 10)
    with pytest.raises(ValueError, match="at least 40 labels"):
        fit_propensity(np.ones(10), np.ones(10) * 2, 10)
