"""Fitting XReg's tf-idf features on the training queries (the transform lives in
:class:`qcat.models.xreg.TfidfFeatures`, shared with serving)."""

from __future__ import annotations

import itertools
from typing import Sequence

import numpy as np
import scipy.sparse as sp

from qcat.models.nb import query_features
from qcat.models.sparse_rows import Rows
from qcat.models.xreg import TfidfFeatures


def fit_tfidf(queries: Sequence[str]) -> TfidfFeatures:
    """Vocabulary: every unigram and bigram of the (normalized) training queries, sorted;
    ``idf = ln((1 + N) / (1 + df)) + 1`` (smoothed, as scikit-learn's default)."""
    per_query = [set(query_features(q.split(" "))) for q in queries]
    vocabulary, df = np.unique(np.fromiter(itertools.chain.from_iterable(per_query), dtype=object), return_counts=True)
    idf = np.log((1.0 + len(per_query)) / (1.0 + df)) + 1.0
    return TfidfFeatures(tuple(vocabulary.tolist()), idf.astype(np.float32))


def to_csr(rows: Rows, n_features: int) -> sp.csr_matrix:
    return sp.csr_matrix((rows.data, rows.indices, rows.indptr), shape=(rows.n, n_features))


def from_csr(matrix: sp.csr_matrix) -> Rows:
    matrix = sp.csr_matrix(matrix)
    matrix.sort_indices()
    return Rows(matrix.indptr.astype(np.int64), matrix.indices.astype(np.int64), matrix.data.astype(np.float64))


def featurize(features: TfidfFeatures, queries: Sequence[str]) -> sp.csr_matrix:
    """tf-idf rows of normalized queries (as a click table holds them)."""
    return to_csr(features.transform([q.split(" ") for q in queries]), features.dimension)
