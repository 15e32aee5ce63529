"""Weighted L2-regularized logistic regression with soft targets, in numba (XReg eq. 5–6).

Each regressor minimizes

    f(w) = ½‖w‖² + Σ_i c_i [z_i log(1 + e^{-u_i}) + (1 − z_i) log(1 + e^{u_i})],   u_i = w·x_i + b

with a regularized bias ``b`` (liblinear's bias feature of value 1, the last entry of ``w``),
per-point costs ``c_i ≥ 0`` and targets ``z_i ∈ [0, 1]``: the same problem as duplicating
point i with label 1 and weight ``c_i z_i`` and with label 0 and weight ``c_i (1 − z_i)``,
which is how scikit-learn's ``LogisticRegression(C=1, fit_intercept=False)`` with
``sample_weight`` states it (``tests/test_xreg.py`` checks the two agree).

The solver is a truncated Newton method: conjugate gradients on ``(I + Xᵀ D X) d = −g``
(to a relative residual ``min(0.5, sqrt(‖g‖/‖g₀‖))``), then a backtracking Armijo line search;
it stops when ``‖g‖ ≤ tol · ‖g₀‖``. All regressors of a node share its rows and costs and are
solved in parallel (``prange``).
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
def _objective(w, u, cost, z):
    f = 0.5 * np.dot(w, w)
    for i in range(len(u)):
        if cost[i] > 0.0:
            f += cost[i] * (_softplus(u[i]) - z[i] * u[i])
    return f


@numba.njit(cache=True)
def solve_one(indptr, indices, data, n_feat, cost, z, tol, max_newton, max_cg):
    """One regressor: returns ``w`` of length ``n_feat + 1`` (the bias last)."""
    n = len(indptr) - 1
    dim = n_feat + 1
    w = np.zeros(dim)
    u = np.zeros(n)
    g = np.zeros(dim)
    residual = np.empty(n)
    curvature = np.empty(n)
    xd = np.empty(n)
    xp = np.empty(n)
    hp = np.zeros(dim)
    g0 = -1.0
    f = _objective(w, u, cost, z)
    for _ in range(max_newton):
        for i in range(n):
            s = _sigmoid(u[i])
            residual[i] = cost[i] * (s - z[i])
            curvature[i] = cost[i] * s * (1.0 - s)
        g[:] = w
        _add_transpose(indptr, indices, data, residual, n_feat, g)
        g_norm = np.sqrt(np.dot(g, g))
        if g0 < 0.0:
            g0 = g_norm
        if g_norm <= tol * g0 or g_norm == 0.0:
            break
        # Conjugate gradients on H d = -g, H = I + X̃ᵀ D X̃.
        d = np.zeros(dim)
        r = -g.copy()
        p = r.copy()
        rr = np.dot(r, r)
        target = min(0.5, np.sqrt(g_norm / g0)) * g_norm
        for _cg in range(max_cg):
            _margins(indptr, indices, data, p, n_feat, xp)
            for i in range(n):
                xp[i] *= curvature[i]
            hp[:] = p
            _add_transpose(indptr, indices, data, xp, n_feat, hp)
            php = np.dot(p, hp)
            if php <= 0.0:
                break
            step = rr / php
            d += step * p
            r -= step * hp
            rr_new = np.dot(r, r)
            if np.sqrt(rr_new) <= target:
                break
            p = r + (rr_new / rr) * p
            rr = rr_new
        # Backtracking line search (Armijo).
        _margins(indptr, indices, data, d, n_feat, xd)  # X̃ d, the bias included
        slope = np.dot(g, d)
        t = 1.0
        accepted = False
        for _ls in range(40):
            w_new = w + t * d
            u_new = u + t * xd
            f_new = _objective(w_new, u_new, cost, z)
            if f_new <= f + 1e-4 * t * slope:
                w, u, f = w_new, u_new, f_new
                accepted = True
                break
            t *= 0.5
        if not accepted:
            break
    return w


@numba.njit(cache=True, parallel=True)
def solve_batch(indptr, indices, data, n_feat, cost, targets, tol, max_newton, max_cg):
    """Regressors ``r`` with targets ``targets[r]`` over the same rows and costs:
    ``(R, n_feat + 1)`` weights, the bias last."""
    n_regressors = targets.shape[0]
    out = np.zeros((n_regressors, n_feat + 1))
    for r in numba.prange(n_regressors):
        out[r] = solve_one(indptr, indices, data, n_feat, cost, targets[r], tol, max_newton, max_cg)
    return out
