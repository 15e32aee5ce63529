"""Node answers scored against the taxonomy: qcat may answer a query with a node above the leaves
(a department at depth 1, an aisle below it, ...) or with no node at all, and the truth is leaves.

- :func:`node_correct`: the answered node contains a true leaf (is it, or one of its ancestors);
- :func:`path_coverage`: how much of that true leaf's path the answer covers, depth(node) /
  depth(leaf), 0 when it does not contain it;
- :func:`hierarchical_prf`: Kiritchenko et al.'s hierarchical precision, recall and F1, micro
  averaged over queries, as ``hiclass.metrics`` computes them from node ids;
- :func:`node_summary`: the figures a report prints for a set of node answers.

Answers are node ids or None, one per query; the truth of a query is a collection of leaf ids
(usually one; a lone id string counts as one, an empty collection as no truth). Every function
takes a :class:`Taxonomy` or, to build the arrays once for many calls, its :class:`NodeTable`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np
from scipy.special import ndtri  # norm.ppf's own function: scipy.stats takes half a second to import

from qcat.taxonomy import Taxonomy

Gold = Sequence[str | Iterable[str]]


@dataclass(frozen=True, eq=False)
class NodeTable:
    """Every node's ancestors-or-self and depth, by position. The arrays have one row more than
    the taxonomy has nodes: the last one, which position -1 reads, stands for no node (depth 0, no
    ancestors, not a leaf), so ``table.depth[table.positions(nodes)]`` is 0 for a None answer."""

    taxonomy: Taxonomy
    ancestors: np.ndarray  # int64 (nodes + 1, max depth): positions, department first, -1 padded
    depth: np.ndarray  # int64 (nodes + 1,): len(path), a department 1
    leaf: np.ndarray  # bool (nodes + 1,)

    @classmethod
    def build(cls, taxonomy: Taxonomy) -> NodeTable:
        n = len(taxonomy)
        parents = np.asarray(taxonomy.parents, dtype=np.int64).reshape(n)
        ancestors, depth = taxonomy.ancestor_table()
        leaf = np.zeros(n + 1, dtype=bool)
        leaf[:n] = True
        leaf[parents[parents >= 0]] = False
        return cls(taxonomy, ancestors, depth, leaf)

    @classmethod
    def of(cls, taxonomy: Taxonomy | NodeTable) -> NodeTable:
        return taxonomy if isinstance(taxonomy, NodeTable) else cls.build(taxonomy)

    def positions(self, nodes: Sequence[str | None]) -> np.ndarray:
        """int64 positions of node ids, -1 for None; an unknown id raises :class:`TaxonomyError`."""
        return np.array([-1 if node is None else self.taxonomy.index(node) for node in nodes], dtype=np.int64)

    def gold_positions(self, gold: Gold) -> np.ndarray:
        """int64 ``(queries, most true leaves of a query)``: each query's true nodes, -1 padded."""
        rows = [[self.taxonomy.index(gold_row)] if isinstance(gold_row, str)
                else [self.taxonomy.index(node) for node in gold_row] for gold_row in gold]
        out = np.full((len(rows), max((len(row) for row in rows), default=0) or 1), -1, dtype=np.int64)
        for i, row in enumerate(rows):
            out[i, :len(row)] = row
        return out


def lined_up(taxonomy: Taxonomy | NodeTable, nodes: Sequence[str | None],
             gold: Gold) -> tuple[NodeTable, np.ndarray, np.ndarray]:
    if len(nodes) != len(gold):
        raise ValueError(f"{len(nodes)} answers for {len(gold)} queries' truth")
    table = NodeTable.of(taxonomy)
    return table, table.positions(nodes), table.gold_positions(gold)


