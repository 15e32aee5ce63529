"""A BM25 inverted index over listing titles, searched in parallel with numba.

The click simulator searches with it; it is a plain lexical search: every query term's
postings add their BM25 weight to the listing's score, plus a per-listing prior.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit, prange

from qcat.rerank.bm25 import bm25_postings, push_best


@dataclass(frozen=True)
class SearchIndex:
    """A BM25 inverted index over listing titles (postings sorted by term, then listing)."""

    vocabulary: dict[str, int]
    term_ptr: np.ndarray  # int64, len(vocabulary) + 1
    term_docs: np.ndarray  # int32
    term_weights: np.ndarray  # float64: BM25 weight of the term in the listing
    doc_prior: np.ndarray  # float64: added to every matching listing's score


def build_index(doc_tokens: list[list[str]], doc_prior: np.ndarray, k1: float = 1.2, b: float = 0.75) -> SearchIndex:
    """Index normalized title tokens with BM25 weights."""
    vocabulary, ptr, docs, weights = bm25_postings(doc_tokens, k1, b)
    return SearchIndex(vocabulary, ptr, docs, weights, np.asarray(doc_prior, dtype=np.float64))


def search(index: SearchIndex, queries: list[list[str]], k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Top-``k`` listings of each tokenized query (score desc, then listing index).

    Returns ``results`` (int32, -1 where fewer match), ``matched`` (int16: how many of the
    query's distinct known terms each result's title holds) and ``n_terms`` (int16: the
    query's distinct terms, known or not).
    """
    ptr, terms, n_terms = [0], [], []
    for tokens in queries:
        distinct = list(dict.fromkeys(tokens))
        n_terms.append(len(distinct))
        terms.extend(index.vocabulary[t] for t in distinct if t in index.vocabulary)
        ptr.append(len(terms))
    results, matched = _search_kernel(np.asarray(ptr, dtype=np.int64), np.asarray(terms, dtype=np.int64),
                                      index.term_ptr, index.term_docs, index.term_weights, index.doc_prior, k)
    return results, matched, np.asarray(n_terms, dtype=np.int16)


@njit(parallel=True, cache=True)
def _search_kernel(q_ptr, q_terms, t_ptr, t_docs, t_w, prior, k):  # pragma: no cover - compiled
    n_queries = q_ptr.shape[0] - 1
    n_docs = prior.shape[0]
    results = np.full((n_queries, k), -1, dtype=np.int32)
    matched = np.zeros((n_queries, k), dtype=np.int16)
    n_chunks = min(n_queries, 64)
    for chunk in prange(n_chunks):
        score = np.zeros(n_docs)
        hits = np.zeros(n_docs, dtype=np.int16)
        touched = np.empty(n_docs, dtype=np.int32)
        best_s = np.empty(k)
        best_d = np.empty(k, dtype=np.int32)
        for q in range(chunk * n_queries // n_chunks, (chunk + 1) * n_queries // n_chunks):
            n_touched = 0
            for j in range(q_ptr[q], q_ptr[q + 1]):
                t = q_terms[j]
                for p in range(t_ptr[t], t_ptr[t + 1]):
                    d = t_docs[p]
                    if hits[d] == 0:
                        touched[n_touched] = d
                        n_touched += 1
                    hits[d] += 1
                    score[d] += t_w[p]
            n_best = 0
            for i in range(n_touched):
                d = touched[i]
                n_best = push_best(best_s, best_d, n_best, score[d] + prior[d], d)
            for i in range(n_best):
                results[q, i] = best_d[i]
                matched[q, i] = hits[best_d[i]]
            for i in range(n_touched):
                score[touched[i]] = 0.0
                hits[touched[i]] = 0
    return results, matched
