"""XReg inference (Prabhu et al., WSDM 2020 §4): label trees with relevance-weighted
logistic regressors, served with numpy and, for large batches and single queries, numba.

- Features: tf-idf over the normalized query's unigrams and bigrams
  (:func:`qcat.models.nb.query_features`), L2-normalized (:class:`TfidfFeatures`).
- The T label trees (:mod:`qcat.models.label_tree`): pointwise inference is a beam search per tree
  (all trees in one stacked search), vectorized over a batch or, from :data:`COMPILED_FROM` rows,
  compiled row by row; the trees' estimates are averaged (a tree whose beam missed a label gives 0). Labelwise
  inference (§4.4, Algorithm 1) walks one label's path in each tree.
- XReg-t (§5, propensity paper §6.2): the top ``shortlist`` labels are re-ranked by
  ``s_l = α log P_xreg + (1 − α) log P_tail`` with PfastreXML's tail classifier
  ``P_tail = 1 / (1 + exp(γ/2 ‖x − μ_l‖²))``, μ_l the mean of the label's training points;
  the reported score is ``exp(s_l)``.
"""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Sequence

import numpy as np

from qcat.bundles.bundle import Manifest, load_arrays, load_labels, load_vocabulary, save_lines, write_bundle
from qcat.errors import BundleError, InputError
from qcat.models.calibration import (
    Calibration,
    calibrated,
    calibrated_one,
    describe,
    load_calibration,
    save_calibration,
)
from qcat.models.label_tree import TREE_ARRAYS, LabelTree
from qcat.models.model import Predictions, top_k, top_k_sparse
from qcat.models.nb import normalized_tokens, query_features
from qcat.models.sparse_rows import Rows
from qcat.taxonomy import Taxonomy

BACKEND = "xreg"
ARRAYS_FILE = "xreg.npz"
VOCABULARY_FILE = "vocabulary.txt"
LABELS_FILE = "labels.txt"
BATCH = 4096
DENSE_CELLS = 1 << 22  # (queries x labels) cells summed densely at once
SINGLE_QUERY_TABLE = 1 << 14  # (groups x width) cells up to which one query scores every group at once
# Rows from which the compiled kernels search a batch (demo: 60 µs a query, numpy 300 µs), once loading
# numba (about 1 s in a new process) pays; in a process that has loaded them, every batch.
COMPILED_FROM = 2048


# -- features --------------------------------------------------------------------------


@dataclass(frozen=True)
class TfidfFeatures:
    """tf-idf of a query's unigrams and bigrams: ``count · idf``, L2-normalized per query.

    Features outside the vocabulary are ignored; a query with none is the zero vector.
    """

    vocabulary: tuple[str, ...]
    idf: np.ndarray  # float32 (D,)
    _index: dict = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_index", {feature: i for i, feature in enumerate(self.vocabulary)})

    @property
    def dimension(self) -> int:
        return len(self.vocabulary)

    def known(self, tokens: Sequence[str]) -> tuple[list[str], list[str]]:
        features = query_features(tokens)
        return [f for f in features if f in self._index], [f for f in features if f not in self._index]

    def ids(self, tokens: Sequence[str]) -> list[int]:
        """Vocabulary ids of a tokenized query's known features, in feature order."""
        return [i for i in (self._index.get(f) for f in query_features(tokens)) if i is not None]

    def transform(self, token_lists: Sequence[Sequence[str]]) -> Rows:
        ids_per_query = [self.ids(t) for t in token_lists]
        counts = np.fromiter((len(ids) for ids in ids_per_query), dtype=np.int64, count=len(ids_per_query))
        flat = np.fromiter((i for ids in ids_per_query for i in ids), dtype=np.int64, count=int(counts.sum()))
        rows = np.repeat(np.arange(len(ids_per_query), dtype=np.int64), counts)
        # Sum repeated features of a query (term counts), keep each row's features sorted.
        key, tf = np.unique(rows * max(self.dimension, 1) + flat, return_counts=True)
        rows, features = key // max(self.dimension, 1), key % max(self.dimension, 1)
        values = tf * self.idf[features].astype(np.float64)
        norms = np.sqrt(np.bincount(rows, weights=values * values, minlength=len(ids_per_query)))
        values = values / norms[rows]
        indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=len(ids_per_query)))]).astype(np.int64)
        return Rows(indptr, features.astype(np.int64), values)


