"""Training XReg (§4): trees, relevance-weighted node regressors (eq. 5–6), tail classifiers.

For a point i and a node n, let ``m_n(i)`` be the largest normalized relevance of a label
in n's subtree, with ``m_root = 1`` (every point visits the root). The edge into child c of
n is a logistic regressor trained on the points that reach n (``m_n(i) > 0``) with target
``z = m_c / m_n`` (the conditional probability of visiting c, taking the labels of a subtree
as fully correlated) and weight ``s = m_n`` (the probability of reaching n, the product of
the ancestors' z): positive weight ``s·z = m_c`` and negative weight ``s·(1 − z) = m_n − m_c``.
A label l of leaf n is the same with ``m_c`` replaced by ``y_il``, so the product of the
targets along a label's path is ``y_il``. As in the authors' released code, the costs of a
node are scaled so that they sum to ``C · N`` (N training points): eq. 5's ``C / |I_n|`` with
``|I_n|`` the points' total weight, times N. ``cost_scaling="point"`` uses ``C`` per unit of
weight instead (liblinear's usual form).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Callable

import numpy as np
import scipy.sparse as sp

from qcat.console.progress import announce_compilation, task
from qcat.models.label_tree import LabelTree
from qcat.models.xreg import TailClassifiers, XRegModel
from qcat.training.data.dataset import Dataset
from qcat.training.xreg.features import featurize, fit_tfidf
from qcat.training.xreg.relevance import relevance_matrix
from qcat.training.xreg.solver import solve_batch, solve_joint
from qcat.training.xreg.tree import build_tree, label_vectors


@dataclass(frozen=True)
class XRegConfig:
    trees: int = 3  # T
    beam: int = 10  # P
    factor: float = 4.0  # F, labelwise
    leaf_size: int = 100  # M
    C: float = 10.0
    alpha: float = 0.8  # XReg-t: weight of log P_xreg
    gamma: float = 30.0  # XReg-t: tail classifier sharpness
    shortlist: int = 100  # XReg-t: labels re-ranked per query
    rerank: bool = False  # serve XReg-t instead of XReg
    seed: int = 0
    prune: float = 0.1  # regressor weights with |w| below this are dropped (biases kept)
    tail_prune: float = 0.001  # tail classifier means below this are dropped
    eps: float = 0.1  # dual coordinate descent stops when no projected gradient exceeds this
    max_iter: int = 10  # epochs of dual coordinate descent (20 before issue 15: same P@1 and XMAD@5 at 10)
    cost_scaling: str = "node"  # "node" (C·N per node, the authors' code) or "point"
    # Solver speed settings (issue 15; docs/benchmarks.md "Training speed"): they change how the
    # same problems are solved, not the problems.
    joint: bool = True  # a leaf's regressors in one pass over its points (solve_joint)
    shrink: float = 0.01  # internal nodes: instances with α below this × their bound leave the active set (0: off)
    recheck: int = 5  # with shrinking, every recheck-th epoch visits every instance (0: only the last)
    mirror: bool = False  # start a node's second edge from the mirror of its first (measured: no gain)
    threads: int = 1  # nodes trained at once (the solver releases the GIL)

    def __post_init__(self) -> None:
        checks = [
            (self.trees >= 1, f"--trees must be at least 1, got {self.trees}"),
            (self.beam >= 1, f"--beam must be at least 1, got {self.beam}"),
            (self.factor > 0, f"--factor must be positive, got {self.factor}"),
            (self.leaf_size >= 2, f"--leaf-size must be at least 2, got {self.leaf_size}"),
            (self.C > 0, f"--C must be positive, got {self.C}"),
            (0.0 <= self.alpha <= 1.0, f"--alpha must lie in [0, 1], got {self.alpha}"),
            (self.gamma > 0, f"--gamma must be positive, got {self.gamma}"),
            (self.shortlist >= 1, f"--shortlist must be at least 1, got {self.shortlist}"),
            (self.prune >= 0 and self.tail_prune >= 0, "pruning thresholds must be non-negative"),
            (self.cost_scaling in ("node", "point"), f"cost scaling must be node or point, got {self.cost_scaling!r}"),
            (0.0 <= self.shrink < 1.0, f"--shrink must lie in [0, 1), got {self.shrink}"),
            (self.threads >= 1, f"--threads must be at least 1, got {self.threads}"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)


def _group_max(rows: np.ndarray, groups: np.ndarray, values: np.ndarray, n_rows: int):
    """Largest value per (group, row): sorted (groups, rows, max)."""
    key = groups.astype(np.int64) * n_rows + rows
    order = np.argsort(key, kind="stable")
    unique, start = np.unique(key[order], return_index=True)
    return unique // n_rows, unique % n_rows, np.maximum.reduceat(values[order], start) if len(start) else values[:0]


@dataclass
class _Level:
    """Points reaching each node of one level and their ``m_n``."""

    nodes: np.ndarray
    points: np.ndarray
    m: np.ndarray

    def block(self, node: int) -> tuple[np.ndarray, np.ndarray]:
        lo, hi = np.searchsorted(self.nodes, [node, node + 1])
        return self.points[lo:hi], self.m[lo:hi]


def _local(features: sp.csr_matrix, points: np.ndarray):
    """Rows ``points`` with columns renumbered to those they use: (indptr, indices, data, columns)."""
    sub = features[points]
    columns, local = np.unique(sub.indices, return_inverse=True)
    return sub.indptr.astype(np.int64), local.ravel().astype(np.int64), sub.data.astype(np.float64), columns


class TreeTrainer:
    def __init__(self, features: sp.csr_matrix, relevance: sp.csr_matrix, leaves: list[np.ndarray], config: XRegConfig):
        self.X, self.Y, self.config = features, relevance, config
        self.n_points, self.n_features = features.shape
        self.depth = int(np.log2(len(leaves)))
        self.n_internal = 2 ** self.depth - 1
        self.n_nodes = 2 ** (self.depth + 1) - 1
        self.leaf_indptr = np.concatenate([[0], np.cumsum([len(leaf) for leaf in leaves])]).astype(np.int64)
        self.leaf_labels = np.concatenate(leaves).astype(np.int32)
        leaf_of_label = np.empty(relevance.shape[1], dtype=np.int64)
        leaf_of_label[self.leaf_labels] = np.repeat(np.arange(len(leaves)), np.diff(self.leaf_indptr))
        coo = relevance.tocoo()
        heap_leaf = self.n_internal + leaf_of_label[coo.col]
        self.levels = [_Level(np.zeros(self.n_points, np.int64), np.arange(self.n_points), np.ones(self.n_points))]
        for d in range(1, self.depth + 1):
            node = ((heap_leaf + 1) >> (self.depth - d)) - 1
            self.levels.append(_Level(*_group_max(coo.row.astype(np.int64), node, coo.data, self.n_points)))
        self.reg_bias = np.zeros(self.n_nodes - 1 + len(self.leaf_labels), dtype=np.float32)
        self.node_frac = np.zeros(self.n_nodes, dtype=np.float32)
        self.entries: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # (key, offset, weight)

    def problem(self, g: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The regressors of node ``g``: the points reaching it, their ``s = m_g`` and the
        targets ``z`` of each regressor (its child edges, or its leaf's labels)."""
        d = (g + 1).bit_length() - 1
        points, m = self.levels[d].block(g)
        if d < self.depth:
            targets = np.zeros((2, len(points)))
            for j, child in enumerate((2 * g + 1, 2 * g + 2)):
                child_points, child_m = self.levels[d + 1].block(child)
                where = np.searchsorted(points, child_points)
                targets[j, where] = child_m / m[where]
        else:
            leaf = g - self.n_internal
            labels = self.leaf_labels[self.leaf_indptr[leaf]:self.leaf_indptr[leaf + 1]]
            targets = (self.Y[points][:, labels].toarray() / m[:, None]).T
        return points, m, np.minimum(targets, 1.0)

    def first_regressor(self, g: int) -> int:
        if g < self.n_internal:
            return 2 * g
        return self.n_nodes - 1 + int(self.leaf_indptr[g - self.n_internal])

    def solve_node(self, g: int) -> None:
        """Train the regressors of node ``g`` (nodes are independent: any order, any thread)."""
        c = self.config
        points, m, targets = self.problem(g)
        self.node_frac[g] = len(points) / max(self.n_points, 1)
        if len(points) == 0 or len(targets) == 0:
            return
        scale = c.C * self.n_points / m.sum() if c.cost_scaling == "node" else c.C
        indptr, indices, data, columns = _local(self.X, points)
        targets = np.ascontiguousarray(targets)
        if c.joint and g >= self.n_internal:
            weights = solve_joint(indptr, indices, data, len(columns), scale * m, targets, c.eps, c.max_iter, g)
        else:
            weights = solve_batch(indptr, indices, data, len(columns), scale * m, targets, c.eps, c.max_iter,
                                  c.shrink, c.mirror and g < self.n_internal, c.recheck)
        offset, local = np.nonzero(np.abs(weights[:, :-1]) >= c.prune)
        self.entries.append((g * self.n_features + columns[local].astype(np.int64), offset.astype(np.int32),
                             weights[offset, local].astype(np.float32)))
        first = self.first_regressor(g)
        self.reg_bias[first:first + len(targets)] = weights[:, -1]

    def work(self, g: int) -> int:
        """A cost estimate of node ``g`` for scheduling: its points times its regressors."""
        d = (g + 1).bit_length() - 1
        lo, hi = np.searchsorted(self.levels[d].nodes, [g, g + 1])
        width = 2 if g < self.n_internal else int(np.diff(self.leaf_indptr)[g - self.n_internal])
        return int(hi - lo) * width

    def train(self) -> LabelTree:
        for g in range(self.n_nodes):
            self.solve_node(g)
        return self._tree()

    def _tree(self) -> LabelTree:
        if self.entries:
            key = np.concatenate([e[0] for e in self.entries])
            offset = np.concatenate([e[1] for e in self.entries])
            weight = np.concatenate([e[2] for e in self.entries])
        else:
            key, offset, weight = np.zeros(0, np.int64), np.zeros(0, np.int32), np.zeros(0, np.float32)
        order = np.lexsort((offset, key))
        key, offset, weight = key[order], offset[order], weight[order]
        keys, starts = np.unique(key, return_index=True)
        return LabelTree(depth=self.depth, n_features=self.n_features, leaf_indptr=self.leaf_indptr,
                         leaf_labels=self.leaf_labels, reg_bias=self.reg_bias, keys=keys.astype(np.int64),
                         key_ptr=np.append(starts, len(key)).astype(np.int64), entry_offset=offset,
                         entry_weight=weight, node_frac=self.node_frac)


