"""XReg label trees (§4.1): relevance-weighted label vectors split by balanced spherical
2-means, recursively, into a complete binary tree whose leaves hold at most M labels."""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp


def normalize_rows(matrix: sp.csr_matrix) -> sp.csr_matrix:
    matrix = sp.csr_matrix(matrix, dtype=np.float64, copy=True)
    norms = np.sqrt(np.asarray(matrix.multiply(matrix).sum(axis=1)).ravel())
    scale = np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0)
    return sp.csr_matrix(sp.diags(scale) @ matrix)


def label_vectors(features: sp.csr_matrix, relevance: sp.csr_matrix) -> sp.csr_matrix:
    """``v_l = v'_l / ‖v'_l‖`` with ``v'_l = Σ_i y_il x_i`` (eq. 3): ``(labels, features)``."""
    return normalize_rows((relevance.T.tocsr() @ features).tocsr())


def tree_depth(n_labels: int, leaf_size: int) -> int:
    """The smallest depth whose balanced leaves hold at most ``leaf_size`` labels."""
    if leaf_size < 1:
        raise ValueError(f"the leaf size must be at least 1, got {leaf_size}")
    depth = 0
    while math.ceil(n_labels / 2 ** depth) > leaf_size:
        depth += 1
    return depth


def balanced_2means(vectors: sp.csr_matrix, rng: np.random.Generator, tolerance: float = 1e-4,
                    max_iterations: int = 50) -> np.ndarray:
    """Split unit rows into two halves (sizes ⌈n/2⌉, ⌊n/2⌋) maximizing the mean cosine to
    their half's centroid (Parabel's balanced spherical 2-means): a bool per row, True for
    the second half."""
    n = vectors.shape[0]
    second = np.arange(n) >= (n + 1) // 2
    if n < 2:
        return second
    # Work in the columns these rows use.
    columns, local = np.unique(vectors.indices, return_inverse=True)
    vectors = sp.csr_matrix((vectors.data, local.ravel(), vectors.indptr), shape=(n, max(len(columns), 1)))
    first, other = rng.choice(n, size=2, replace=False)
    centers = np.vstack([vectors[first].toarray(), vectors[other].toarray()])
    previous = -np.inf
    for _ in range(max_iterations):
        similarity = vectors @ centers.T  # (n, 2)
        order = np.argsort(similarity[:, 1] - similarity[:, 0], kind="stable")
        second = np.zeros(n, dtype=bool)
        second[order[(n + 1) // 2:]] = True
        objective = float(np.where(second, similarity[:, 1], similarity[:, 0]).mean())
        if objective - previous < tolerance:
            break
        previous = objective
        for j, rows in enumerate((~second, second)):
            center = np.asarray(vectors[rows].sum(axis=0)).ravel()
            norm = np.linalg.norm(center)
            centers[j] = center / norm if norm > 0 else center
    return second


def build_tree(vectors: sp.csr_matrix, leaf_size: int, seed: int) -> list[np.ndarray]:
    """Label ids of each leaf, in heap order, of a complete binary tree of depth
    :func:`tree_depth`: every node's labels split by :func:`balanced_2means`."""
    rng = np.random.default_rng(seed)
    depth = tree_depth(vectors.shape[0], leaf_size)
    level = [np.arange(vectors.shape[0])]
    for _ in range(depth):
        children = []
        for labels in level:
            second = balanced_2means(vectors[labels], rng)
            children.extend([labels[~second], labels[second]])
        level = children
    return level
