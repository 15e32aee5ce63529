"""The catalog-neighbour vote of the re-ranker: a BM25 index over the titles of the catalog
listings a bundle was trained with, shipped in the bundle as arrays and searched by a numba
kernel.

For a query, the ``n`` listings whose titles score highest (BM25, ties to the lower listing)
vote for their categories: :func:`vote` turns them into, per category, the share of the
neighbours in it, its share of their BM25 score, its best neighbour's score over the best
overall, and the rank of its first neighbour. The index is built at training time
(``qcat.training.rerank.data``); serving needs numpy and numba only.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
from numba import njit

from qcat.bundles.bundle import Manifest, load_arrays, load_lines, save_lines
from qcat.errors import BundleError
from qcat.rerank.bm25 import bm25_postings, push_best

ARRAYS_FILE = "neighbours.npz"
VOCABULARY_FILE = "neighbours_vocabulary.txt"


@dataclass(frozen=True)
class NeighbourIndex:
    """BM25 postings (sorted by term, then listing) and each listing's category (a position in
    the model's labels, -1 for a category the model does not answer)."""

    vocabulary: dict[str, int]
    term_ptr: np.ndarray  # int64, len(vocabulary) + 1
    term_docs: np.ndarray  # int32
    term_weights: np.ndarray  # float32: BM25 weight of the term in the listing
    doc_label: np.ndarray  # int32 per listing

    @property
    def n_docs(self) -> int:
        return len(self.doc_label)

    def term_ids(self, tokens: Sequence[str]) -> np.ndarray:
        """The query's distinct known terms, as term ids (in first-seen order)."""
        return np.fromiter((self.vocabulary[t] for t in dict.fromkeys(tokens) if t in self.vocabulary), dtype=np.int64)

    def search(self, tokens: Sequence[str], n: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``n`` best listings of one tokenized query and their BM25 scores, best first."""
        return search_one(self.term_ids(tokens), self.term_ptr, self.term_docs, self.term_weights, self.n_docs, n)

    def save(self, directory: Path) -> str:
        """Write the index's files into a bundle directory; returns its vocabulary's hash."""
        words = sorted(self.vocabulary, key=self.vocabulary.__getitem__)
        np.savez_compressed(directory / ARRAYS_FILE, term_ptr=self.term_ptr, term_docs=self.term_docs,
                            term_weights=self.term_weights, doc_label=self.doc_label)
        return save_lines(directory / VOCABULARY_FILE, words)

    @classmethod
    def load(cls, manifest: Manifest, n_labels: int) -> "NeighbourIndex":
        where = f"model bundle {manifest.directory}: {ARRAYS_FILE}"
        arrays = load_arrays(manifest, ARRAYS_FILE)
        words = load_lines(manifest, VOCABULARY_FILE)
        try:
            index = cls({w: i for i, w in enumerate(words)}, arrays["term_ptr"].astype(np.int64),
                        arrays["term_docs"].astype(np.int32), arrays["term_weights"].astype(np.float32),
                        arrays["doc_label"].astype(np.int32))
        except KeyError as exc:
            raise BundleError(f"{where} lacks the array {exc}") from None
        ptr, docs = index.term_ptr, index.term_docs
        if (len(ptr) != len(words) + 1 or ptr[0] != 0 or ptr[-1] != len(docs) or np.any(np.diff(ptr) < 0)
                or len(index.term_weights) != len(docs) or (len(docs) and not 0 <= docs.min() <= docs.max() < index.n_docs)
                or (index.n_docs and not -1 <= index.doc_label.min() <= index.doc_label.max() < n_labels)):
            raise BundleError(f"{where}: postings, weights, listings and vocabulary do not fit together")
        return index


def build_neighbour_index(doc_tokens: list[list[str]], doc_label: np.ndarray, k1: float = 1.2,
                          b: float = 0.75) -> NeighbourIndex:
    """A BM25 index over tokenized titles (:func:`qcat.rerank.bm25.bm25_postings`)."""
    vocabulary, ptr, docs, weights = bm25_postings(doc_tokens, k1, b)
    return NeighbourIndex(vocabulary, ptr, docs, weights.astype(np.float32), np.asarray(doc_label, dtype=np.int32))


@njit(cache=True, nogil=True)
def search_one(terms, term_ptr, term_docs, term_weights, n_docs, n):
    """Top-``n`` listings of one query (term ids) by summed BM25 weight, ties to the lower listing."""
    score = np.zeros(n_docs)
    count = 0
    for j in range(terms.shape[0]):
        count += term_ptr[terms[j] + 1] - term_ptr[terms[j]]
    touched = np.empty(count, np.int64)
    n_touched = 0
    for j in range(terms.shape[0]):
        t = terms[j]
        for p in range(term_ptr[t], term_ptr[t + 1]):
            d = term_docs[p]
            if score[d] == 0.0:
                touched[n_touched] = d
                n_touched += 1
            score[d] += np.float64(term_weights[p])
    best_d = np.empty(n, np.int64)
    best_s = np.empty(n)
    size = 0
    for i in range(n_touched):
        size = push_best(best_s, best_d, size, score[touched[i]], touched[i])
    return best_d[:size], best_s[:size]


def vote(doc_label: np.ndarray, docs: np.ndarray, scores: np.ndarray, n: int) -> dict[int, tuple[float, float, float, int]]:
    """Per category among the neighbours (label -1 left out): (share of the ``n`` neighbour slots,
    share of the neighbours' summed score, best score over the top neighbour's, first rank from 1)."""
    total = float(scores.sum()) if len(scores) else 0.0
    top = float(scores[0]) if len(scores) else 0.0
    out: dict[int, list] = {}
    for rank, (doc, score) in enumerate(zip(docs.tolist(), scores.tolist()), start=1):
        label = int(doc_label[doc])
        if label < 0:
            continue
        entry = out.get(label)
        if entry is None:
            out[label] = [1.0 / n, score / total if total > 0 else 0.0, score / top if top > 0 else 0.0, rank]
        else:
            entry[0] += 1.0 / n
            entry[1] += score / total if total > 0 else 0.0
    return {label: tuple(entry) for label, entry in out.items()}
