"""Loading a model bundle of any backend and classifying queries with it."""

from __future__ import annotations

import functools
import math
import numbers
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Sequence

import numpy as np

from qcat.bundles.bundle import Manifest, read_manifest
from qcat.bundles.demo import demo_model_dir
from qcat.errors import InputError, QcatError, shown
from qcat.models.backends import BACKENDS, check_leaves, load_model, model_from_manifest  # noqa: F401 (also here)
from qcat.models.calibration import scores_calibrated
from qcat.models.calibration.nodes import (
    NodeAnswer,
    NodeCalibration,
    NodeChains,
    NodeTree,
    check_precision,
    load_node_calibration,
    no_node_calibration,
    node_chains,
)
from qcat.models.model import Model
from qcat.models.overrides import with_overrides
from qcat.taxonomy import Taxonomy
from qcat.text.lines import MAX_K, query_too_long
from qcat.text.normalize import normalize, tokenize

MODEL_ENV = "QCAT_MODEL"
WARM_UP_QUERIES = ("qcat", "qcat warm up query")  # one token (NB in a hybrid) and several


def default_model_dir() -> Path:
    """``$QCAT_MODEL`` if set, else the demo model of the qcat-demo distribution (an error
    saying how to install it when it is not)."""
    if os.environ.get(MODEL_ENV):
        return Path(os.environ[MODEL_ENV])
    return demo_model_dir()


@dataclass(frozen=True)
class Category:
    id: str
    path: str
    score: float


@dataclass(frozen=True)
class Classification:
    query: str
    normalized: str
    backend: str
    source: str
    categories: tuple[Category, ...]
    calibrated: bool = False  # whether the scores are calibrated probabilities (else raw scores)
    precision: float | None = None  # the precision a node answer was asked at (None: not asked)
    node: NodeAnswer | None = None  # the deepest node right at least ``precision`` of the time
    node_why: str | None = None  # why there is no node, when asked and none

    def to_json(self) -> dict:
        answer = {
            "query": self.query,
            "normalized": self.normalized,
            "backend": self.backend,
            "source": self.source,
            "calibrated": self.calibrated,
            "categories": [{"id": c.id, "path": c.path, "score": round(c.score, 6)} for c in self.categories],
        }
        if self.precision is not None:
            answer["precision"] = self.precision
            answer["node"] = self.node.to_json() if self.node is not None else None
            if self.node is None:
                answer["node_why"] = self.node_why
        return answer


def check_k(k: int) -> int:
    """``k`` as every entry point takes it: a whole number of categories in 1..:data:`qcat.text.lines.MAX_K`
    (`qcat classify -k` stops at 100), or an InputError naming the value."""
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or not 1 <= k <= MAX_K:
        raise InputError(f"k {k!r}: must be a whole number of categories in 1..{MAX_K:,}")
    return int(k)


def check_min_score(min_score: float | None) -> float:
    """``min_score`` as the lowest score kept (None: every score, -inf); a number in [0, 1] or
    an InputError naming the value."""
    if min_score is None:
        return -math.inf
    if isinstance(min_score, bool) or not isinstance(min_score, numbers.Real) or not 0 <= min_score <= 1:
        raise InputError(f"min_score {min_score!r}: must be a number in [0, 1] (a calibrated probability)")
    return float(min_score)


@dataclass(frozen=True)
class Failure:
    """A query of a batch that could not be classified, and why (the rest of its batch is)."""

    query: str
    error: str

    def to_json(self) -> dict:
        return {"query": self.query, "error": self.error}


def query_problem(query: str, max_length: int | None = None) -> str | None:
    """Why ``query`` cannot be classified, or None: it is too long (over ``max_length``
    characters, or over :data:`qcat.text.lines.MAX_QUERY_BYTES` whatever the caller's limit), holds a
    lone surrogate (not Unicode text), or is empty after normalization."""
    if max_length is not None and len(query) > max_length:
        return f"query of {len(query):,} characters is longer than the limit of {max_length:,}"
    too_long = query_too_long(query)
    if too_long:
        return f"query {shown(query, 40)} is {too_long}"
    try:
        query.encode("utf-8")
    except UnicodeEncodeError:
        return f"query {shown(query)} is not valid Unicode text (it holds a lone surrogate)"
    if not tokenize(query):
        return f"query {shown(query)} is empty after normalization"
    return None


