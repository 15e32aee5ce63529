"""Weighted L2-regularized logistic regression with soft targets, in numba (XReg eq. 5–6).

Each regressor minimizes

    f(w) = ½‖w‖² + Σ_i c_i [z_i log(1 + e^{-u_i}) + (1 − z_i) log(1 + e^{u_i})],   u_i = w·x_i + b

with a regularized bias ``b`` (liblinear's bias feature of value 1, the last entry of ``w``),
per-point costs ``c_i ≥ 0`` and targets ``z_i ∈ [0, 1]``: the same problem as duplicating
point i with label 1 and weight ``c_i z_i`` and with label 0 and weight ``c_i (1 − z_i)``,
which is how scikit-learn's ``LogisticRegression(C=1, fit_intercept=False)`` with
``sample_weight`` states it (``tests/test_xreg.py`` checks the two agree).

The solver is dual coordinate descent, liblinear's ``solve_l2r_lr_dual`` (the "CDDual"
algorithm XReg §4.2 trains with), with a random permutation of the instances per epoch and
liblinear's stopping rule. All regressors of a node share its rows and costs; they are solved
one after the other. Two additions, both off with their default arguments:

- **shrinking** (``shrink > 0``): an instance whose dual variable falls below ``shrink`` times
  its bound after its update (a point its regressor already classifies with a large margin:
  α = c σ(−y u) at the optimum) leaves the active set, as liblinear's SVM dual solvers shrink
  variables at a bound. Log loss has no exact bound (α never reaches 0), so the rule is a
  heuristic; the shrunk instances rejoin when the active set meets the stopping rule (and
  the solver stops only if the whole set then does) and for the last epoch, so every
  instance is revisited against the final weights.
- **warm start** (``alpha0``): the dual variables of each point's positive and negative
  instance to start from (clipped into their bounds), e.g. the mirror of a sibling edge's
  solution; the weights are rebuilt from them.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True, inline="always")
def solve_one_variable(v, old, a, b, c, sign, gp, log_ratio, inner_eps):
    """Newton steps on one dual variable ``v`` in (0, c) of the log-loss dual (liblinear's
    sub-problem), from gradient ``gp``, until ``|gp| < inner_eps`` or 100 steps: the new ``v``,
    its ``log(v / (c - v))`` and the number of steps taken."""
    steps = 0
    while steps <= 100:
        if abs(gp) < inner_eps:
            break
        gpp = a + c / (c - v) / v
        trial = v - gp / gpp
        v = v * 0.1 if trial <= 0.0 else trial
        log_ratio = np.log(v / (c - v))
        gp = a * (v - old) + sign * b + log_ratio
        steps += 1
    return v, log_ratio, steps


@numba.njit(cache=True, nogil=True)
def solve_batch(indptr, indices, data, n_feat, cost, targets, eps, max_iter, shrink=0.0, mirror=False, recheck=0):
    """Regressors ``r`` with targets ``targets[r]`` over the same rows and costs:
    ``(R, n_feat + 1)`` weights, the bias last. ``mirror``: start regressor r > 0 from the
    mirrored solution of regressor r − 1 (its positives as negatives), which is its exact
    solution when ``targets[r] = 1 − targets[r − 1]`` (a node's two child edges when no point
    goes both ways)."""
    n_regressors = targets.shape[0]
    n = len(indptr) - 1
    out = np.zeros((n_regressors, n_feat + 1))
    alpha_pt = np.zeros((2, n))  # per point: α of its positive and its negative instance
    warm = np.zeros((2, n))
    for r in range(n_regressors):
        use_warm = mirror and r > 0
        if use_warm:
            warm[0, :] = alpha_pt[1]
            warm[1, :] = alpha_pt[0]
        solve_dual(indptr, indices, data, n_feat, cost, targets[r], eps, max_iter, out[r], r, shrink, recheck,
                   use_warm, warm, alpha_pt)
    return out


@numba.njit(cache=True, nogil=True)
def solve_dual(indptr, indices, data, n_feat, cost, z, eps, max_iter, w, seed, shrink=0.0, recheck=0,
               use_warm=False, warm=np.zeros((2, 0)), alpha_out=np.zeros((2, 0))):
    """Dual coordinate descent for the same problem (liblinear's ``solve_l2r_lr_dual``, Yu,
    Huang & Lin 2011, the solver XReg §4.2 uses): point i becomes an instance with label +1
    and bound ``c_i z_i`` and one with label −1 and bound ``c_i (1 − z_i)`` (those with a zero
    bound are left out); each dual variable pair is updated by a 1-d Newton method. Stops when
    the largest projected gradient of an epoch is below ``eps`` (liblinear: 0.1). ``alpha_out``
    (``(2, n)`` or empty) receives each point's final α (positive, negative instance)."""
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
    logit = np.empty(count)  # log(alpha[2k] / alpha[2k + 1]), kept from the last Newton step
    k = 0
    for i in range(n):
        norm = 1.0  # the bias feature
        for p in range(indptr[i], indptr[i + 1]):
            norm += data[p] * data[p]
        for side in range(2):
            y = 1.0 if side == 0 else -1.0
            c = cost[i] * z[i] if side == 0 else cost[i] * (1.0 - z[i])
            if c > 0.0:
                point[k], sign_y[k], bound[k], sq_norm[k] = i, y, c, norm
                a0 = min(0.001 * c, 1e-8)
                if use_warm:
                    a0 = min(max(warm[side, i], a0), c - a0)
                alpha[2 * k] = a0
                alpha[2 * k + 1] = c - alpha[2 * k]
                logit[k] = np.log(alpha[2 * k] / alpha[2 * k + 1])
                for p in range(indptr[i], indptr[i + 1]):
                    w[indices[p]] += y * alpha[2 * k] * data[p]
                w[n_feat] += y * alpha[2 * k]
                k += 1
    np.random.seed(seed)
    order = np.arange(count)
    active = count
    inner_eps = 1e-2
    inner_min = min(1e-8, eps)
    for it in range(max_iter):
        if shrink > 0.0 and (it == max_iter - 1 or (recheck > 0 and it % recheck == 0)):
            active = count  # the last epoch (and every recheck-th) visits every instance
        np.random.shuffle(order[:active])
        epoch_size = active
        newton_steps = 0
        g_max = 0.0
        s = 0
        while s < active:
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
                log_ratio = np.log(v / (c - v))
                gp = a * (v - old) + sign * b + log_ratio
            else:
                log_ratio = sign * logit[k]  # log(v / (c - v)) with v = alpha[first]
                gp = sign * b + log_ratio
            g_max = max(g_max, abs(gp))
            v, log_ratio, steps = solve_one_variable(v, old, a, b, c, sign, gp, log_ratio, inner_eps)
            newton_steps += steps
            if steps > 0:
                alpha[first] = v
                alpha[second] = c - v
                logit[k] = sign * log_ratio
                delta = sign * (v - old) * y
                for p in range(indptr[i], indptr[i + 1]):
                    w[indices[p]] += delta * data[p]
                w[n_feat] += delta
            if shrink > 0.0 and it > 0 and alpha[2 * k] < shrink * c:
                active -= 1
                order[s], order[active] = order[active], order[s]
            else:
                s += 1
        if g_max < eps:
            if active == count:
                break
            active = count
            continue
        if newton_steps <= epoch_size // 10:
            inner_eps = max(inner_min, 0.1 * inner_eps)
    if alpha_out.shape[1] == n:
        alpha_out[:] = 0.0
        for k in range(count):
            alpha_out[0 if sign_y[k] > 0 else 1, point[k]] = alpha[2 * k]


