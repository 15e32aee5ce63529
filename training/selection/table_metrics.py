"""PR@k of a model on a click table: what training tunes on (:mod:`qcat.training.selection.objective`) and
stores as a bundle's metrics."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from qcat.measure.metrics import pr_at_k
from qcat.measure.predict import predict_matched
from qcat.models.model import Model
from qcat.taxonomy import Taxonomy
from qcat.taxonomy.confusable import ConfusableMap
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


def top1_lenient_hits(model: Model, table: ClickTable, taxonomy: Taxonomy, confusable: ConfusableMap) -> np.ndarray:
    """Each query's lenient top-1 (1.0 when the top category is a true one or ``confusable`` pairs it
    with one), over the queries of ``table`` with a true category. The truth spans
    :func:`label_space`, so an answer that no query of the table has as its gold still has its pairs."""
    from qcat.measure.leniency import Leniency, top1_outcomes

    labels = label_space(taxonomy, table.categories)
    truth = truth_over(table, {label: i for i, label in enumerate(labels)})
    matched = predict_matched(model, table.queries, labels, truth, 1)
    return top1_outcomes(matched, Leniency.build(labels, taxonomy, confusable))["lenient"].astype(np.float64)


def label_space(taxonomy: Taxonomy, categories) -> np.ndarray:
    """The taxonomy's leaves, then any other of ``categories`` (a click table's), as truth columns:
    every category a model can answer has a column, whether or not some query has it as its gold."""
    leaves = list(taxonomy.leaves)
    extra = sorted(set(categories) - set(leaves))
    return np.array(leaves + extra, dtype=object)


def truth_over(table: ClickTable, label_index: dict[str, int]) -> sp.csr_matrix:
    """``table``'s clicks as a ``(queries, labels)`` matrix whose columns are ``label_index``'s."""
    columns = np.array([label_index[c] for c in table.categories], dtype=np.int64)
    return sp.csr_matrix((table.clicks, (table.pair_query, columns[table.pair_category])),
                         shape=(len(table.queries), len(label_index)))