def fit_tail(features: sp.csr_matrix, relevance: sp.csr_matrix, prune: float) -> TailClassifiers:
    """PfastreXML's tail classifiers (eq. 7): μ_l = the mean of the label's training points."""
    positive = sp.csr_matrix((np.ones(relevance.nnz), relevance.indices, relevance.indptr), shape=relevance.shape)
    counts = np.asarray(positive.sum(axis=0)).ravel()
    means = (sp.diags(np.divide(1.0, counts, out=np.zeros_like(counts), where=counts > 0)) @ (positive.T @ features)).tocsr()
    means.data[np.abs(means.data) < prune] = 0.0
    means.eliminate_zeros()
    means.sort_indices()
    rows = np.repeat(np.arange(means.shape[0], dtype=np.int64), np.diff(means.indptr))
    sq_norm = np.bincount(rows, weights=means.data ** 2, minlength=means.shape[0])
    return TailClassifiers(rows * features.shape[1] + means.indices, means.data.astype(np.float32),
                           sq_norm.astype(np.float32), features.shape[1])


def fit_arrays(features: sp.csr_matrix, relevance: sp.csr_matrix, config: XRegConfig = XRegConfig(),
               progress: Callable[[str], None] | None = None) -> tuple[tuple[LabelTree, ...], TailClassifiers]:
    """Train on tf-idf rows ``(N, D)`` and normalized relevance ``(N, L)`` (CSR)."""
    say = progress or (lambda message: None)
    features = sp.csr_matrix(features, dtype=np.float64)
    features.sort_indices()
    relevance = sp.csr_matrix(relevance, dtype=np.float64)
    vectors = label_vectors(features, relevance)

    if config.threads == 1:
        trees = []
        for t in range(config.trees):
            started = time.perf_counter()
            leaves = build_tree(vectors, config.leaf_size, config.seed + t)
            clustered = time.perf_counter()
            trees.append(TreeTrainer(features, relevance, leaves, config).train())
            say(f"tree {t + 1}/{config.trees}: depth {trees[-1].depth}, {len(trees[-1].entry_weight):,} weights "
                f"(clustering {clustered - started:.1f} s, regressors {time.perf_counter() - clustered:.1f} s)")
        return tuple(trees), fit_tail(features, relevance, config.tail_prune)
    # Every node of every tree is an independent problem: the largest first, on `threads`
    # threads (the solver releases the GIL), so that the threads finish together.
    started = time.perf_counter()
    trainers = [TreeTrainer(features, relevance, build_tree(vectors, config.leaf_size, config.seed + t), config)
                for t in range(config.trees)]
    clustered = time.perf_counter()
    tasks = sorted(((trainer.work(g), t, g) for t, trainer in enumerate(trainers) for g in range(trainer.n_nodes)),
                   reverse=True)
    with ThreadPoolExecutor(config.threads) as pool, task(f"XReg: {len(tasks):,} tree nodes", len(tasks)) as advance:
        for _ in pool.map(lambda job: trainers[job[1]].solve_node(job[2]), tasks):
            advance()
    trees = [trainer._tree() for trainer in trainers]
    say(f"{config.trees} trees on {config.threads} threads: {sum(len(t.entry_weight) for t in trees):,} weights "
        f"(clustering {clustered - started:.1f} s, regressors {time.perf_counter() - clustered:.1f} s)")
    return tuple(trees), fit_tail(features, relevance, config.tail_prune)


def fit(dataset: Dataset, config: XRegConfig = XRegConfig(), progress: Callable[[str], None] | None = None) -> XRegModel:
    """Train on ``dataset.train``: the labels are the categories clicked there."""
    announce_compilation("XReg's training kernels", solve_batch)
    started = time.perf_counter()
    train = dataset.train
    used = np.nonzero(np.bincount(train.pair_category, minlength=len(train.categories)) > 0)[0]
    columns = np.full(len(train.categories), -1, dtype=np.int64)
    columns[used] = np.arange(len(used))
    features = fit_tfidf(train.queries)
    X = featurize(features, train.queries)
    Y = relevance_matrix(train, columns)
    trees, tail = fit_arrays(X, Y, config, progress)
    labels = tuple(train.categories[used])
    model = XRegModel(labels=labels, taxonomy=dataset.taxonomy.subset(list(labels)), features=features,
                      trees=trees, tail=tail, config=asdict(config), metrics={})
    model.metrics.update({
        "train_queries": int(len(train.queries)),
        "train_pairs": int(len(train)),
        "features": features.dimension,
        "weights": int(sum(len(t.entry_weight) for t in trees)),
        "train_seconds": round(time.perf_counter() - started, 2),
    })
    return model
