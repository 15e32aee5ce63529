"""XReg training-speed ablation (issue 15; docs/benchmarks.md "Training speed").

Whole model: train XReg on the bench's demo-corpus rows under each ``XRegConfig`` override
given as JSON, back to back in one process, and print wall and CPU seconds, P@1, XMAD@5 (CTR)
and nDCG@5 of XReg (no re-ranking) on the test split with the load average:

    python benchmarks/ablation_xreg_training.py model '{}' '{"joint": false, "shrink": 0}' '{"threads": 2}'

Single nodes: solve chosen nodes of tree 0 with each solver variant (keys ``joint``, ``shrink``,
``recheck``, ``mirror``, ``it`` (epochs), ``eps``) and print CPU seconds and each regressor's
primal objective above the optimum (300 epochs of the plain solver), mean and max:

    python benchmarks/ablation_xreg_training.py nodes 0,3,7 '{}' '{"joint": 1}' '{"shrink": 0.01, "recheck": 5}'
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import asdict

import numpy as np
import scipy.sparse as sp


def model(specs: list[str]) -> None:
    from benchmarks.bench_xreg import K, Problem
    from qcat.models.xreg import XRegModel
    from qcat.training.xreg.features import from_csr
    from qcat.training.xreg.trainer import XRegConfig, fit_arrays

    problem = Problem()
    fit_arrays(problem.X_train[:3000], problem.Y_train[:3000], XRegConfig(trees=2, threads=2))  # compile
    rows = from_csr(problem.X_test)
    for spec in specs:
        config = XRegConfig(**json.loads(spec))
        started, cpu = time.perf_counter(), time.process_time()
        trees, tail = fit_arrays(problem.X_train, problem.Y_train, config)
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
        xreg = XRegModel(tuple(problem.label_ids), problem.dataset.taxonomy.subset(problem.label_ids), problem.features,
                         trees, tail, config=asdict(config), metrics={})
        r = problem.score(*xreg.with_options(rerank=False).predict_rows(rows, K))
        print(f"{spec}  train {wall:.1f} s wall, {cpu:.1f} s CPU  P@1 {r['P@1']:.4f}  XMAD@5 (CTR) "
              f"{r['XMAD@5 (CTR)']:.4f}  nDCG@5 {r['nDCG@5']:.4f}  load {os.getloadavg()[0]:.2f}", flush=True)


def _primal(indptr, indices, data, n_feat, cost, targets, weights) -> np.ndarray:
    A = sp.csr_matrix((data, indices, indptr), shape=(len(indptr) - 1, n_feat))
    u = A @ weights[:, :-1].T + weights[:, -1]
    loss = cost[:, None] * (targets.T * np.logaddexp(0, -u) + (1 - targets.T) * np.logaddexp(0, u))
    return 0.5 * (weights ** 2).sum(axis=1) + loss.sum(axis=0)


def nodes(which: str, specs: list[str]) -> None:
    from benchmarks.bench_xreg import Problem
    from qcat.training.xreg.solver import solve_batch, solve_joint
    from qcat.training.xreg.trainer import TreeTrainer, XRegConfig, _local
    from qcat.training.xreg.tree import build_tree, label_vectors

    problem = Problem()
    X = sp.csr_matrix(problem.X_train, dtype=np.float64)
    X.sort_indices()
    Y = sp.csr_matrix(problem.Y_train, dtype=np.float64)
    config = XRegConfig()
    trainer = TreeTrainer(X, Y, build_tree(label_vectors(X, Y), config.leaf_size, config.seed), config)
    for g in map(int, which.split(",")):
        points, m, targets = trainer.problem(g)
        indptr, indices, data, columns = _local(X, points)
        args = (indptr, indices, data, len(columns), config.C * trainer.n_points / m.sum() * m,
                np.ascontiguousarray(targets))
        best = _primal(*args, solve_batch(*args, 0.1, 300))
        for spec in specs:
            v = json.loads(spec)
            eps, epochs, shrink, recheck = v.get("eps", 0.1), v.get("it", 20), v.get("shrink", 0.0), v.get("recheck", 0)
            cpu = time.process_time()
            if v.get("joint"):
                weights = solve_joint(*args, eps, epochs, 0, shrink, recheck)
            else:
                weights = solve_batch(*args, eps, epochs, shrink, bool(v.get("mirror")), recheck)
            cpu = time.process_time() - cpu
            excess = (_primal(*args, weights) - best) / best
            print(f"node {g} ({len(points):,} points x {len(targets)}) {spec}: {cpu:.2f} s CPU, objective above "
                  f"the optimum: mean {excess.mean():.2e}, max {excess.max():.2e}", flush=True)


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    if len(sys.argv) < 3 or sys.argv[1] not in ("model", "nodes"):
        sys.exit(__doc__)
    if sys.argv[1] == "model":
        model(sys.argv[2:])
    else:
        nodes(sys.argv[2], sys.argv[3:])
