"""Weighted L2-regularized logistic regression with soft targets, in numba (XReg eq. 5–6).

Each regressor minimizes

    f(w) = ½‖w‖² + Σ_i c_i [z_i log(1 + e^{-u_i}) + (1 − z_i) log(1 + e^{u_i})],   u_i = w·x_i + b

with a regularized bias ``b`` (liblinear's bias feature of value 1, the last entry of ``w``),
per-point costs ``c_i ≥ 0`` and targets ``z_i ∈ [0, 1]``: the same problem as duplicating
point i with label 1 and weight ``c_i z_i`` and with label 0 and weight ``c_i (1 − z_i)``,
which is how scikit-learn's ``LogisticRegression(C=1, fit_intercept=False)`` with
``sample_weight`` states it (``tests/test_xreg.py`` checks the two agree).

The solver is a truncated Newton method: conjugate gradients with a diagonal (Jacobi)
preconditioner on ``(I + Xᵀ D X) d = −g`` (to a relative residual ``min(0.5, sqrt(‖g‖/‖g₀‖))``),
then a backtracking Armijo line search. It stops, like liblinear's primal solver, when
``‖g‖ ≤ tol · max(min(P, N), ε) / (P + N) · ‖g₀‖`` with ``P = Σ c z`` and ``N = Σ c (1 − z)``
the positive and negative weight (liblinear counts positives and negatives): imbalanced
problems, whose first gradient is mostly the bias's, are solved more tightly. All
regressors of a node share its rows and costs. They are solved one after the other: on the
shared 2-core machine, numba's ``prange`` over them cost three times the CPU time.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, inline="always")
def _softplus(u):
    return u + np.log1p(np.exp(-u)) if u > 0 else np.log1p(np.exp(u))


@numba.njit(cache=True, inline="always")
def _sigmoid(u):
    if u >= 0:
        return 1.0 / (1.0 + np.exp(-u))
    e = np.exp(u)
    return e / (1.0 + e)


@numba.njit(cache=True)
def _margins(indptr, indices, data, w, n_feat, out):
    for i in range(len(indptr) - 1):
        total = w[n_feat]
        for p in range(indptr[i], indptr[i + 1]):
            total += data[p] * w[indices[p]]
        out[i] = total


@numba.njit(cache=True)
def _add_transpose(indptr, indices, data, v, n_feat, out):
    """out += X̃ᵀ v (X̃ = X with the bias column of ones)."""
    for i in range(len(indptr) - 1):
        vi = v[i]
        if vi == 0.0:
            continue
        for p in range(indptr[i], indptr[i + 1]):
            out[indices[p]] += data[p] * vi
        out[n_feat] += vi


@numba.njit(cache=True)
def _data_term(u, xd, t, cost, z):
    """Σ_i c_i (softplus(u_i + t xd_i) − z_i (u_i + t xd_i))."""
    f = 0.0
    for i in range(len(u)):
        if cost[i] > 0.0:
            v = u[i] + t * xd[i]
            f += cost[i] * (_softplus(v) - z[i] * v)
    return f


@numba.njit(cache=True)
def solve_one(indptr, indices, data, n_feat, cost, z, tol, max_newton, max_cg, w):
    """One regressor, written into ``w`` (length ``n_feat + 1``, the bias last). Allocates
    only its work vectors, once, so that many can run in parallel threads."""
    n = len(indptr) - 1
    dim = n_feat + 1
    w[:] = 0.0
    u = np.zeros(n)
    residual = np.empty(n)
    curvature = np.empty(n)
    xd = np.zeros(n)
    xp = np.empty(n)
    g = np.empty(dim)
    hp = np.empty(dim)
    diagonal = np.empty(dim)
    d = np.empty(dim)
    r = np.empty(dim)
    p = np.empty(dim)
    positive = 0.0
    negative = 0.0
    for i in range(n):
        positive += cost[i] * z[i]
        negative += cost[i] * (1.0 - z[i])
    if positive + negative > 0.0:
        tol = tol * max(min(positive, negative), 1e-3 * (positive + negative) / max(n, 1)) / (positive + negative)
    f = _data_term(u, xd, 0.0, cost, z)
    g0 = -1.0
    for _ in range(max_newton):
        for i in range(n):
            s = _sigmoid(u[i])
            residual[i] = cost[i] * (s - z[i])
            curvature[i] = cost[i] * s * (1.0 - s)
        for j in range(dim):
            g[j] = w[j]
        _add_transpose(indptr, indices, data, residual, n_feat, g)
        g_norm = np.sqrt(np.dot(g, g))
        if g0 < 0.0:
            g0 = g_norm
        if g_norm <= tol * g0 or g_norm == 0.0:
            break
        # Preconditioned conjugate gradients on H d = -g, H = I + X̃ᵀ D X̃, M = diag(H).
        for j in range(dim):
            diagonal[j] = 1.0
        for i in range(n):
            for q in range(indptr[i], indptr[i + 1]):
                diagonal[indices[q]] += curvature[i] * data[q] * data[q]
            diagonal[n_feat] += curvature[i]
        ry = 0.0
        for j in range(dim):
            d[j] = 0.0
            r[j] = -g[j]
            p[j] = r[j] / diagonal[j]
            ry += r[j] * p[j]
        target = min(0.5, np.sqrt(g_norm / g0)) * g_norm
        for _cg in range(max_cg):
            _margins(indptr, indices, data, p, n_feat, xp)
            for i in range(n):
                xp[i] *= curvature[i]
            for j in range(dim):
                hp[j] = p[j]
            _add_transpose(indptr, indices, data, xp, n_feat, hp)
            php = np.dot(p, hp)
            if php <= 0.0:
                break
            step = ry / php
            rr = 0.0
            for j in range(dim):
                d[j] += step * p[j]
                r[j] -= step * hp[j]
                rr += r[j] * r[j]
            if np.sqrt(rr) <= target:
                break
            ry_new = 0.0
            for j in range(dim):
                ry_new += r[j] * r[j] / diagonal[j]
            beta = ry_new / ry
            for j in range(dim):
                p[j] = r[j] / diagonal[j] + beta * p[j]
            ry = ry_new
        # Backtracking line search (Armijo) on f(w + t d).
        _margins(indptr, indices, data, d, n_feat, xd)  # X̃ d, the bias included
        slope = np.dot(g, d)
        ww, wd, dd = np.dot(w, w), np.dot(w, d), np.dot(d, d)
        t = 1.0
        accepted = False
        for _ls in range(40):
            f_new = 0.5 * (ww + 2.0 * t * wd + t * t * dd) + _data_term(u, xd, t, cost, z)
            if f_new <= 0.5 * ww + f + 1e-4 * t * slope:
                for j in range(dim):
                    w[j] += t * d[j]
                for i in range(n):
                    u[i] += t * xd[i]
                f = f_new - 0.5 * np.dot(w, w)
                accepted = True
                break
            t *= 0.5
        if not accepted:
            break


@numba.njit(cache=True)
def solve_batch(indptr, indices, data, n_feat, cost, targets, tol, max_newton, max_cg):
    """Regressors ``r`` with targets ``targets[r]`` over the same rows and costs:
    ``(R, n_feat + 1)`` weights, the bias last."""
    n_regressors = targets.shape[0]
    out = np.zeros((n_regressors, n_feat + 1))
    for r in range(n_regressors):
        solve_one(indptr, indices, data, n_feat, cost, targets[r], tol, max_newton, max_cg, out[r])
    return out
