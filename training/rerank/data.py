"""What the re-ranker trains on: its neighbour index, the label priors, and the (query,
candidate) examples of a query set, grouped by query, with the folds they are cross-fitted in.

The neighbour index covers only the catalog listings the first stage's training data came
from: for a corpus with held-out listings (the demo), the listings held out for the real-text
sets are left out, so no real-title query finds its own listing.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np

from qcat.errors import InputError
from qcat.rerank.model import RerankModel
from qcat.rerank.neighbours import NeighbourIndex, build_neighbour_index
from qcat.text.normalize import tokenize
from qcat.training.clicklogs.clicktable import ClickTable
from qcat.training.data.listings import Catalog


def neighbour_index(catalog: Catalog, keep: np.ndarray, labels: tuple[str, ...], taxonomy) -> tuple[NeighbourIndex, dict]:
    """The BM25 index over the titles of the listings where ``keep``; a listing's category is its
    position in ``labels`` (-1 when the model does not answer it). Returns the index and counts."""
    position = {label: i for i, label in enumerate(labels)}
    rows = np.flatnonzero(keep)
    tokens, doc_label = [], []
    for row in rows.tolist():
        title = tokenize(catalog.title[row])
        if not title:
            continue
        tokens.append(title)
        doc_label.append(position.get(taxonomy.id_of_path(catalog.category_path[row]), -1))
    if not tokens:
        raise InputError("the catalog leaves no listing with a title to index for the re-ranker's neighbour vote")
    doc_label = np.asarray(doc_label, dtype=np.int32)
    counts = {"listings": len(tokens), "held_out_left_out": int((~keep).sum()),
              "listings_of_unanswered_categories": int((doc_label < 0).sum())}
    return build_neighbour_index(tokens, doc_label), counts


def label_prior(train: ClickTable, labels: tuple[str, ...]) -> np.ndarray:
    """Each label's share of the training clicks (0 for a label without any)."""
    clicks = np.bincount(train.pair_category, weights=train.clicks, minlength=len(train.categories))
    by_id = dict(zip(train.categories.tolist(), clicks.tolist()))
    prior = np.array([by_id.get(label, 0.0) for label in labels])
    return prior / max(prior.sum(), 1e-300)


def fold_of(queries, n_folds: int) -> np.ndarray:
    """The cross-fitting fold of each query: a hash of its first two tokens, so a title and its
    two-token prefix (real-title and real-2tok of one listing), and a query and its longer
    forms, always share a fold."""
    return np.fromiter((zlib.crc32(" ".join(q.split()[:2]).encode("utf-8")) % n_folds for q in queries),
                       dtype=np.int64, count=len(queries))


@dataclass(frozen=True)
class Examples:
    """The candidates of a query set: rows of features, grouped by query (``ptr``)."""

    name: str
    queries: np.ndarray  # str per query
    ptr: np.ndarray  # int64, len(queries) + 1: query i's rows are ptr[i]:ptr[i + 1]
    candidates: np.ndarray  # int64 label position per row
    rows: np.ndarray  # float64 (n_rows, n_features)
    relevant: np.ndarray  # float64 per row: 1 when the candidate is one of the query's categories
    first_rank: np.ndarray  # the first stage's rank per row (depth + 1: not in its top)

    @property
    def reachable(self) -> np.ndarray:
        """Per query: whether any candidate is relevant (else no ranking can get it right)."""
        return np.add.reduceat(self.relevant, self.ptr[:-1]) > 0 if len(self.relevant) else np.zeros(0, bool)

    def top1_hit(self, score: np.ndarray) -> np.ndarray:
        """Per query, whether the candidate ranked first by ``score`` (ties: the first stage's
        rank, then the label) is relevant: PR@1 of the re-ranked answer, query by query."""
        hits = np.zeros(len(self.queries))
        for i in range(len(self.queries)):
            lo, hi = self.ptr[i], self.ptr[i + 1]
            if hi > lo:
                best = np.lexsort((self.candidates[lo:hi], self.first_rank[lo:hi], -score[lo:hi]))[0]
                hits[i] = self.relevant[lo + best]
        return hits

    def topk_pr(self, score: np.ndarray, truth_sizes: np.ndarray, k: int) -> np.ndarray:
        """Per query, PR@k of the ranking by ``score``: hits in the top k / min(k, |Y|)."""
        out = np.zeros(len(self.queries))
        for i in range(len(self.queries)):
            lo, hi = self.ptr[i], self.ptr[i + 1]
            if hi > lo:
                order = np.lexsort((self.candidates[lo:hi], self.first_rank[lo:hi], -score[lo:hi]))[:k]
                out[i] = self.relevant[lo + order].sum() / min(k, max(truth_sizes[i], 1))
        return out


def build_examples(model: RerankModel, table: ClickTable, name: str, batch: int = 4096) -> Examples:
    """Every query of ``table`` with its candidates, their features and which are relevant."""
    position = {label: i for i, label in enumerate(model.labels)}
    truth: list[set[int]] = [set() for _ in range(len(table.queries))]
    for q, c in zip(table.pair_query.tolist(), table.pair_category.tolist()):
        if table.categories[c] in position:
            truth[q].add(position[table.categories[c]])
    queries = [str(q) for q in table.queries]
    ptr, candidates, rows, relevant = [0], [], [], []
    for start in range(0, len(queries), batch):
        chunk = queries[start:start + batch]
        for offset, (query, answers) in enumerate(zip(chunk, model.answer_batch(chunk))):
            found, features = model.query_rows(query, answers)
            ptr.append(ptr[-1] + len(found))
            candidates.append(found)
            rows.append(features)
            relevant.append(np.fromiter((c in truth[start + offset] for c in found.tolist()), dtype=np.float64,
                                        count=len(found)))
    rows_all = np.concatenate(rows) if rows else np.zeros((0, 0))
    return Examples(name, np.asarray(queries, dtype=object), np.asarray(ptr, dtype=np.int64),
                    np.concatenate(candidates), rows_all, np.concatenate(relevant), rows_all[:, 1].copy())


def truth_sizes(table: ClickTable) -> np.ndarray:
    return np.bincount(table.pair_query, minlength=len(table.queries))
