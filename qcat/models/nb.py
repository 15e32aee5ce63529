"""Naive Bayes backend at serving time (eBay §3.2).

Two parts, tried in order:

1. the full-query lookup table: a query seen in the click log returns its categories
   with probabilities proportional to their clicks;
2. a multinomial Naive Bayes over the query's unigrams and bigrams, whose counts are
   category clicks: ``log P(c | q) = log P(c) + sum_t log P(t | c) + const`` with
   ``P(t | c) = (n_tc + alpha) / (N_c + alpha * |V|)``. Features not in the vocabulary
   are ignored; a query with no known feature gets the prior.

Raw scores are probabilities over every category: a lookup hit's click shares of all its
clicks, NB's posterior over all categories; so a category's score does not depend on how many
are returned. A bundle fitted with a calibration (:mod:`qcat.models.calibration`) maps them to the
probability that the category is right, per part (``lookup``, ``nb``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Sequence

import numpy as np

from qcat.bundles.bundle import (
    Manifest,
    load_arrays,
    load_labels,
    load_lines,
    load_vocabulary,
    save_lines,
    write_bundle,
)
from qcat.errors import BundleError, EmptyQueryError
from qcat.models.calibration import (
    Calibration,
    calibrated,
    calibrated_one,
    describe,
    load_calibration,
    save_calibration,
)
from qcat.models.model import Predictions, top_k
from qcat.models.sparse_rows import ranges
from qcat.taxonomy import Taxonomy
from qcat.text.normalize import tokenize

BACKEND = "nb"
ARRAYS_FILE = "nb.npz"
VOCABULARY_FILE = "vocabulary.txt"
LOOKUP_FILE = "lookup_queries.txt"
LABELS_FILE = "labels.txt"
BATCH = 4096


def query_features(tokens: Sequence[str]) -> list[str]:
    """Unigrams and bigrams of a tokenized query (a bigram is ``"a b"``)."""
    return list(tokens) + [f"{a} {b}" for a, b in zip(tokens, tokens[1:])]


def normalized_tokens(query: str) -> list[str]:
    tokens = tokenize(query)
    if not tokens:
        raise EmptyQueryError(f"query {query!r} is empty after normalization")
    return tokens


def log_normalizer(log_scores: np.ndarray) -> np.ndarray:
    """Row-wise log-sum-exp, ``(n, 1)``: subtracting it turns log scores into log probabilities."""
    top = np.max(log_scores, axis=1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    return top + np.log(np.exp(log_scores - top).sum(axis=1, keepdims=True))


@dataclass
class NaiveBayesModel:
    """A trained NB model: arrays in CSR form, ``labels`` are taxonomy ids."""

    labels: tuple[str, ...]
    taxonomy: Taxonomy
    vocabulary: tuple[str, ...]
    feature_indptr: np.ndarray  # int64 (|V|+1,)
    feature_labels: np.ndarray  # int32
    feature_delta: np.ndarray  # float32: log(1 + n_tc / alpha)
    label_log_prior: np.ndarray  # float32 (C,)
    label_unseen: np.ndarray  # float32 (C,): log(alpha / (N_c + alpha |V|))
    lookup_queries: tuple[str, ...]  # normalized, sorted
    lookup_indptr: np.ndarray  # int64
    lookup_labels: np.ndarray  # int32
    lookup_clicks: np.ndarray  # float32
    config: dict
    metrics: dict
    calibration: Calibration | None = None
    backend: str = BACKEND

    def __post_init__(self) -> None:
        self._feature_index = {feature: i for i, feature in enumerate(self.vocabulary)}
        self._lookup_index = {query: i for i, query in enumerate(self.lookup_queries)}
        self._all_labels = np.ones(len(self.labels), dtype=np.bool_)  # the single-query top-k's mask

    # -- inference -----------------------------------------------------------------

    def predict(self, queries: Sequence[str], k: int) -> Predictions:
        labels = np.full((len(queries), k), -1, dtype=np.int32)
        scores = np.zeros((len(queries), k), dtype=np.float32)
        sources: list[str] = []
        token_lists = [normalized_tokens(q) for q in queries]
        nb_rows: list[int] = []
        for row, tokens in enumerate(token_lists):
            hit = self._lookup_index.get(" ".join(tokens))
            if hit is None:
                nb_rows.append(row)
                sources.append("nb")
                continue
            sources.append("lookup")
            self._lookup_row(hit, k, labels[row], scores[row])
        for begin in range(0, len(nb_rows), BATCH):
            rows = nb_rows[begin : begin + BATCH]
            log_scores = self.log_scores([token_lists[r] for r in rows]).astype(np.float64)
            top_labels, top_log = top_k(log_scores, k)
            n = top_labels.shape[1]
            labels[rows, :n] = top_labels
            scores[rows, :n] = np.exp(top_log - log_normalizer(log_scores))
        return calibrated(self.calibration, Predictions(labels, scores, tuple(sources)), queries)

    def predict_one(self, query: str, k: int) -> Predictions:
        """``predict([query], k)`` through the compiled single-query path (:mod:`qcat.models.kernels`)."""
        from qcat.models import kernels
        tokens = normalized_tokens(query)
        labels = np.full((1, k), -1, dtype=np.int32)
        scores = np.zeros((1, k), dtype=np.float32)
        hit = self._lookup_index.get(" ".join(tokens))
        if hit is not None:
            source = "lookup"
            self._lookup_row(hit, k, labels[0], scores[0])
        else:
            source = "nb"
            log_scores = kernels.nb_log_scores(np.array(self.feature_ids(tokens), dtype=np.int64), self.feature_indptr,
                                               self.feature_labels, self.feature_delta, self.label_log_prior,
                                               self.label_unseen)
            top_labels, top_log = kernels.top_k(log_scores, k, self._all_labels)
            labels[0, :len(top_labels)] = top_labels
            scores[0, :len(top_labels)] = np.exp(top_log - kernels.log_normalizer(log_scores))
        return calibrated_one(self.calibration, Predictions(labels, scores, (source,)), query)

    def _lookup_row(self, hit: int, k: int, labels: np.ndarray, scores: np.ndarray) -> None:
        """A lookup-table hit's top-k: its categories by clicks, scored by click share."""
        start, end = self.lookup_indptr[hit], self.lookup_indptr[hit + 1]
        n = min(k, end - start)  # rows are stored by clicks, descending
        clicks = self.lookup_clicks[start:end]
        labels[:n] = self.lookup_labels[start : start + n]
        scores[:n] = clicks[:n] / clicks.sum()

    # The batch path wins from some tens of queries on (demo NB: 17 µs per query in batches of 100,
    # 19 one by one; benchmarks/bench_single_query.py --batch-sizes): one bincount over the batch
    # is cheaper than a kernel call per query.
    faster_one_by_one = False

    def uncalibrated(self) -> "NaiveBayesModel":
        return replace(self, calibration=None)

    def feature_ids(self, tokens: Sequence[str]) -> list[int]:
        return [i for i in (self._feature_index.get(f) for f in query_features(tokens)) if i is not None]

    def log_scores(self, token_lists: Sequence[Sequence[str]]) -> np.ndarray:
        """Unnormalized log P(c | q) for every label, one row per tokenized query."""
        n_labels = len(self.labels)
        ids_per_query = [self.feature_ids(tokens) for tokens in token_lists]
        counts = np.fromiter((len(ids) for ids in ids_per_query), dtype=np.int64, count=len(ids_per_query))
        out = self.label_log_prior[None, :] + counts[:, None] * self.label_unseen[None, :]
        feature_ids = np.fromiter((i for ids in ids_per_query for i in ids), dtype=np.int64, count=int(counts.sum()))
        if len(feature_ids):
            query_of_feature = np.repeat(np.arange(len(ids_per_query)), counts)
            starts = self.feature_indptr[feature_ids]
            lengths = self.feature_indptr[feature_ids + 1] - starts
            entries = ranges(starts, lengths)  # every (feature, label) entry the batch touches
            cells = np.repeat(query_of_feature, lengths) * n_labels + self.feature_labels[entries]
            out = out + np.bincount(cells, weights=self.feature_delta[entries], minlength=out.size).reshape(out.shape)
        return out

    def explain(self, query: str, k: int) -> list[str]:
        tokens = normalized_tokens(query)
        normalized = " ".join(tokens)
        if normalized in self._lookup_index:
            i = self._lookup_index[normalized]
            total = float(self.lookup_clicks[self.lookup_indptr[i] : self.lookup_indptr[i + 1]].sum())
            return [f"nb: {normalized!r} is in the full-query lookup table ({total:g} clicks); raw scores are click shares",
                    describe(self.calibration, "lookup")]
        features = query_features(tokens)
        known = [f for f in features if f in self._feature_index]
        unknown = [f for f in features if f not in self._feature_index]
        lines = [f"nb: {normalized!r} is not in the lookup table; multinomial NB over unigrams and bigrams"]
        if not known:
            lines.append("  no feature of the query is in the vocabulary: scores are the category prior")
        else:
            lines.append(f"  known features: {', '.join(repr(f) for f in known)}")
        if unknown:
            lines.append(f"  ignored (not in the vocabulary): {', '.join(repr(f) for f in unknown)}")
        return lines + [describe(self.calibration, "nb")]

    # -- persistence ---------------------------------------------------------------

    def save(self, directory: str | Path) -> Manifest:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        vocabulary_hash = save_lines(directory / VOCABULARY_FILE, list(self.vocabulary))
        save_lines(directory / LOOKUP_FILE, list(self.lookup_queries))
        save_lines(directory / LABELS_FILE, list(self.labels))
        save_calibration(self.calibration, directory)
        np.savez_compressed(
            directory / ARRAYS_FILE,
            feature_indptr=self.feature_indptr,
            feature_labels=self.feature_labels,
            feature_delta=self.feature_delta,
            label_log_prior=self.label_log_prior,
            label_unseen=self.label_unseen,
            lookup_indptr=self.lookup_indptr,
            lookup_labels=self.lookup_labels,
            lookup_clicks=self.lookup_clicks,
        )
        return write_bundle(directory, BACKEND, self.taxonomy, vocabulary_hash, self.config, self.metrics)

    @classmethod
    def from_manifest(cls, manifest: Manifest, taxonomy: Taxonomy) -> "NaiveBayesModel":
        arrays = load_arrays(manifest, ARRAYS_FILE)
        vocabulary = load_vocabulary(manifest, VOCABULARY_FILE)
        labels = load_labels(manifest, LABELS_FILE, taxonomy)
        try:
            model = cls(
                labels=labels,
                taxonomy=taxonomy,
                vocabulary=tuple(vocabulary),
                lookup_queries=tuple(load_lines(manifest, LOOKUP_FILE)),
                config=manifest.config,
                metrics=manifest.metrics,
                calibration=load_calibration(manifest),
                **{name: arrays[name] for name in (
                    "feature_indptr", "feature_labels", "feature_delta", "label_log_prior",
                    "label_unseen", "lookup_indptr", "lookup_labels", "lookup_clicks")},
            )
        except KeyError as exc:
            raise BundleError(f"model bundle {manifest.directory}: {ARRAYS_FILE} lacks array {exc}") from None
        model.check_shapes(manifest.directory)
        return model

    def check_shapes(self, where: Path | str) -> None:
        n_labels, n_features, n_lookup = len(self.labels), len(self.vocabulary), len(self.lookup_queries)
        problems = []
        if len(self.feature_indptr) != n_features + 1 or len(self.lookup_indptr) != n_lookup + 1:
            problems.append("index pointer lengths")
        if self.label_log_prior.shape != (n_labels,) or self.label_unseen.shape != (n_labels,):
            problems.append("label array lengths")
        for name, ids in (("feature_labels", self.feature_labels), ("lookup_labels", self.lookup_labels)):
            if len(ids) and (ids.min() < 0 or ids.max() >= n_labels):
                problems.append(f"{name} out of range")
        if problems:
            raise BundleError(f"model bundle {where}: inconsistent arrays ({', '.join(problems)})")
