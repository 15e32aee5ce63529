"""BM25 postings over tokenized titles: the one weighting that the click simulator's search
(:mod:`qcat.training.simulator.search_index`) and the re-ranker's catalog-neighbour vote
(:mod:`qcat.rerank.neighbours`) share."""

from __future__ import annotations

import numpy as np
from numba import njit


def bm25_postings(doc_tokens: list[list[str]], k1: float = 1.2,
                  b: float = 0.75) -> tuple[dict[str, int], np.ndarray, np.ndarray, np.ndarray]:
    """``(vocabulary, term_ptr, term_docs, term_weights)``: postings sorted by term, then listing;
    ``term_ptr`` (int64, one more than the vocabulary) points into ``term_docs`` (int32) and
    ``term_weights`` (float64, the term's BM25 weight in the listing)."""
    vocabulary: dict[str, int] = {}
    lengths = np.fromiter((len(t) for t in doc_tokens), dtype=np.int64, count=len(doc_tokens))
    terms = np.fromiter((vocabulary.setdefault(t, len(vocabulary)) for toks in doc_tokens for t in toks),
                        dtype=np.int64, count=int(lengths.sum()))
    n_docs = max(len(doc_tokens), 1)
    docs = np.repeat(np.arange(len(doc_tokens), dtype=np.int64), lengths)
    pair_key, tf = np.unique(terms * n_docs + docs, return_counts=True)
    pair_term, pair_doc = np.divmod(pair_key, n_docs)
    df = np.bincount(pair_term, minlength=len(vocabulary))
    idf = np.log1p((len(doc_tokens) - df + 0.5) / (df + 0.5))
    norm = k1 * (1.0 - b + b * lengths[pair_doc] / max(1.0, lengths.mean() if len(lengths) else 1.0))
    weights = idf[pair_term] * tf * (k1 + 1.0) / (tf + norm)
    ptr = np.searchsorted(pair_term, np.arange(len(vocabulary) + 1)).astype(np.int64)
    return vocabulary, ptr, pair_doc.astype(np.int32), weights


@njit(cache=True, nogil=True)
def push_best(best_s, best_d, size, s, d):
    """Keep ``best_s``/``best_d`` (capacity ``len(best_s)``, ``size`` filled) the best listings so far,
    by score, ties to the lower listing, after offering listing ``d`` with score ``s``; returns the
    new size. Both BM25 searches rank their results with it."""
    n = best_s.shape[0]
    if size < n:
        pos = size
        size += 1
    elif s > best_s[n - 1] or (s == best_s[n - 1] and d < best_d[n - 1]):
        pos = n - 1
    else:
        return size
    while pos > 0 and (s > best_s[pos - 1] or (s == best_s[pos - 1] and d < best_d[pos - 1])):
        best_s[pos] = best_s[pos - 1]
        best_d[pos] = best_d[pos - 1]
        pos -= 1
    best_s[pos] = s
    best_d[pos] = d
    return size
