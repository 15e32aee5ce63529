"""Human-judged figures with answers nobody graded (issue 45 item 14): each figure's bounds with the
ungraded answers counted wrong and counted right, how many answers were never graded, precision@k
capped by the categories graded acceptable, and wins/ties/losses that never count two different
ungraded top-1 answers as a tie. Hand-computed cases."""

from __future__ import annotations

import numpy as np
import pytest

from qcat.measure.judged import figures, paired, query_outcomes, top_level_of
from qcat.taxonomy import from_paths

TAXONOMY = from_paths(["Food > Juice", "Food > Cheese", "Toys > Cars", "Toys > Models"])
LEAF = {TAXONOMY.path_of(i).split(" > ")[-1]: i for i in TAXONOMY.leaves}
JUICE, CHEESE, CARS, MODELS = (LEAF[n] for n in ("Juice", "Cheese", "Cars", "Models"))
# The six queries of test_judged_gold.test_outcomes_per_query_hand_computed, k = 2.
ANSWERS = [[JUICE, CHEESE], [CHEESE, CARS], [CARS, JUICE], [CHEESE, JUICE], [MODELS], [CARS, JUICE]]
GRADED = [{JUICE: 3, CHEESE: 1}, {CHEESE: 2}, {CARS: 0, JUICE: 3}, {CHEESE: 0, JUICE: 2}, {JUICE: 3},
          {CARS: 0, JUICE: 1}]


def test_ungraded_answers_give_each_figure_its_bounds_hand_computed() -> None:
    """Query 1's second answer (Cars) and query 4's only answer (Models, in Toys while only Food is
    acceptable) were never graded: counted right they are acceptable/exact, counted wrong query 4's
    is severe. Every query has at most one category graded 2 or more, so P@2 is capped at 1/2 (query
    5: nothing acceptable, capped at 0)."""
    out = query_outcomes(ANSWERS, GRADED, top_level_of(TAXONOMY), 2)
    assert out["acceptable_right"].tolist() == [1, 1, 0, 0, 1, 0]
    assert out["exact_right"].tolist() == [1, 0, 0, 0, 1, 0]
    assert out["severe_wrong"].tolist() == [0, 0, 1, 0, 1, 0]
    assert out["precision_right"].tolist() == [0.5, 1.0, 0.5, 0.5, 0.5, 0.0]
    assert out["ungraded_top1"].tolist() == [0, 0, 0, 0, 1, 0]
    assert out["ungraded_topk"].tolist() == [0, 1, 0, 0, 1, 0]
    assert out["answered_topk"].tolist() == [2, 2, 2, 2, 1, 2]
    assert out["precision_cap"].tolist() == [0.5, 0.5, 0.5, 0.5, 0.5, 0.0]
    got = figures(out, draws=0)
    assert (got["acceptable"]["as_wrong"], got["acceptable"]["as_right"]) == pytest.approx((2 / 6, 3 / 6))
    assert (got["exact"]["as_wrong"], got["exact"]["as_right"]) == pytest.approx((1 / 6, 2 / 6))
    assert (got["severe"]["as_right"], got["severe"]["as_wrong"]) == pytest.approx((1 / 6, 2 / 6))
    assert got["severe"]["value"] == pytest.approx(1 / 6)  # the figure itself: ungraded not severe
    assert (got["precision"]["as_wrong"], got["precision"]["as_right"]) == pytest.approx((2 / 6, 3 / 6))
    assert got["precision"]["cap"] == pytest.approx(2.5 / 6) and got["precision"]["capped"] == 6
    assert got["ungraded"] == {"top1": 1, "answers_top1": 6, "topk": 2, "answers_topk": 11}


def test_two_different_ungraded_top1_answers_are_no_tie_of_evidence() -> None:
    """The target against ANSWERS: 0 the same top-1 (tie); 1 Juice, never graded, against an
    acceptable Cheese (no evidence); 2 Juice graded 3 against Cars graded 0 (win); 3 Models, never
    graded, against Cheese graded 0 (no evidence: the old rule ranked it below wrong, a loss); 4 the
    same ungraded Models (the same answer: a tie); 5 no answer against Cars graded 0 (loss)."""
    top = top_level_of(TAXONOMY)
    baseline = query_outcomes(ANSWERS, GRADED, top, 2)
    target = query_outcomes([[JUICE], [JUICE], [JUICE], [MODELS], [MODELS], []], GRADED, top, 2)
    got = paired(baseline, target, draws=0)
    assert (got["win"], got["tie"], got["loss"], got["ungraded"]) == (1, 2, 1, 2)
    assert got["acceptable"]["value"] == pytest.approx((0 - 1 + 1 + 0 + 0 + 0) / 6)
    assert np.isnan(got["acceptable"]["low"])  # no draws, no interval