@numba.njit(cache=True, nogil=True)
def solve_joint(indptr, indices, data, n_feat, cost, targets, eps, max_iter, seed, shrink=0.0, recheck=0):
    """The same regressors as :func:`solve_batch`, the same dual coordinate descent for each,
    but visiting the points once per epoch for all of them: a point's margins under every
    regressor are one pass over its features of a ``(features, R)`` weight matrix, and so is
    the update. Regressor r sees its instances in the order of the shared per-epoch random
    permutation of the points (a point's positive instance just before its negative), keeps
    its own inner Newton tolerance and stops on its own by liblinear's rule (largest
    projected gradient of an epoch below ``eps``). Each instance keeps log(α / (c − α)), so an
    instance already at its 1-d optimum costs no logarithm. ``shrink`` and ``recheck`` as in
    :func:`solve_dual`, per (point, regressor) instance; a regressor stops only after an epoch
    over all its instances."""
    n = len(indptr) - 1
    R = targets.shape[0]
    z = np.ascontiguousarray(targets.T)  # (n, R): a point's targets side by side
    W = np.zeros((n_feat + 1, R))
    sq_norm = np.empty(n)
    for i in range(n):
        norm = 1.0
        for p in range(indptr[i], indptr[i + 1]):
            norm += data[p] * data[p]
        sq_norm[i] = norm
    alpha = np.zeros((n, R, 2))  # α of the (positive, negative) instance of (point, regressor)
    logit = np.zeros((n, R, 2))  # log(α / (c − α))
    count = np.zeros(R, np.int64)
    delta = np.zeros(R)
    for i in range(n):
        delta[:] = 0.0
        for r in range(R):
            for side in range(2):
                c = cost[i] * z[i, r] if side == 0 else cost[i] * (1.0 - z[i, r])
                if c > 0.0:
                    a0 = min(0.001 * c, 1e-8)
                    alpha[i, r, side] = a0
                    logit[i, r, side] = np.log(a0 / (c - a0))
                    delta[r] += a0 if side == 0 else -a0
                    count[r] += 1
        for p in range(indptr[i], indptr[i + 1]):
            W[indices[p]] += delta * data[p]
        W[n_feat] += delta
    np.random.seed(seed)
    order = np.arange(n)
    inner_eps = np.full(R, 1e-2)
    inner_min = min(1e-8, eps)
    done = np.zeros(R, np.bool_)
    g_max = np.zeros(R)
    newton = np.zeros(R, np.int64)
    margin = np.zeros(R)
    skip = np.zeros((n, R, 2), np.bool_)
    full = True
    for it in range(max_iter):
        if shrink > 0.0 and (it == max_iter - 1 or (recheck > 0 and it % recheck == 0)):
            full = True
        np.random.shuffle(order)
        g_max[:] = 0.0
        newton[:] = 0
        for s in range(n):
            i = order[s]
            margin[:] = W[n_feat]
            for p in range(indptr[i], indptr[i + 1]):
                margin += W[indices[p]] * data[p]
            a = sq_norm[i]
            any_step = False
            delta[:] = 0.0
            for r in range(R):
                if done[r]:
                    continue
                for side in range(2):
                    c = cost[i] * z[i, r] if side == 0 else cost[i] * (1.0 - z[i, r])
                    if c <= 0.0 or (not full and skip[i, r, side]):
                        continue
                    y = 1.0 if side == 0 else -1.0
                    b = y * (margin[r] + a * delta[r])
                    own = alpha[i, r, side]
                    # the pair (own, c − own): liblinear picks the one whose optimum is below c/2
                    if 0.5 * a * ((c - own) - own) + b < 0.0:
                        old, sign = c - own, -1.0
                    else:
                        old, sign = own, 1.0
                    v = old
                    if c - v < 0.5 * c:
                        v = 0.1 * v
                        log_ratio = np.log(v / (c - v))
                        gp = a * (v - old) + sign * b + log_ratio
                    else:
                        log_ratio = sign * logit[i, r, side]
                        gp = sign * b + log_ratio
                    g_max[r] = max(g_max[r], abs(gp))
                    v, log_ratio, steps = solve_one_variable(v, old, a, b, c, sign, gp, log_ratio, inner_eps[r])
                    newton[r] += steps
                    if steps > 0:
                        alpha[i, r, side] = v if sign > 0 else c - v
                        logit[i, r, side] = sign * log_ratio
                        delta[r] += sign * (v - old) * y
                        any_step = True
                    if shrink > 0.0:
                        skip[i, r, side] = it > 0 and alpha[i, r, side] < shrink * c
            if any_step:
                for p in range(indptr[i], indptr[i + 1]):
                    W[indices[p]] += delta * data[p]
                W[n_feat] += delta
        all_done = True
        was_full, full = full, shrink <= 0.0
        for r in range(R):
            if done[r]:
                continue
            if g_max[r] < eps:
                if was_full:
                    done[r] = True
                    continue
                full = True  # converged on its active instances: check them all
            all_done = False
            if newton[r] <= count[r] // 10:
                inner_eps[r] = max(inner_min, 0.1 * inner_eps[r])
        if all_done:
            break
    return W.T.copy()
