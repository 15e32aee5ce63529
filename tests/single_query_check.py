"""The check that a model's compiled single-query path answers as its batch path does."""

from __future__ import annotations

import numpy as np

TOLERANCE = 1e-6


def assert_same_answers(model, queries: list[str], k: int) -> None:
    """``model.predict_one(q, k)`` against row q of ``model.predict(queries, k)``: the same source,
    scores equal to 1e-6 and the same categories, except that categories whose scores tie to
    within 1e-6 may come in either order (and a tie at the k-th place may keep either)."""
    batch = model.predict(queries, k)
    for row, query in enumerate(queries):
        one = model.predict_one(query, k)
        where = f"{model.backend} k={k} query {query!r}"
        assert one.labels.shape == (1, k) and one.scores.shape == (1, k), where
        assert one.sources == (batch.sources[row],), where
        np.testing.assert_allclose(one.scores[0], batch.scores[row], rtol=0, atol=TOLERANCE, err_msg=where)
        labels, expected, scores = one.labels[0], batch.labels[row], batch.scores[row]
        for j in np.flatnonzero(labels != expected):
            tied = np.flatnonzero(np.abs(scores - scores[j]) <= TOLERANCE)
            assert len(tied) > 1, f"{where}: rank {j} is {labels[j]}, batch says {expected[j]} (no tie)"
            if tied.max() < k - 1:  # a tie inside the row: the same categories, in some order
                assert set(labels[tied]) == set(expected[tied]), where
