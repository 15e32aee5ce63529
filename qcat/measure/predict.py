"""Run a model over queries and line its top-k up with truth indexed by other label ids."""

from __future__ import annotations

from typing import Sequence

import numpy as np
import scipy.sparse as sp

from qcat.measure.metrics import Matched
from qcat.models.model import Model


def match_to_truth(labels: np.ndarray, scores: np.ndarray, model_labels: Sequence[str], label_ids: Sequence[str],
                   truth: sp.csr_matrix) -> Matched:
    """Top-k ``labels`` (positions in ``model_labels``, -1 padded) matched against ``truth``
    whose columns are ``label_ids``. A predicted label outside ``label_ids`` gets a column of
    its own (never true), so it keeps its rank instead of vanishing."""
    index = {label: i for i, label in enumerate(label_ids)}
    to_truth = np.array([index.get(label, -1) for label in model_labels], dtype=np.int64)
    outside = np.nonzero(to_truth < 0)[0]
    to_truth[outside] = len(index) + np.arange(len(outside))
    if len(outside):
        truth = sp.csr_matrix((truth.data, truth.indices, truth.indptr), shape=(truth.shape[0], len(index) + len(outside)))
    mapped = np.where(labels >= 0, to_truth[np.maximum(labels, 0)], -1) if len(to_truth) else labels
    return Matched.build(mapped, scores.astype(np.float64), truth)


def predict_matched(model: Model, queries: Sequence[str], label_ids: Sequence[str], truth: sp.csr_matrix,
                    k: int = 10, batch: int = 4096) -> Matched:
    """The model's top ``k`` for every query, matched against ``truth`` (see
    :func:`match_to_truth`)."""
    labels, scores = [np.zeros((0, k), np.int64)], [np.zeros((0, k))]
    for start in range(0, len(queries), batch):
        predictions = model.predict(list(queries[start:start + batch]), k)
        labels.append(predictions.labels)
        scores.append(predictions.scores)
    return match_to_truth(np.vstack(labels), np.vstack(scores), model.labels, label_ids, truth)
