"""Run a model over queries and line its top-k up with truth indexed by other label ids."""

from __future__ import annotations

from typing import Sequence

import numpy as np
import scipy.sparse as sp

from evaluation.metrics import Matched, pr_at_k
from qcat.model import Model


def predict_matched(model: Model, queries: Sequence[str], label_ids: Sequence[str], truth: sp.csr_matrix,
                    k: int = 10, batch: int = 4096) -> Matched:
    """The model's top ``k`` for every query, matched against ``truth`` whose columns are
    ``label_ids``. A predicted label outside ``label_ids`` gets a column of its own (never
    true), so it keeps its rank instead of vanishing."""
    index = {label: i for i, label in enumerate(label_ids)}
    to_truth = np.array([index.get(label, -1) for label in model.labels], dtype=np.int64)
    outside = np.nonzero(to_truth < 0)[0]
    to_truth[outside] = len(index) + np.arange(len(outside))
    labels, scores = [], []
    for start in range(0, len(queries), batch):
        predictions = model.predict(list(queries[start:start + batch]), k)
        labels.append(np.where(predictions.labels >= 0, to_truth[np.maximum(predictions.labels, 0)], -1))
        scores.append(predictions.scores.astype(np.float64))
    if len(outside):
        truth = sp.csr_matrix((truth.data, truth.indices, truth.indptr), shape=(truth.shape[0], len(index) + len(outside)))
    if not labels:
        return Matched.build(np.zeros((0, k), np.int64), np.zeros((0, k)), truth)
    return Matched.build(np.vstack(labels), np.vstack(scores), truth)


def evaluate_pr(model: Model, table, ks: tuple[int, ...] = (1, 3, 10)) -> dict[str, float]:
    """PR@k of ``model`` on a click table (``training.clicktable.ClickTable``)."""
    from training.dataset import truth_matrix

    matched = predict_matched(model, table.queries, table.categories, truth_matrix(table), max(ks))
    return {f"pr@{k}": pr_at_k(matched, k) for k in ks}
