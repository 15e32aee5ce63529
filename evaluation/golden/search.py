"""The harness's mini search system: BM25 over listing titles (bm25s), then the query
classifier's categories either filter or boost the candidates.

For each query the top ``candidates`` listings by BM25 (score > 0: a query none of
whose words occurs in a title retrieves nothing) are re-ranked and the best ``top_n``
returned:

- no classifier (the floor): BM25 order;
- ``filter``: only listings whose category is among the classifier's top ``categories``;
- ``boost``: BM25 divided by the query's best BM25 (so scores lie in (0, 1]) plus
  ``boost_weight`` times the classifier's score of the listing's category (0 when the
  category is not in the classifier's top 10).

A classifier may instead answer each query by one taxonomy *node* at a stated precision
(:class:`NodeAnswers`, a department, an aisle, ... or a leaf): ``filter`` then keeps the
listings whose category lies beneath the node, and ``boost`` adds ``boost_weight`` times the
node's probability to theirs; a query without a node is searched as without a classifier.

Ties keep BM25 order, and BM25 ties keep inventory order (among the retrieved candidates), so
results are deterministic.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from qcat.errors import InputError
from qcat.evaluation.golden.inventory import Inventory
from qcat.models.model import Model
from qcat.taxonomy import Taxonomy

MODES = ("filter", "boost")
CLASSIFIER_K = 10


@dataclass(frozen=True)
class SearchConfig:
    top_n: int = 5
    candidates: int = 200
    mode: str = "boost"
    boost_weight: float = 1.0
    categories: int = 3  # classifier categories a filtered search keeps

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise InputError(f"unknown search mode {self.mode!r}; expected one of {', '.join(MODES)}")
        if not 1 <= self.top_n <= self.candidates:
            raise InputError(f"top N must lie in 1..{self.candidates} (the candidates), got {self.top_n}")
        if not 1 <= self.categories <= CLASSIFIER_K:
            raise InputError(f"filter categories must lie in 1..{CLASSIFIER_K}, got {self.categories}")
        if not self.boost_weight >= 0:
            raise InputError(f"boost weight must be non-negative, got {self.boost_weight}")

    def to_json(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Candidates:
    docs: np.ndarray  # int64 (queries, candidates): inventory rows, -1 padded
    scores: np.ndarray  # float64 BM25, 0 at padding


@dataclass(frozen=True)
class NodeAnswers:
    """Each query's node answer: its taxonomy id ("" where no node) and calibrated probability
    (0 where no node), its depth (1 a department, 0 where no node) and whether it is a leaf;
    ``unsupported``: no node because the calibration cannot support the precision for the
    query's length (rather than no department reaching it)."""

    ids: np.ndarray  # object
    probability: np.ndarray  # float64
    depth: np.ndarray  # int64
    leaf: np.ndarray  # bool
    unsupported: np.ndarray  # bool

    @property
    def answered(self) -> np.ndarray:
        return self.depth > 0

    def summary(self, rows: np.ndarray) -> dict:
        """Over the queries ``rows``: how many, the node's mean depth (over those with a node), and
        the shares with no node, with no node for want of support, and answered by a leaf."""
        answered = self.answered[rows]
        share = (lambda mask: float(mask.mean())) if len(rows) else (lambda mask: float("nan"))
        return {"queries": len(rows), "answered": int(answered.sum()),
                "mean_depth": float(self.depth[rows][answered].mean()) if answered.any() else float("nan"),
                "no_node_share": share(~answered), "unsupported_share": share(self.unsupported[rows]),
                "leaf_share": share(self.leaf[rows])}


@dataclass(frozen=True)
class ResultLists:
    docs: np.ndarray  # int64 (queries, top_n): inventory rows, best first, -1 padded
    scores: np.ndarray  # float64

    @property
    def returned(self) -> np.ndarray:
        return (self.docs >= 0).sum(axis=1)


