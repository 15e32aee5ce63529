"""Weighted L2-regularized logistic regression with soft targets, in numba (XReg eq. 5–6).

Each regressor minimizes

    f(w) = ½‖w‖² + Σ_i c_i [z_i log(1 + e^{-u_i}) + (1 − z_i) log(1 + e^{u_i})],   u_i = w·x_i + b

with a regularized bias ``b`` (liblinear's bias feature of value 1, the last entry of ``w``),
per-point costs ``c_i ≥ 0`` and targets ``z_i ∈ [0, 1]``: the same problem as duplicating
point i with label 1 and weight ``c_i z_i`` and with label 0 and weight ``c_i (1 − z_i)``,
which is how scikit-learn's ``LogisticRegression(C=1, fit_intercept=False)`` with
``sample_weight`` states it (``tests/test_xreg.py`` checks the two agree).

The solver is dual coordinate descent, liblinear's ``solve_l2r_lr_dual`` (the "CDDual"
algorithm XReg §4.2 trains with). All regressors of a node share its rows and costs; they
are solved one after the other (on the shared 2-core machine, numba's ``prange`` over them
cost three times the CPU time).
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True)
def solve_batch(indptr, indices, data, n_feat, cost, targets, eps, max_iter):
    """Regressors ``r`` with targets ``targets[r]`` over the same rows and costs:
    ``(R, n_feat + 1)`` weights, the bias last."""
    n_regressors = targets.shape[0]
    out = np.zeros((n_regressors, n_feat + 1))
    for r in range(n_regressors):
        solve_dual(indptr, indices, data, n_feat, cost, targets[r], eps, max_iter, out[r], r)
    return out


@numba.njit(cache=True)
def solve_dual(indptr, indices, data, n_feat, cost, z, eps, max_iter, w, seed):
    """Dual coordinate descent for the same problem (liblinear's ``solve_l2r_lr_dual``, Yu,
    Huang & Lin 2011, the solver XReg §4.2 uses): point i becomes an instance with label +1
    and bound ``c_i z_i`` and one with label −1 and bound ``c_i (1 − z_i)`` (those with a zero
    bound are left out); each dual variable pair is updated by a 1-d Newton method. Stops when
    the largest projected gradient of an epoch is below ``eps`` (liblinear: 0.1)."""
    n = len(indptr) - 1
    w[:] = 0.0
    count = 0
    for i in range(n):
        count += (cost[i] * z[i] > 0.0) + (cost[i] * (1.0 - z[i]) > 0.0)
    point = np.empty(count, np.int64)
    sign_y = np.empty(count)
    bound = np.empty(count)
    alpha = np.empty(2 * count)
    sq_norm = np.empty(count)
    k = 0
    for i in range(n):
        norm = 1.0  # the bias feature
        for p in range(indptr[i], indptr[i + 1]):
            norm += data[p] * data[p]
        for y, c in ((1.0, cost[i] * z[i]), (-1.0, cost[i] * (1.0 - z[i]))):
            if c > 0.0:
                point[k], sign_y[k], bound[k], sq_norm[k] = i, y, c, norm
                alpha[2 * k] = min(0.001 * c, 1e-8)
                alpha[2 * k + 1] = c - alpha[2 * k]
                for p in range(indptr[i], indptr[i + 1]):
                    w[indices[p]] += y * alpha[2 * k] * data[p]
                w[n_feat] += y * alpha[2 * k]
                k += 1
    np.random.seed(seed)
    order = np.arange(count)
    inner_eps = 1e-2
    inner_min = min(1e-8, eps)
    for _ in range(max_iter):
        np.random.shuffle(order)
        newton_steps = 0
        g_max = 0.0
        for s in range(count):
            k = order[s]
            i, y, c = point[k], sign_y[k], bound[k]
            margin = w[n_feat]
            for p in range(indptr[i], indptr[i + 1]):
                margin += w[indices[p]] * data[p]
            a, b = sq_norm[k], y * margin
            first, second, sign = 2 * k, 2 * k + 1, 1.0
            if 0.5 * a * (alpha[second] - alpha[first]) + b < 0.0:
                first, second, sign = 2 * k + 1, 2 * k, -1.0
            old = alpha[first]
            v = old
            if c - v < 0.5 * c:
                v = 0.1 * v
            gp = a * (v - old) + sign * b + np.log(v / (c - v))
            g_max = max(g_max, abs(gp))
            steps = 0
            while steps <= 100:
                if abs(gp) < inner_eps:
                    break
                gpp = a + c / (c - v) / v
                trial = v - gp / gpp
                v = v * 0.1 if trial <= 0.0 else trial
                gp = a * (v - old) + sign * b + np.log(v / (c - v))
                steps += 1
            newton_steps += steps
            if steps > 0:
                alpha[first] = v
                alpha[second] = c - v
                delta = sign * (v - old) * y
                for p in range(indptr[i], indptr[i + 1]):
                    w[indices[p]] += delta * data[p]
                w[n_feat] += delta
        if g_max < eps:
            break
        if newton_steps <= count // 10:
            inner_eps = max(inner_min, 0.1 * inner_eps)
