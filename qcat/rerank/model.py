"""The second stage: a learned re-ranker over the candidates of several generators (issue 32).

For a query, the candidates are the union of the top ``depth`` (K) categories of the first
stage (a bundle of any backend; the demo's NB + XReg hybrid), of each of its parts, and of the
categories of the ``neighbours`` catalog listings whose titles best match the query (BM25,
:mod:`qcat.rerank.neighbours`). Each candidate gets a feature row (:mod:`qcat.rerank.features`), a
boosted tree ensemble (:mod:`qcat.rerank.trees`, trained by ``qcat train rerank``) scores it,
and the candidates are returned by score (ties: the first stage's order). The raw score of a
category is its softmax share over the query's candidates; the bundle's calibration maps it
(source ``rerank``) like every other backend's.

The bundle holds the first stage in ``first/`` (verified by its manifest's hash), the trees
and label facts in ``rerank.npz``, the neighbour index, and ``calibration.json``. Serving
needs numpy and numba only.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Sequence

import numpy as np

from qcat.bundles.bundle import MANIFEST, Manifest, load_arrays, read_manifest, sha256_file, write_bundle
from qcat.errors import BundleError
from qcat.models.calibration import (
    Calibration,
    calibrated,
    calibrated_one,
    describe,
    load_calibration,
    save_calibration,
)
from qcat.models.model import Model, Predictions
from qcat.rerank.features import LabelFacts, QueryFacts, candidate_features, feature_names
from qcat.rerank.neighbours import NeighbourIndex, search_one, vote
from qcat.rerank.trees import TreeEnsemble
from qcat.taxonomy import Taxonomy
from qcat.text.normalize import tokenize

BACKEND = "rerank"
SOURCE = "rerank"
FIRST_DIR = "first"
ARRAYS_FILE = "rerank.npz"
DEPTH = 20  # candidates taken from each answer
NEIGHBOURS = 10  # catalog listings that vote


def answers_of(first: Model) -> tuple[str, ...]:
    """The answers a re-ranker over ``first`` takes candidates from: ``first``, then each of its
    parts (a hybrid's)."""
    return ("first",) + (tuple(first.parts) if first.backend == "hybrid" else ())


@dataclass(frozen=True)
class RerankModel:
    first: Model  # the first stage: its answer and its parts' answers make the candidates
    index: NeighbourIndex
    prior: np.ndarray  # float64 per label: its share of the training clicks
    trees: TreeEnsemble | None  # None: not trained yet (training builds features through it)
    taxonomy: Taxonomy
    config: dict
    metrics: dict
    depth: int = DEPTH
    neighbours: int = NEIGHBOURS
    calibration: Calibration | None = None
    backend: str = BACKEND

    def __post_init__(self) -> None:
        object.__setattr__(self, "labels", self.first.labels)
        names = self.answers
        if self.trees is not None and self.trees.n_features != len(feature_names(names)):
            raise BundleError(f"the re-ranker's trees read {self.trees.n_features} features; "
                              f"its answers ({', '.join(names)}) make {len(feature_names(names))}")

    # -- what the features read ---------------------------------------------------------

    @property
    def answers(self) -> tuple[str, ...]:
        """The answers whose top categories are candidates: ``first``, then each part's name."""
        return answers_of(self.first)

    @property
    def parts(self) -> tuple[str, ...]:
        return answers_of(self.first)[1:]

    def part(self, name: str) -> Model:
        return self.first.part(name)

    @functools.cached_property
    def facts(self) -> LabelFacts:
        return LabelFacts.of(self.labels, self.taxonomy, self.prior)

    @functools.cached_property
    def _nb(self):
        return self.first.nb if self.first.backend == "hybrid" else self.first if self.first.backend == "nb" else None

    @functools.cached_property
    def _known(self) -> frozenset[str]:
        nb = self._nb
        return frozenset(feature for feature in nb.vocabulary if " " not in feature) if nb is not None else frozenset()

    def query_facts(self, tokens: list[str]) -> QueryFacts:
        nb = self._nb
        seen = nb is not None and " ".join(tokens) in nb._lookup_index
        known = sum(token in self._known for token in tokens) / max(len(tokens), 1)
        return QueryFacts(tuple(tokens), seen, known)

    def _answer_labels(self, name: str, labels: np.ndarray) -> np.ndarray:
        return labels if name == "first" else self.first._labels_of(name, labels)

    def answer_batch(self, queries: Sequence[str]) -> list[list[tuple[np.ndarray, np.ndarray]]]:
        """Per query, each answer's (labels, scores) at ``depth``, through the batch paths."""
        predictions = [(name, self.first.predict(queries, self.depth) if name == "first"
                        else self.part(name).predict(queries, self.depth)) for name in self.answers]
        mapped = [(self._answer_labels(name, p.labels), p.scores) for name, p in predictions]
        return [[(labels[i], scores[i]) for labels, scores in mapped] for i in range(len(queries))]

    def answer_one(self, query: str) -> list[tuple[np.ndarray, np.ndarray]]:
        """Each answer's (labels, scores) at ``depth``, through the compiled single-query paths."""
        parts = {name: self.part(name).predict_one(query, self.depth) for name in self.parts}
        first = self.first.predict_one(query, self.depth, known=parts) if parts else self.first.predict_one(query, self.depth)
        return [(first.labels[0], first.scores[0])] + [
            (self._answer_labels(name, p.labels)[0], p.scores[0]) for name, p in parts.items()]

    def query_rows(self, query: str, answers: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
        """The candidates of one query and their feature rows."""
        tokens = tokenize(query)
        docs, scores = search_one(self.index.term_ids(tokens), self.index.term_ptr, self.index.term_docs,
                                  self.index.term_weights, self.index.n_docs, self.neighbours)
        votes = vote(self.index.doc_label, docs, scores, self.neighbours)
        top = float(scores[0]) if len(scores) else 0.0
        return candidate_features(self.query_facts(tokens), answers, votes, top, self.facts, self.depth)

    # -- prediction ------------------------------------------------------------------

    def _ranked(self, candidates: np.ndarray, rows: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-k candidates by tree score (ties: the first stage's rank, then the label) and their
        softmax shares."""
        if self.trees is None:
            raise BundleError("this re-ranker has no trees yet (it is being trained)")
        if len(candidates) == 0:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        score = self.trees.score(rows)
        order = np.lexsort((candidates, rows[:, 1], -score))[:k]
        shares = np.exp(score - score.max())
        shares /= shares.sum()
        return candidates[order], shares[order].astype(np.float32)

    def predict(self, queries: Sequence[str], k: int) -> Predictions:
        labels = np.full((len(queries), k), -1, dtype=np.int32)
        scores = np.zeros((len(queries), k), dtype=np.float32)
        for i, (query, answers) in enumerate(zip(queries, self.answer_batch(queries))):
            top, share = self._ranked(*self.query_rows(query, answers), k)
            labels[i, :len(top)], scores[i, :len(top)] = top, share
        return calibrated(self.calibration, Predictions(labels, scores, (SOURCE,) * len(queries)), queries)

    def predict_one(self, query: str, k: int) -> Predictions:
        """``predict([query], k)`` through the parts' compiled paths, the numba BM25 search and
        the numba tree walk."""
        labels = np.full((1, k), -1, dtype=np.int32)
        scores = np.zeros((1, k), dtype=np.float32)
        top, share = self._ranked(*self.query_rows(query, self.answer_one(query)), k)
        labels[0, :len(top)], scores[0, :len(top)] = top, share
        return calibrated_one(self.calibration, Predictions(labels, scores, (SOURCE,)), query)

    @property
    def faster_one_by_one(self) -> bool:
        return self.first.faster_one_by_one

    def k_group(self, k: int) -> int:
        return 0 if k <= self.depth else k

    def uncalibrated(self) -> "RerankModel":
        return replace(self, calibration=None)

    def explain(self, query: str, k: int) -> list[str]:
        candidates, rows = self.query_rows(query, self.answer_one(query))
        names = feature_names(self.answers)
        lines = [f"rerank: a second stage re-ranks {len(candidates)} candidates (the top {self.depth} of "
                 f"{', '.join(self.answers)} and the categories of the {self.neighbours} best-matching catalog "
                 f"listings) with {len(self.trees.roots)} boosted trees over {len(names)} features"]
        if len(candidates):
            top, _ = self._ranked(candidates, rows, k)
            first = candidates[np.argmin(rows[:, 1])]
            for label, title in ((int(top[0]), "answer"), (int(first), "first stage's top")):
                row = rows[np.searchsorted(candidates, label)]
                push = self.trees.contributions(row)
                strongest = np.argsort(-np.abs(push), kind="stable")[:5]
                lines.append(f"  {title} {self.labels[label]} {self.taxonomy.path_of(self.labels[label])}: tree score "
                             f"{float(self.trees.score(row[None, :])[0]):+.3f}; top features "
                             + ", ".join(f"{names[f]}={row[f]:.3g} ({push[f]:+.3f})" for f in strongest))
        return lines + [describe(self.calibration, SOURCE)]

    # -- persistence -------------------------------------------------------------------

    def save(self, directory: str | Path) -> Manifest:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self.first.save(directory / FIRST_DIR)
        vocabulary_hash = self.index.save(directory)
        np.savez_compressed(directory / ARRAYS_FILE, prior=self.prior, **self.trees.arrays())
        save_calibration(self.calibration, directory)
        config = self.config | {"depth": self.depth, "neighbours": self.neighbours,
                                "features": list(feature_names(self.answers))}
        return write_bundle(directory, BACKEND, self.taxonomy, vocabulary_hash, config, self.metrics,
                            extra={"first_stage": {"backend": self.first.backend,
                                                   "manifest_sha256": sha256_file(directory / FIRST_DIR / MANIFEST)}})

    @classmethod
    def from_manifest(cls, manifest: Manifest, taxonomy: Taxonomy) -> "RerankModel":
        from qcat.models.backends import model_from_manifest  # the first stage is a bundle of its own

        where = f"model bundle {manifest.directory}"
        recorded = manifest.data.get("first_stage", {})
        first_manifest = read_manifest(manifest.directory / FIRST_DIR)
        if not isinstance(recorded, dict) or sha256_file(manifest.directory / FIRST_DIR / MANIFEST) != recorded.get("manifest_sha256"):
            raise BundleError(f"{where}: the first stage {FIRST_DIR}/ does not match its hash in {MANIFEST}")
        first = model_from_manifest(first_manifest)
        wrong = [label for label in first.labels if label not in taxonomy or taxonomy.path_of(label) != first.taxonomy.path_of(label)]
        if wrong:
            raise BundleError(f"{where}: the first stage names categories the re-ranker's taxonomy lacks, e.g. {wrong[:3]}")
        arrays = load_arrays(manifest, ARRAYS_FILE)
        config = manifest.config
        try:
            depth, neighbours, names = int(config["depth"]), int(config["neighbours"]), list(config["features"])
            trees = TreeEnsemble.from_arrays(arrays, len(names))
            prior = arrays["prior"].astype(np.float64)
        except (KeyError, TypeError, ValueError) as exc:
            raise BundleError(f"{where}: {ARRAYS_FILE} or the manifest's config is not a re-ranker's ({exc})") from None
        if len(prior) != len(first.labels):
            raise BundleError(f"{where}: {ARRAYS_FILE} has {len(prior)} label priors for {len(first.labels)} labels")
        if names != list(feature_names(answers_of(first))):
            raise BundleError(f"{where}: its trees read features {names[:3]}..., this qcat builds "
                              f"{list(feature_names(answers_of(first)))[:3]}...: retrain it with this version")
        return cls(first=first, index=NeighbourIndex.load(manifest, len(first.labels)), prior=prior, trees=trees,
                   taxonomy=taxonomy, config=config, metrics=manifest.metrics, depth=depth, neighbours=neighbours,
                   calibration=load_calibration(manifest))
