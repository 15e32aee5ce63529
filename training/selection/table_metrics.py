"""PR@k of a model on a click table: what training tunes on (:mod:`qcat.training.selection.objective`) and
stores as a bundle's metrics."""

from __future__ import annotations

import numpy as np

from qcat.measure.metrics import pr_at_k
from qcat.measure.predict import predict_matched
from qcat.model import Model
from qcat.training.clicklogs.clicktable import ClickTable
from qcat.training.data.dataset import truth_matrix


def evaluate_pr(model: Model, table: ClickTable, ks: tuple[int, ...] = (1, 3, 10)) -> dict[str, float]:
    """PR@k of ``model`` on a click table."""
    matched = predict_matched(model, table.queries, table.categories, truth_matrix(table), max(ks))
    return {f"pr@{k}": pr_at_k(matched, k) for k in ks}


def top1_hits(model: Model, table: ClickTable) -> np.ndarray:
    """Each query's PR@1 (1.0 when the top category is a true one, else 0.0), over the queries of
    ``table`` with a true category: the per-query outcomes paired comparisons need
    (:mod:`qcat.training.selection.decide`)."""
    matched = predict_matched(model, table.queries, table.categories, truth_matrix(table), 1)
    return matched.hits[matched.valid, 0].astype(np.float64)


def top1_lenient_hits(model: Model, table: ClickTable, leniency_of) -> np.ndarray:
    """Each query's lenient top-1 (1.0 when the top category is a true one or confusable with one),
    over the queries of ``table`` with a true category; ``leniency_of(categories)`` gives the
    :class:`~qcat.measure.leniency.Leniency` of the table's label space."""
    from qcat.measure.leniency import top1_outcomes

    matched = predict_matched(model, table.queries, table.categories, truth_matrix(table), 1)
    return top1_outcomes(matched, leniency_of(table.categories))["lenient"].astype(np.float64)