class Classifier:
    """A loaded model plus its taxonomy: raw queries in, ranked categories out."""

    def __init__(self, model: Model, taxonomy: Taxonomy, directory: Path, manifest: Manifest,
                 nodes: NodeCalibration | None = None) -> None:
        self.model = model
        self.taxonomy = taxonomy
        self.directory = directory
        self.manifest = manifest
        self.nodes = nodes  # the bundle's node calibration (nodes.json), or None: no --precision
        self._tree = NodeTree(taxonomy, model.labels) if nodes is not None else None
        self._chain = None  # the node calibration's compiled chain, once compile has run
        self._label_paths = [taxonomy.path_of(label) for label in model.labels]
        self._calibrated = functools.cache(functools.partial(scores_calibrated, model))  # source -> bool
        self.compiled = False  # whether single queries take the compiled path (see compile)

    @classmethod
    def load(cls, directory: str | Path | None = None, backend: str | None = None,
             cutoff: int | None = None, overrides: bool = True) -> "Classifier":
        """Load a bundle; ``backend`` (nb, xmlq, xreg or hybrid) and ``cutoff`` pick how a
        hybrid bundle answers, and must agree with any other bundle. A bundle's judged overrides
        (``overrides.tsv``, :mod:`qcat.models.overrides`) answer their queries first unless
        ``overrides`` is false (``--no-overrides``)."""
        directory = Path(directory) if directory is not None else default_model_dir()
        manifest = read_manifest(directory)
        model = model_from_manifest(manifest)
        if model.backend == "hybrid":
            model = model.with_options(cutoff=cutoff, route_to=backend)
        else:
            if backend not in (None, model.backend):
                raise QcatError(f"{directory} is a {model.backend} model: --backend {backend} needs a hybrid bundle")
            if cutoff is not None:
                raise QcatError(f"{directory} is a {model.backend} model: --cutoff needs a hybrid bundle")
        if overrides:
            model = with_overrides(model, manifest)
        return cls(model, model.taxonomy, directory, manifest, load_node_calibration(manifest))

    def compile(self) -> "Classifier":
        """Make the single-query path ready (its kernels compiled, or loaded from numba's cache,
        and each part's first call made), so that no request pays for it; from then on
        ``classify`` of a single query takes it. ``qcat serve`` compiles at load."""
        from qcat.console.progress import announce_compilation
        from qcat.models import kernels

        announce_compilation("the single-query kernels", kernels.top_k)
        model = self.model
        parts = [model.part(name) for name in model.parts] if model.backend in ("hybrid", "rerank") else []
        if model.backend == "rerank":
            parts.append(model.first)
        for part in [model] + parts:
            for query in WARM_UP_QUERIES:
                part.predict_one(query, 1)
        if self.nodes is not None:
            self._chain = self.nodes.compiled_chain(self._tree)
            for query in WARM_UP_QUERIES:
                self.classify_one(query, 1, precision=0.9)
        self.compiled = True
        return self

    def classify(self, queries: Sequence[str], k: int = 5, min_score: float | None = None,
                 precision: float | None = None) -> list[Classification]:
        """The top ``k`` categories of each query; with ``min_score``, only those scoring at least
        that (none when no category does); with ``precision`` P (0 < P < 1), also the deepest
        taxonomy node the query's category lies beneath at least P of the time
        (:mod:`qcat.models.calibration.nodes`; the bundle needs a node calibration). The same answers
        whichever path they take: once ``compile`` has run, a single query goes through the
        compiled single-query path, and so does each query of a batch where the model is faster
        one by one (``faster_one_by_one``: XReg and the demo hybrid are, at every batch size);
        otherwise the model's batch path, which needs no compilation, answers."""
        if isinstance(queries, str):
            raise TypeError(f"classify takes a list of queries, not one string: classify([{queries!r}])")
        floor, k, precision = check_min_score(min_score), check_k(k), self.check_precision(precision)
        if self.compiled and (len(queries) == 1 or self.model.faster_one_by_one):
            return [self._one(query, k, floor, precision) for query in queries]
        depth, shared = self._depths(k, precision)
        predictions = self.model.predict(queries, depth)
        wide = self._node_leaves(predictions, shared, precision, lambda top: self.model.predict(queries, top))
        return [self._classification(query, predictions.labels[i, :k], predictions.scores[i, :k],
                                     predictions.sources[i], floor, precision,
                                     None if wide is None else (wide.labels[i], wide.scores[i]))
                for i, query in enumerate(queries)]

    def classify_one(self, query: str, k: int = 5, min_score: float | None = None,
                     precision: float | None = None) -> Classification:
        """One query through the compiled single-query path (compiled on first use)."""
        return self._one(query, check_k(k), check_min_score(min_score), self.check_precision(precision))

    def check_precision(self, precision: float | None) -> float | None:
        """``precision`` checked (None, or strictly between 0 and 1), and refused in one line for
        a bundle without a node calibration."""
        precision = check_precision(precision)
        if precision is not None and self.nodes is None:
            raise QcatError(no_node_calibration(self.directory))
        return precision

    def _depths(self, k: int, precision: float | None) -> tuple[int, bool]:
        """How many categories to ask the model for, and whether that one answer also holds the
        node calibration's top leaves (else they take a second call): a hybrid that blends gives
        the same top k at every depth of one ``k_group`` only."""
        if precision is None:
            return k, True
        top = self.nodes.top_k
        return (max(k, top), True) if self.k_group(k) == self.k_group(top) else (k, False)

    def _one(self, query: str, k: int, floor: float, precision: float | None = None) -> Classification:
        depth, shared = self._depths(k, precision)
        predictions = self.model.predict_one(query, depth)
        wide = self._node_leaves(predictions, shared, precision, lambda top: self.model.predict_one(query, top))
        return self._classification(query, predictions.labels[0, :k], predictions.scores[0, :k], predictions.sources[0],
                                    floor, precision, None if wide is None else (wide.labels[0], wide.scores[0]))

    def _node_leaves(self, predictions, shared: bool, precision: float | None, ask):
        """The answer a node is read from: none without ``precision``; the leaves' own answer where
        it holds the node calibration's top leaves (``shared``); else ``ask(top_k)``, a second call."""
        if precision is None:
            return None
        return predictions if shared else ask(self.nodes.top_k)

    def _classification(self, query: str, labels: np.ndarray, scores: np.ndarray, source: str, floor: float,
                        precision: float | None = None,
                        wide: tuple[np.ndarray, np.ndarray] | None = None) -> Classification:
        categories = tuple(Category(self.model.labels[label], self._label_paths[label], score)
                           for label, score in zip(labels.tolist(), scores.tolist()) if label >= 0 and score >= floor)
        answer = Classification(query, normalize(query), self.model.backend, source, categories,
                                self._calibrated(source))
        if precision is None:
            return answer
        node, why = self.node_answer(query, wide[0], wide[1], precision)
        return replace(answer, precision=precision, node=node, node_why=why)

    def node_chains(self, queries: Sequence[str]) -> NodeChains:
        """The node chains of ``queries`` (:class:`qcat.models.calibration.nodes.NodeChains`): their
        node at any precision from one call of the model (evaluation, the harness, judging)."""
        self.check_precision(0.5)
        predictions = self.model.predict(list(queries), self.nodes.top_k)
        n_tokens = np.fromiter((len(tokenize(q)) for q in queries), dtype=np.int64, count=len(queries))
        return node_chains(self.nodes, self._tree, predictions.labels, predictions.scores, n_tokens)

    def node_answer(self, query: str, labels: np.ndarray, scores: np.ndarray,
                    precision: float) -> tuple[NodeAnswer | None, str | None]:
        """The node of ``query`` at ``precision`` from the model's top leaves (label positions and
        scores, best first), or None and why."""
        n_tokens = len(tokenize(query))
        threshold = self.nodes.threshold(precision, n_tokens)
        if threshold is None:
            return None, self.nodes.unsupported(precision, n_tokens)
        node = self.nodes.answer(self._tree, labels, scores, threshold, self._chain)
        if node is None:
            return None, f"no department is right at least {precision:g} of the time for this query"
        return node, None

    def k_group(self, k: int) -> int:
        """Requests for top-k whose k share a group can be answered by one call at the group's
        largest k, each answer cut to its own k (the same categories and scores)."""
        return self.model.k_group(k) if self.model.backend == "hybrid" else 0

    def classify_each(self, queries: Sequence[str], k: int = 5, max_length: int | None = None,
                      min_score: float | None = None,
                      precision: float | None = None) -> list["Classification | Failure"]:
        """Like ``classify``, but a query that cannot be classified (see ``query_problem``) gets
        a ``Failure`` in its place instead of failing the batch."""
        problems = [query_problem(query, max_length) for query in queries]
        answers = iter(self.classify([q for q, problem in zip(queries, problems) if problem is None], k, min_score,
                                     precision))
        return [Failure(query, problem) if problem else next(answers) for query, problem in zip(queries, problems)]

    def explain(self, query: str, k: int = 5) -> list[str]:
        return self.model.explain(query, check_k(k))