# -- tail classifiers (PfastreXML) -------------------------------------------------------


@dataclass(frozen=True)
class TailClassifiers:
    """μ_l as sparse rows keyed by ``label · D + feature`` (sorted), with ‖μ_l‖²."""

    keys: np.ndarray  # int64
    values: np.ndarray  # float32
    sq_norm: np.ndarray  # float32 (L,)
    n_features: int

    def log_prob(self, rows: Rows, queries: np.ndarray, labels: np.ndarray, gamma: float) -> np.ndarray:
        """``log P_tail(l | x) = -log(1 + exp(γ/2 ‖x - μ_l‖²))`` for each (query, label) pair."""
        pair_of, values, where = rows.keyed_lookup(queries, labels, self.n_features, self.keys)
        dots = np.bincount(pair_of, weights=values * self.values[where], minlength=len(queries))
        x_sq = np.bincount(np.repeat(np.arange(rows.n), np.diff(rows.indptr)), weights=rows.data ** 2, minlength=rows.n)
        distance = np.maximum(x_sq[queries] + self.sq_norm[labels] - 2.0 * dots, 0.0)
        return -np.logaddexp(0.0, 0.5 * gamma * distance)


# -- the model -------------------------------------------------------------------------


@dataclass
class XRegModel:
    """An XReg ensemble over tf-idf features, with PfastreXML tail classifiers for XReg-t."""

    labels: tuple[str, ...]
    taxonomy: Taxonomy
    features: TfidfFeatures
    trees: tuple[LabelTree, ...]
    tail: TailClassifiers
    config: dict
    metrics: dict
    calibration: Calibration | None = None
    backend: str = BACKEND

    # -- options -------------------------------------------------------------------

    @property
    def beam(self) -> int:
        return int(self.config.get("beam", 10))

    @property
    def rerank(self) -> bool:
        return bool(self.config.get("rerank", False))

    def with_options(self, **options) -> "XRegModel":
        """A copy with some serving options (beam, rerank, alpha, gamma, shortlist) changed."""
        unknown = set(options) - {"beam", "rerank", "alpha", "gamma", "shortlist"}
        if unknown:
            raise ValueError(f"unknown XReg serving options {sorted(unknown)}")
        return replace(self, config=self.config | {k: v for k, v in options.items() if v is not None})

    # -- pointwise inference ---------------------------------------------------------

    def transform(self, queries: Sequence[str]) -> Rows:
        return self.features.transform([normalized_tokens(q) for q in queries])

    def predict(self, queries: Sequence[str], k: int) -> Predictions:
        labels = np.full((len(queries), k), -1, dtype=np.int32)
        scores = np.zeros((len(queries), k), dtype=np.float32)
        for start in range(0, len(queries), BATCH):
            part_labels, part_scores = self.predict_rows(self.transform(queries[start:start + BATCH]), k)
            labels[start:start + len(part_labels)] = part_labels
            scores[start:start + len(part_labels)] = part_scores
        source = "xreg-t" if self.rerank else "xreg"
        return calibrated(self.calibration, Predictions(labels, scores, (source,) * len(queries)), queries)

    def predict_one(self, query: str, k: int) -> Predictions:
        """``predict([query], k)`` through the compiled single-query path (:mod:`qcat.models.kernels`)."""
        from qcat.models import kernels
        ids = self.features.ids(normalized_tokens(query))
        features, values = kernels.tfidf_row(np.array(ids, dtype=np.int64), self.features.idf)
        rows = Rows(np.array([0, len(features)], dtype=np.int64), features, values)
        labels, scores = self._top_relevance_compiled(rows, int(self.config.get("shortlist", 100)) if self.rerank else k)
        if self.rerank:
            labels, scores = self._rerank(rows, labels, scores, k)
        source = "xreg-t" if self.rerank else "xreg"
        return calibrated_one(self.calibration, Predictions(labels, scores, (source,)), query)

    @functools.cached_property
    def _single_query_trees(self) -> list[tuple[int, int, tuple]]:
        """(first tree, trees, the tree arrays) for each call of the single-query kernel: the
        stacked array set once when the trees share a shape, else each tree on its own."""
        def arrays(tree: LabelTree) -> tuple:
            bias = tree.bias_table()
            group_keys = np.searchsorted(tree.keys, np.arange(len(bias) + 1, dtype=np.int64) * tree.n_features)
            if bias.size <= SINGLE_QUERY_TABLE:  # score every group at once, walking each feature's keys
                feature_keys = np.argsort(tree.keys % tree.n_features, kind="stable").astype(np.int64)
                feature_ptr = np.searchsorted(tree.keys[feature_keys] % tree.n_features,
                                              np.arange(tree.n_features + 1, dtype=np.int64))
                whole_table = True
            else:  # search each visited group's keys
                feature_keys = feature_ptr = np.zeros(0, dtype=np.int64)
                whole_table = False
            return (tree.depth, tree.n_features, tree.keys, group_keys, tree.key_ptr, tree.entry_offset,
                    tree.entry_weight, bias, tree.leaf_indptr, tree.leaf_labels, tree.leaf_width,
                    feature_ptr, feature_keys, whole_table)

        if self._stacked is not None:
            return [(0, len(self.trees), arrays(self._stacked))]
        return [(0, 1, arrays(tree)) for tree in self.trees]

    # One by one at every batch size (demo XReg: about 50 µs per query against 122-187 µs batched;
    # benchmarks/bench_single_query.py --batch-sizes): the batch path's numpy calls per tree level
    # cost more than the arithmetic.
    faster_one_by_one = True

    def uncalibrated(self) -> "XRegModel":
        return replace(self, calibration=None)

    def relevance(self, rows: Rows) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(query, label, relevance) for every label some tree's beam reached: the trees'
        estimates averaged, 0 for a tree that did not reach it."""
        query, label, prob = self._reached(rows)
        key, inverse = np.unique(query * len(self.labels) + label, return_inverse=True)
        return key // len(self.labels), key % len(self.labels), np.bincount(inverse, weights=prob)

    def _reached(self, rows: Rows) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(query, label, probability / T) of every label some tree's beam reached, tree by tree."""
        n_trees = len(self.trees)
        if self._stacked is not None:  # every tree in one beam search over the rows repeated T times
            tiled = rows.take(np.tile(np.arange(rows.n), n_trees))
            query, label, logp = self._stacked.beam_search(tiled, self.beam, np.repeat(np.arange(n_trees), rows.n))
            return query % rows.n, label, np.exp(logp) / n_trees
        found = [tree.beam_search(rows, self.beam) for tree in self.trees]
        query = np.concatenate([f[0] for f in found])
        label = np.concatenate([f[1] for f in found])
        return query, label, np.exp(np.concatenate([f[2] for f in found])) / n_trees

    @functools.cached_property
    def _stacked(self) -> LabelTree | None:
        """The trees as one (see ``LabelTree.stacked``) when there are several of one shape."""
        if len(self.trees) < 2 or len({(t.depth, t.n_features) for t in self.trees}) > 1:
            return None
        return LabelTree.stacked(self.trees)

    def top_relevance(self, rows: Rows, k: int, compiled: bool | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The k most relevant labels of each row (``-1`` / 0 where fewer were reached).

        ``compiled`` (default: from :data:`COMPILED_FROM` rows, or once the kernels are loaded): each
        row's beam search in the single-query kernel, the numpy path's numbers. Numpy: with few
        labels (at most four times what the beams reach per query) the trees' estimates are summed
        into dense ``(n, L)`` blocks ranked by :func:`qcat.models.model.top_k`; else the reached
        (query, label) pairs are sorted."""
        if compiled or (compiled is None and (rows.n >= COMPILED_FROM or "qcat.models.kernels" in sys.modules)):
            return self._top_relevance_compiled(rows, k)
        n_labels = len(self.labels)
        if self._sparse_top:
            return top_k_sparse(*self.relevance(rows), rows.n, k)
        labels = np.full((rows.n, k), -1, dtype=np.int32)
        scores = np.zeros((rows.n, k), dtype=np.float32)
        chunk = max(1, DENSE_CELLS // n_labels)
        for start in range(0, rows.n, chunk):
            part = rows.take(np.arange(start, min(start + chunk, rows.n)))
            query, label, prob = self._reached(part)
            dense = np.bincount(query * n_labels + label, weights=prob, minlength=part.n * n_labels)
            top_labels, top_scores = top_k(dense.reshape(part.n, n_labels), k)
            width = top_labels.shape[1]
            labels[start:start + part.n, :width] = np.where(top_scores > 0, top_labels, -1)
            scores[start:start + part.n, :width] = top_scores
        return labels, scores

    def _top_relevance_compiled(self, rows: Rows, k: int) -> tuple[np.ndarray, np.ndarray]:
        """``top_relevance`` by :func:`qcat.models.kernels.xreg_relevance_rows` (``predict_one``'s path too)."""
        from qcat.models import kernels
        n_labels = len(self.labels)
        labels = np.full((rows.n, k), -1, dtype=np.int32)
        scores = np.zeros((rows.n, k), dtype=np.float32)
        chunk = max(1, DENSE_CELLS // max(n_labels, 1))
        for start in range(0, rows.n, chunk):
            stop = min(start + chunk, rows.n)
            relevance, reached = np.zeros((stop - start, n_labels)), np.zeros((stop - start, n_labels), dtype=np.bool_)
            for first, n_trees, arrays in self._single_query_trees:
                kernels.xreg_relevance_rows(rows.indptr[start:stop + 1], rows.indices, rows.data, first, n_trees,
                                            len(self.trees), *arrays, self.beam, relevance, reached)
            if not self._sparse_top:  # as the dense numpy path: a label reached with relevance 0 is not returned
                reached &= relevance > 0
            kernels.top_k_rows(relevance, reached, labels[start:stop], scores[start:stop])
        return labels, scores

    @functools.cached_property
    def _sparse_top(self) -> bool:
        """Whether the top labels are found among the reached ones (many labels) rather than
        in a dense block (few: at most four times what the beams can reach per query)."""
        reachable = sum(self.beam * max(tree.leaf_width, 1) for tree in self.trees)
        return len(self.labels) > 4 * reachable

    def predict_rows(self, rows: Rows, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-k (labels, scores) of feature rows: XReg's relevance estimates, or with
        ``rerank`` XReg-t's ``exp(s_l)`` over the top ``shortlist`` labels."""
        if not self.rerank:
            return self.top_relevance(rows, k)
        return self._rerank(rows, *self.top_relevance(rows, int(self.config.get("shortlist", 100))), k)

    def _rerank(self, rows: Rows, top_labels: np.ndarray, top_scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """XReg-t: each row's shortlist re-ranked by ``α log P_xreg + (1 − α) log P_tail``."""
        query, slot = np.nonzero(top_labels >= 0)
        label = top_labels[query, slot].astype(np.int64)
        alpha = float(self.config.get("alpha", 0.8))
        tail = self.tail.log_prob(rows, query, label, float(self.config.get("gamma", 30.0)))
        combined = alpha * np.log(top_scores[query, slot].astype(np.float64)) + (1.0 - alpha) * tail
        return top_k_sparse(query, label, np.exp(combined), rows.n, k)

    # -- labelwise inference -----------------------------------------------------------

    def labelwise(self, label: str, queries: Sequence[str], n: int, factor: float = 4.0) -> list[tuple[int, float]]:
        """The ``n`` queries most relevant to category ``label`` (Algorithm 1): (position in
        ``queries``, estimated relevance), best first, ties to the earlier query."""
        if label not in self.labels:
            raise InputError(f"category {label!r} is not one of this model's {len(self.labels):,} categories")
        rows = self.transform(queries)
        return self.labelwise_rows(rows, self.labels.index(label), n, factor)

    def labelwise_rows(self, rows: Rows, label: int, n: int, factor: float) -> list[tuple[int, float]]:
        total = np.zeros(rows.n)
        for tree in self.trees:
            points, relevance = tree.labelwise(rows, label, factor)
            np.add.at(total, points, relevance / len(self.trees))
        order = np.lexsort((np.arange(rows.n), -total))
        return [(int(i), float(total[i])) for i in order[:n] if total[i] > 0]

    def explain(self, query: str, k: int) -> list[str]:
        tokens = normalized_tokens(query)
        known, unknown = self.features.known(tokens)
        mode = (f"XReg-t: top {self.config.get('shortlist', 100)} re-ranked with tail classifiers "
                f"(alpha {self.config.get('alpha', 0.8)}, gamma {self.config.get('gamma', 30.0)})") if self.rerank else "XReg"
        lines = [f"xreg: {mode}; beam search over {len(self.trees)} label tree(s) with beam {self.beam}; "
                 f"scores are estimated click-through rates (relevance) averaged over the trees"]
        if known:
            lines.append(f"  tf-idf features: {', '.join(repr(f) for f in known)}")
        else:
            lines.append("  no feature of the query is in the vocabulary: scores come from the regressors' biases")
        if unknown:
            lines.append(f"  ignored (not in the vocabulary): {', '.join(repr(f) for f in unknown)}")
        return lines + [describe(self.calibration, "xreg-t" if self.rerank else "xreg")]

    # -- persistence -------------------------------------------------------------------

    def size_bytes(self) -> int:
        arrays = [self.features.idf, self.tail.keys, self.tail.values, self.tail.sq_norm]
        arrays += [getattr(t, name) for t in self.trees for name in TREE_ARRAYS]
        return int(sum(a.nbytes for a in arrays))

    def save(self, directory: str | Path) -> Manifest:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        vocabulary_hash = save_lines(directory / VOCABULARY_FILE, list(self.features.vocabulary))
        save_lines(directory / LABELS_FILE, list(self.labels))
        arrays = {"idf": self.features.idf, "tail_keys": self.tail.keys, "tail_values": self.tail.values,
                  "tail_sq_norm": self.tail.sq_norm, "n_trees": np.array(len(self.trees))}
        for t, tree in enumerate(self.trees):
            arrays |= tree.to_arrays(f"tree{t}_")
        np.savez_compressed(directory / ARRAYS_FILE, **arrays)
        save_calibration(self.calibration, directory)
        return write_bundle(directory, BACKEND, self.taxonomy, vocabulary_hash, self.config, self.metrics)

    @classmethod
    def from_manifest(cls, manifest: Manifest, taxonomy: Taxonomy) -> "XRegModel":
        arrays = load_arrays(manifest, ARRAYS_FILE)
        vocabulary = load_vocabulary(manifest, VOCABULARY_FILE)
        labels = load_labels(manifest, LABELS_FILE, taxonomy)
        try:
            trees = tuple(LabelTree.from_arrays(arrays, f"tree{t}_") for t in range(int(arrays["n_trees"])))
            tail = TailClassifiers(arrays["tail_keys"], arrays["tail_values"], arrays["tail_sq_norm"], len(vocabulary))
            features = TfidfFeatures(tuple(vocabulary), arrays["idf"])
        except KeyError as exc:
            raise BundleError(f"model bundle {manifest.directory}: {ARRAYS_FILE} lacks array {exc}") from None
        model = cls(labels=labels, taxonomy=taxonomy, features=features, trees=trees, tail=tail,
                    config=manifest.config, metrics=manifest.metrics, calibration=load_calibration(manifest))
        model.check_shapes(manifest.directory)
        return model

    def check_shapes(self, where: Path | str) -> None:
        n_labels, n_features = len(self.labels), self.features.dimension
        problems = []
        if self.features.idf.shape != (n_features,):
            problems.append("idf length")
        if not self.trees:
            problems.append("no trees")
        for t, tree in enumerate(self.trees):
            if tree.n_features != n_features:
                problems.append(f"tree {t}: feature count")
            problems.extend(f"tree {t}: {p}" for p in tree.problems(n_labels))
        tail = self.tail
        if tail.sq_norm.shape != (n_labels,) or tail.keys.shape != tail.values.shape:
            problems.append("tail classifier lengths")
        elif len(tail.keys) and (np.any(np.diff(tail.keys) <= 0) or tail.keys[0] < 0 or tail.keys[-1] >= n_labels * n_features):
            problems.append("tail classifier keys unsorted or out of range")
        if problems:
            raise BundleError(f"model bundle {where}: inconsistent arrays ({', '.join(problems)})")