class MiniSearch:
    def __init__(self, inventory: Inventory, config: SearchConfig = SearchConfig(), taxonomy: Taxonomy | None = None):
        """``taxonomy``: the inventory's categories' taxonomy, needed to search by node answers."""
        if len(inventory) == 0:
            raise InputError("the inventory is empty: no listing of the golden set is in the catalog and the sample is empty")
        import bm25s  # here, not at the top: it imports JAX where JAX is installed (over half a second)

        self.inventory, self.config = inventory, config
        self.retriever = bm25s.BM25()
        self.retriever.index(inventory.tokens, show_progress=False)
        self.category_names, self.category_codes = np.unique(inventory.category.astype(str), return_inverse=True)
        self.taxonomy = taxonomy
        self._chains: np.ndarray | None = None

    def retrieve(self, token_lists: list[list[str]]) -> Candidates:
        k = min(self.config.candidates, len(self.inventory))
        # numpy's top-k, pinned: "auto" picks JAX's whenever JAX is installed, which changes memory use
        # (a large batch died in JAX with RESOURCE_EXHAUSTED) and could change ties.
        docs, scores = self.retriever.retrieve(token_lists, k=k, show_progress=False, n_threads=2,
                                               backend_selection="numpy")
        docs, scores = docs.astype(np.int64), scores.astype(np.float64)
        # bm25s fills the list with score-0 documents when fewer match.
        docs[scores <= 0] = -1
        scores[scores <= 0] = 0.0
        # Equal scores in inventory order (bm25s leaves ties in no set order); padding last.
        order = np.lexsort((np.where(docs >= 0, docs, len(self.inventory)), -scores), axis=1)
        return Candidates(np.take_along_axis(docs, order, axis=1), np.take_along_axis(scores, order, axis=1))

    def category_scores(self, model: Model, queries: list[str], candidates: Candidates, batch: int = 4096) -> tuple[np.ndarray, np.ndarray]:
        """For every candidate: the classifier's score of its category, and whether that
        category is among the top ``config.categories``."""
        label_codes = self._label_codes(model)
        score = np.zeros(candidates.docs.shape)
        in_top = np.zeros(candidates.docs.shape, dtype=bool)
        for start in range(0, len(queries), batch):
            rows = slice(start, start + batch)
            predictions = model.predict(queries[rows], CLASSIFIER_K)
            predicted = np.where(predictions.labels >= 0, label_codes[np.maximum(predictions.labels, 0)], -2)
            docs = candidates.docs[rows]
            codes = np.where(docs >= 0, self.category_codes[np.maximum(docs, 0)], -1)
            same = codes[:, :, None] == predicted[:, None, :]  # (queries, candidates, k)
            score[rows] = (same * predictions.scores[:, None, :]).sum(axis=2)
            in_top[rows] = same[:, :, : self.config.categories].any(axis=2)
        return score, in_top

    def node_scores(self, nodes: NodeAnswers, candidates: Candidates) -> tuple[np.ndarray, np.ndarray]:
        """For every candidate: whether its category lies beneath the query's node (never for a query
        without one), and then the node's probability (else 0)."""
        chains = self._category_chains()
        taxonomy = self.taxonomy
        names, inverse = np.unique(nodes.ids.astype(str), return_inverse=True)
        known = np.array([taxonomy.index(n) if n in taxonomy else -2 for n in names.tolist()], dtype=np.int64)
        position = np.where(nodes.answered, known[inverse.reshape(-1)], -2) if len(names) else np.zeros(0, np.int64)
        docs = candidates.docs
        codes = np.where(docs >= 0, self.category_codes[np.maximum(docs, 0)], 0)
        # The ancestor of each candidate's category at the depth of the query's node, -1 where none.
        at_depth = np.minimum(np.maximum(nodes.depth - 1, 0), chains.shape[1] - 1)
        beneath = (chains[codes, at_depth[:, None]] == position[:, None]) & (docs >= 0)
        return beneath, np.where(beneath, nodes.probability[:, None], 0.0)

    def _category_chains(self) -> np.ndarray:
        """Per inventory category: the taxonomy positions of its path, department first, -1 padded."""
        if self._chains is None:
            if self.taxonomy is None:
                raise InputError("searching by node answers needs the inventory's taxonomy")
            paths = []
            for category in self.category_names.tolist():
                node, path = self.taxonomy.index(category), []
                while node >= 0:
                    path.append(node)
                    node = self.taxonomy.parents[node]
                paths.append(path[::-1])
            self._chains = np.full((len(paths), max(map(len, paths), default=1)), -1, dtype=np.int64)
            for row, path in enumerate(paths):
                self._chains[row, :len(path)] = path
        return self._chains

    def _label_codes(self, model: Model) -> np.ndarray:
        index = {name: i for i, name in enumerate(self.category_names)}
        return np.array([index.get(label, -3) for label in model.labels], dtype=np.int64)

    def search(self, queries: list[str], token_lists: list[list[str]], model: Model | None = None,
               candidates: Candidates | None = None, nodes: NodeAnswers | None = None) -> ResultLists:
        """Top-N listings per query, with ``model``'s categories, or with ``nodes`` (each query's
        node answer; ``model`` None), or (both None) BM25 alone."""
        if model is not None and nodes is not None:
            raise InputError("search by a model's categories or by node answers, not both")
        candidates = candidates or self.retrieve(token_lists)
        valid = candidates.docs >= 0
        if model is None and nodes is None:
            final = np.where(valid, candidates.scores, -np.inf)
        else:
            if nodes is not None:
                beneath, category_score = self.node_scores(nodes, candidates)
                in_top = beneath | ~nodes.answered[:, None]  # no node: nothing filtered out
            else:
                category_score, in_top = self.category_scores(model, queries, candidates)
            if self.config.mode == "filter":
                final = np.where(valid & in_top, candidates.scores, -np.inf)
            else:
                best = np.maximum(candidates.scores[:, :1], 1e-12)
                final = np.where(valid, candidates.scores / best + self.config.boost_weight * category_score, -np.inf)
        order = np.argsort(-final, axis=1, kind="stable")[:, : self.config.top_n]
        top_scores = np.take_along_axis(final, order, axis=1)
        docs = np.where(np.isfinite(top_scores), np.take_along_axis(candidates.docs, order, axis=1), -1)
        return ResultLists(docs, np.where(np.isfinite(top_scores), top_scores, 0.0))