def contains(table: NodeTable, node: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """bool ``gold.shape``: node ``node[i]`` is ``gold[i, j]`` or one of its ancestors."""
    column = np.maximum(table.depth[node] - 1, 0)[:, None]
    return (node >= 0)[:, None] & (gold >= 0) & (table.ancestors[gold, column] == node[:, None])


def node_correct(taxonomy: Taxonomy | NodeTable, nodes: Sequence[str | None], gold: Gold) -> np.ndarray:
    """bool per query: the answered node contains one of the query's true leaves (None: False)."""
    table, node, gold_at = lined_up(taxonomy, nodes, gold)
    return contains(table, node, gold_at).any(axis=1)


def path_coverage(taxonomy: Taxonomy | NodeTable, nodes: Sequence[str | None], gold: Gold) -> np.ndarray:
    """float per query: depth(node) / depth(true leaf) where the node contains that leaf, else 0
    (None: 0); with several true leaves, the largest. A right leaf answer covers 1."""
    table, node, gold_at = lined_up(taxonomy, nodes, gold)
    share = table.depth[node][:, None] / np.maximum(table.depth[gold_at], 1)
    return np.where(contains(table, node, gold_at), share, 0.0).max(axis=1, initial=0.0)


def hierarchical_prf(taxonomy: Taxonomy | NodeTable, predicted: Sequence[str | None],
                     gold: Gold) -> tuple[float, float, float]:
    """Hierarchical precision, recall and F1 (Kiritchenko et al.), micro-averaged over queries as
    ``hiclass.metrics.precision/recall/f1`` (``average="micro"``) compute them.

    With ``A`` a query's answer and its ancestors and ``G`` the union of its true leaves and their
    ancestors (nodes, the root excluded): hP = Σ|A∩G| / Σ|A|, hR = Σ|A∩G| / Σ|G|, hF = 2·hP·hR /
    (hP + hR), 0 when hP + hR = 0. A right answer above the leaves costs recall, not precision (a
    right department alone scores hP 1); a None answer adds nothing to Σ|A| and costs recall only.
    hP is NaN when no query is answered (hiclass divides by zero), hR NaN with no truth, hF NaN
    when both are.

    hiclass sees each label as its path of names padded with "", and a query as the set of those
    names: given names, it counts a name two branches share (``Toys > Other``, ``Books > Other``)
    as a common ancestor; this counts nodes, as hiclass does given paths of node ids (what the
    tests compare against).
    """
    table, node, gold_at = lined_up(taxonomy, predicted, gold)
    answer = table.ancestors[node]  # (queries, levels)
    truth = table.ancestors[gold_at]  # (queries, true leaves, levels)
    # A∩G is the longest prefix of A's chain that some true leaf's chain shares (ancestors match
    # at a depth only if they match at every depth above it).
    shared = ((truth == answer[:, None, :]) & (answer[:, None, :] >= 0)).sum(axis=2).max(axis=1, initial=0)
    flat = np.sort(truth.reshape(len(node), truth.shape[1] * truth.shape[2]), axis=1)
    new = np.ones(flat.shape, dtype=bool)
    new[:, 1:] = flat[:, 1:] != flat[:, :-1]
    both, answered, true = int(shared.sum()), int(table.depth[node].sum()), int(((flat >= 0) & new).sum())
    precision = both / answered if answered else math.nan
    recall = both / true if true else math.nan
    if not (answered or true):
        return precision, recall, math.nan
    if both == 0:
        return precision, recall, 0.0
    return precision, recall, 2 * precision * recall / (precision + recall)


def check_confidence(confidence: float) -> None:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence}")


def wilson_interval(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval (no continuity correction) of a proportion ``k / n``, ``n > 0``;
    the same as ``scipy.stats.binomtest(k, n).proportion_ci(confidence, "wilson")``."""
    check_confidence(confidence)
    z = float(ndtri(0.5 + confidence / 2))
    p, z2 = k / n, z * z
    center = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return max(center - half, 0.0), min(center + half, 1.0)


def node_summary(correct: np.ndarray, depth: np.ndarray, answered: np.ndarray, leaf: np.ndarray,
                 confidence: float = 0.95) -> dict[str, float | int | None]:
    """What a report prints for a set of node answers, from per-query arrays: ``correct`` (e.g.
    :func:`node_correct`), ``depth`` of the answer (a department 1), ``answered`` (a node at all)
    and ``leaf`` (the answer is a leaf); :class:`NodeTable`'s ``depth`` and ``leaf`` at
    ``positions(nodes)`` give the last three.

    ``precision``: the share right among answered queries, with ``precision_low`` and
    ``precision_high`` its Wilson score interval at ``confidence`` (:func:`wilson_interval`);
    ``answered`` and ``n`` counts; ``mean_depth`` over all queries (no node counts 0),
    ``mean_depth_answered``; ``leaf_share`` (answered at a leaf) and ``none_share`` (no node), of
    all queries. A figure with nothing to average (no query, or none answered) is None.
    """
    check_confidence(confidence)
    correct, depth = np.asarray(correct, dtype=bool), np.asarray(depth, dtype=np.float64)
    answered, leaf = np.asarray(answered, dtype=bool), np.asarray(leaf, dtype=bool)
    if not (answered.ndim == 1 and correct.shape == depth.shape == answered.shape == leaf.shape):
        raise ValueError("correct, depth, answered and leaf must be 1-d and of one length")
    correct, leaf, depth = correct & answered, leaf & answered, np.where(answered, depth, 0.0)
    n, k = len(answered), int(answered.sum())
    low, high = wilson_interval(int(correct.sum()), k, confidence) if k else (None, None)
    return {
        "precision": float(correct.sum() / k) if k else None,
        "precision_low": low,
        "precision_high": high,
        "answered": k,
        "n": n,
        "mean_depth": float(depth.mean()) if n else None,
        "mean_depth_answered": float(depth[answered].mean()) if k else None,
        "leaf_share": float(leaf.mean()) if n else None,
        "none_share": (n - k) / n if n else None,
    }
