"""Metrics: hand-computed cases, and agreement with napkinXC and trec_eval on random data."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.stats

from qcat.evaluation import metrics as M
from qcat.evaluation import regression as R
from qcat.evaluation.propensity import PropensityModel, label_counts
from qcat.measure.metrics import Matched, gs_scores, pr_at_k
from qcat.measure.ranking import binary, rank_predictions, row_normalized

LOG3 = math.log2(3)


@pytest.fixture()
def small() -> Matched:
    """Three queries over five labels. Row 0: true {0: 3 clicks, 2: 1 click}, predicted
    2 (0.6), 0 (0.3), 4 (0.1). Row 1: true {1}, predicted 3 (0.5), 1 (0.4). Row 2 has no
    true label and is skipped by every mean."""
    truth = sp.csr_matrix(([3.0, 1.0, 1.0], ([0, 0, 1], [0, 2, 1])), shape=(3, 5))
    labels = np.array([[2, 0, 4], [3, 1, -1], [1, 2, 3]])
    scores = np.array([[0.6, 0.3, 0.1], [0.5, 0.4, 0.0], [0.9, 0.5, 0.1]])
    return Matched.build(labels, scores, truth)


def test_ranking_is_deterministic_and_validated() -> None:
    labels, scores = rank_predictions(np.array([[5, -1, 2, 7]]), np.array([[0.5, 9.0, 0.5, 0.7]]))
    assert labels.tolist() == [[7, 2, 5, -1]]  # 0.7, then the 0.5 tie by lower label, pad last
    assert scores.tolist() == [[0.7, 0.5, 0.5, 0.0]]
    with pytest.raises(ValueError, match="row 1 lists a label twice"):
        rank_predictions(np.array([[1, 2], [3, 3]]), np.ones((2, 2)))
    with pytest.raises(ValueError, match="row 0 has a NaN"):
        rank_predictions(np.array([[1, 2]]), np.array([[np.nan, 1.0]]))
    with pytest.raises(ValueError, match=r"\[-1, 4\)"):
        rank_predictions(np.array([[1, 4]]), np.ones((1, 2)), n_labels=4)
    with pytest.raises(ValueError, match="3 rows but there are 2"):
        Matched.build(np.zeros((2, 1), int), np.zeros((2, 1)), sp.csr_matrix((3, 4)))
    with pytest.raises(ValueError, match="non-negative"):
        Matched.build(np.zeros((1, 1), int), np.zeros((1, 1)), sp.csr_matrix(np.array([[-1.0]])))


def test_unweighted_metrics_hand_computed(small: Matched) -> None:
    assert small.n_skipped == 1
    assert M.precision_at_k(small, 1) == pytest.approx(0.5)
    assert M.precision_at_k(small, 3) == pytest.approx((2 / 3 + 1 / 3) / 2)
    assert pr_at_k(small, 1) == pytest.approx(0.5)
    assert pr_at_k(small, 3) == pytest.approx(1.0)  # row 0: 2/min(3,2); row 1: 1/min(3,1)
    gs = gs_scores(small, threshold=0.5)
    # Row 0: Z={2}, Y={0,2}: P 1, R 1/2, F1 2/3. Row 1: Z={3} (0.5 >= 0.5), Y={1}: all 0.
    assert gs == pytest.approx({"precision": 0.5, "recall": 0.25, "f1": 1 / 3})
    # Threshold 0.35 keeps 2 only in row 0 and 3 only in row 1; at_least_one off and a
    # threshold above every score leave Z empty: precision 0, F1 0.
    assert gs_scores(small, threshold=0.95, at_least_one=False) == pytest.approx({"precision": 0, "recall": 0, "f1": 0})
    assert gs_scores(small, threshold=0.25) == pytest.approx(
        {"precision": (1 + 0.5) / 2, "recall": (1 + 1) / 2, "f1": (1 + 2 * 1 / (1 + 2)) / 2})
    assert M.coverage_at_k(small, 1) == pytest.approx(1 / 3)  # true labels {0,1,2}; label 2 found at rank 1
    assert M.coverage_at_k(small, 2) == pytest.approx(1.0)


def test_graded_ndcg_hand_computed(small: Matched) -> None:
    row0 = (1 + 3 / LOG3) / (3 + 1 / LOG3)  # gains [1, 3], ideal [3, 1]
    row1 = (1 / LOG3) / 1
    assert M.ndcg_at_k(small, 2) == pytest.approx((row0 + row1) / 2)
    assert M.ndcg_at_k(small, 1) == pytest.approx((1 / 3 + 0) / 2)


def test_propensity_scored_metrics_hand_computed(small: Matched) -> None:
    inv = np.array([2.0, 4.0, 1.0, 1.0, 1.0])
    # PSP@1: row 0 top label 2 is true (1/p = 1), best is label 0 (2); row 1 misses, best 4.
    assert M.psp_at_k_raw(small, inv, 1) == pytest.approx((1 + 0) / 2)
    assert M.psp_at_k_normalized(small, inv, 1) == pytest.approx(1 / (2 + 4))
    assert M.psp_at_k_raw(small, inv, 2) == pytest.approx(((1 + 2) / 2 + 4 / 2) / 2)
    assert M.psp_at_k_normalized(small, inv, 2) == pytest.approx(1.0)
    norm2 = 1 + 1 / LOG3
    raw0, raw1 = (1 + 2 / LOG3) / norm2, (4 / LOG3) / norm2
    assert M.psndcg_at_k_raw(small, inv, 2) == pytest.approx((raw0 + raw1) / 2)
    # Normalized: per-row norms over min(k, |Y|) ranks (2 and 1), best rows [2, 1] and [4].
    attained = (1 + 2 / LOG3) / norm2 + (4 / LOG3) / 1
    possible = (2 + 1 / LOG3) / norm2 + 4 / 1
    assert M.psndcg_at_k_normalized(small, inv, 2) == pytest.approx(attained / possible)


def test_regression_metrics_hand_computed(small: Matched) -> None:
    shares = Matched.build(small.labels, small.scores, row_normalized(small.truth)).subset(np.array([0]))
    # y = {0: .75, 2: .25}; ŷ = {2: .6, 0: .3, 4: .1}; errors .45, .35, .1 and 0 elsewhere.
    assert R.xmad_at_k(shares, 2) == pytest.approx((0.45 + 0.35) / 2)
    assert R.xrmse_at_k(shares, 2) == pytest.approx(math.sqrt((0.45**2 + 0.35**2) / 2))
    assert R.xmad_at_k(shares, 5) == pytest.approx(0.9 / 5)
    assert R.mad(shares) == pytest.approx(0.9 / 5)
    assert R.wp_at_k(shares, 1) == pytest.approx(0.25)
    assert R.wp_regret_at_k(shares, 1) == pytest.approx(0.5)
    assert R.wp_regret_at_k(shares, 2) == pytest.approx(0.0)
    assert R.tau_at_k(shares, 1) == pytest.approx(-1.0)  # U = {2, 0}, discordant
    assert R.tau_at_k(shares, 3) == pytest.approx(1 / 3)  # (2,0) discordant; (2,4), (0,4) concordant
    perfect = Matched.build(np.array([[0, 2]]), np.array([[0.75, 0.25]]), shares.truth)
    assert R.tau_at_k(perfect, 2) == 1.0 and R.xmad_at_k(perfect, 2) == 0.0
    with pytest.raises(ValueError, match="non-negative relevance scores"):
        R.xmad_at_k(Matched.build(np.array([[0]]), np.array([[-1.0]]), shares.truth), 1)


def test_sparse_predictions_count_missing_labels_as_zero_score() -> None:
    truth = sp.csr_matrix(np.array([[0.0, 1.0, 0.0]]))
    empty = Matched.build(np.array([[-1, -1]]), np.zeros((1, 2)), truth)
    assert R.wp_regret_at_k(empty, 1) == 1.0
    assert R.xmad_at_k(empty, 2) == 0.5  # errors: 1 on label 1, 0 elsewhere
    assert R.tau_at_k(empty, 1) == 0.0  # pad and label 1 tie at ŷ = 0


def test_binary_relevance_accuracy_and_auc() -> None:
    assert M.accuracy([True, False, True, True], [True, True, True, False]) == 0.5
    # Hand: relevant {0.9, 0.4}, irrelevant {0.4, 0.1}: pairs 1 + 1 + 0.5 + 1 over 4.
    assert M.roc_auc([0.9, 0.4, 0.4, 0.1], [True, True, False, False]) == pytest.approx(3.5 / 4)
    assert math.isnan(M.roc_auc([0.2, 0.3], [True, True]))
    rng = np.random.default_rng(3)
    scores = rng.integers(0, 20, 500).astype(float)  # many ties
    relevant = rng.random(500) < scores / 25
    u = scipy.stats.mannwhitneyu(scores[relevant], scores[~relevant]).statistic
    assert M.roc_auc(scores, relevant) == pytest.approx(u / (relevant.sum() * (~relevant).sum()))


def test_reliability_bins_top1(small: Matched) -> None:
    diagram = M.reliability(small, bins=2)
    # Valid rows: top-1 scores 0.6 (correct) and 0.5 (wrong) both land in bin [0.5, 1].
    assert diagram.count.tolist() == [0, 2]
    assert diagram.mean_score[1] == pytest.approx(0.55) and diagram.accuracy[1] == pytest.approx(0.5)
    assert diagram.expected_calibration_error == pytest.approx(0.05)


def test_an_empty_segment_scores_nan_not_an_error() -> None:
    from qcat.evaluation.scoring import summarize

    empty = Matched.build(np.zeros((0, 10), int), np.zeros((0, 10)), sp.csr_matrix((0, 5)))
    scores = summarize(empty, np.ones(5))
    assert scores["queries"] == 0
    no_predictions = Matched.build(np.zeros((2, 0), int), np.zeros((2, 0)), sp.csr_matrix(np.eye(2, 5)))
    assert summarize(no_predictions, np.ones(5))["PR@1"] == 0.0
    assert all(math.isnan(v) for key, v in scores.items() if key not in ("queries", "skipped"))


def _random_problem(seed: int, n: int = 400, n_labels: int = 60, k: int = 10):
    rng = np.random.default_rng(seed)
    truth = sp.random(n, n_labels, density=0.06, random_state=seed, format="csr",
                      data_rvs=lambda size: rng.integers(1, 5, size).astype(float))
    empty = np.diff(truth.indptr) == 0
    truth = truth + sp.csr_matrix((np.ones(empty.sum()), (np.nonzero(empty)[0], rng.integers(0, n_labels, empty.sum()))),
                                  shape=truth.shape)
    labels = np.argsort(rng.random((n, n_labels)), axis=1)[:, :k]
    scores = rng.random((n, k))  # distinct almost surely: no tie-breaking differences
    return truth.tocsr(), labels, scores


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_agrees_with_napkinxc(seed: int) -> None:
    import napkinxc.metrics as nm
    truth, labels, scores = _random_problem(seed)
    matched = Matched.build(labels, scores, binary(truth))
    ranked = [list(row) for row in matched.labels]
    inv = nm.Jain_et_al_inverse_propensity(binary(truth))  # it sums values: give it counts
    ours = PropensityModel().inverse(label_counts(matched.truth), truth.shape[0])
    np.testing.assert_allclose(ours, inv)
    for k in (1, 3, 5, 10):
        assert M.precision_at_k(matched, k) == pytest.approx(nm.precision_at_k(truth, ranked, k=k)[-1])
        assert M.ndcg_at_k(matched, k) == pytest.approx(nm.ndcg_at_k(truth, ranked, k=k)[-1])
        assert M.psp_at_k_normalized(matched, inv, k) == pytest.approx(nm.psprecision_at_k(truth, ranked, inv, k=k)[-1])
        assert M.psp_at_k_raw(matched, inv, k) == pytest.approx(
            nm.psprecision_at_k(truth, ranked, inv, k=k, normalize=False)[-1])
        assert M.psndcg_at_k_normalized(matched, inv, k) == pytest.approx(nm.psndcg_at_k(truth, ranked, inv, k=k)[-1])
        assert M.coverage_at_k(matched, k) == pytest.approx(nm.coverage_at_k(truth, ranked, k=k)[-1])


@pytest.mark.parametrize("seed", [0, 1])
def test_graded_ndcg_agrees_with_trec_eval(seed: int) -> None:
    import pytrec_eval
    truth, labels, scores = _random_problem(seed)
    matched = Matched.build(labels, scores, truth)
    qrels = {f"q{i}": {f"d{l}": int(v) for l, v in zip(truth[i].indices, truth[i].data)} for i in range(truth.shape[0])}
    run = {f"q{i}": {f"d{l}": float(s) for l, s in zip(labels[i], scores[i])} for i in range(truth.shape[0])}
    results = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.1,3,5,10"}).evaluate(run)
    for k in (1, 3, 5, 10):
        expected = np.mean([results[q][f"ndcg_cut_{k}"] for q in qrels])
        assert M.ndcg_at_k(matched, k) == pytest.approx(expected, rel=1e-9)
