"""Generated extreme-regression problems for tests and the scale benchmark.

Labels have Zipfian popularity and belong to topics; each label has a prototype of a few
features from its topic's block of features. A point takes one to three labels (by
popularity), draws features from their prototypes plus one noise feature, and gets
relevances in (0, 1]: the first label is the most relevant.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from qcat.training.xreg.tree import normalize_rows


def generate(n_points: int, n_labels: int, n_features: int, seed: int = 0, prototype: int = 8,
             topics: int | None = None) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """(features ``(N, D)`` with unit rows, relevance ``(N, L)`` in (0, 1])."""
    rng = np.random.default_rng(seed)
    topics = topics or max(1, n_labels // 50)
    popularity = 1.0 / (np.arange(n_labels) + 10.0) ** 0.9
    popularity /= popularity.sum()
    block = max(prototype, n_features // topics)
    topic = rng.integers(0, topics, size=n_labels)
    prototypes = (topic[:, None] * block + rng.integers(0, block, size=(n_labels, prototype))) % n_features
    per_point = rng.choice([1, 2, 3], size=n_points, p=[0.6, 0.3, 0.1])
    point = np.repeat(np.arange(n_points), per_point)
    label = rng.choice(n_labels, size=len(point), p=popularity)
    first = np.r_[True, point[1:] != point[:-1]]
    relevance = np.where(first, rng.uniform(0.5, 1.0, len(point)), rng.uniform(0.05, 0.6, len(point)))
    Y = sp.csr_matrix((relevance, (point, label)), shape=(n_points, n_labels))
    Y.data = np.minimum(Y.data, 1.0)  # a label drawn twice for a point
    draws = 4
    feature_point = np.repeat(point, draws)
    feature = prototypes[np.repeat(label, draws), rng.integers(0, prototype, size=len(point) * draws)]
    noise_point = np.arange(n_points)
    noise = rng.integers(0, n_features, size=n_points)
    X = sp.csr_matrix((np.ones(len(feature_point) + n_points), (np.r_[feature_point, noise_point], np.r_[feature, noise])),
                      shape=(n_points, n_features))
    X.sum_duplicates()
    X.data = np.sqrt(X.data)  # damp repeated features a little
    X = normalize_rows(X)
    X.sort_indices()
    Y.sort_indices()
    return X, Y
