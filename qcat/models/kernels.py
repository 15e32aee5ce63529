"""Compiled kernels of the single-query path (numba, cached on disk).

A search engine classifies one query at a time; the batch path's numpy calls cost tens of
microseconds each whatever the batch size, so one query through it is dominated by call
overhead. These kernels do the same arithmetic as the batch path for one query, in the same
order, so both paths return the same categories and scores (``tests/test_single_query.py``).

Only :meth:`qcat.classifier.Classifier.compile`, the backends' ``predict_one`` and XReg's batch
path on large batches (:data:`qcat.models.xreg.COMPILED_FROM`) import this module: a one-shot
``qcat classify`` never pays for numba.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def top_k(values, k, mask):
    """Positions and values of the k largest ``values`` (only where ``mask``), best first,
    ties to the lower position: :func:`qcat.models.model.top_k` for one row."""
    m = min(k, values.shape[0])
    positions = np.empty(m, np.int64)
    top = np.empty(m, values.dtype)
    size = 0
    for i in range(values.shape[0]):
        if not mask[i]:
            continue
        value = values[i]
        if size == m:
            if m == 0 or not value > top[m - 1]:
                continue
            slot = m - 1
        else:
            slot = size
            size += 1
        while slot > 0 and value > top[slot - 1]:
            top[slot] = top[slot - 1]
            positions[slot] = positions[slot - 1]
            slot -= 1
        top[slot] = value
        positions[slot] = i
    return positions[:size], top[:size]


@njit(cache=True, nogil=True)
def nb_log_scores(feature_ids, feature_indptr, feature_labels, feature_delta, label_log_prior, label_unseen):
    """Unnormalized log P(c | q) of every label: :meth:`qcat.models.nb.NaiveBayesModel.log_scores`."""
    n_labels = label_log_prior.shape[0]
    added = np.zeros(n_labels)
    for f in feature_ids:
        for entry in range(feature_indptr[f], feature_indptr[f + 1]):
            added[feature_labels[entry]] += np.float64(feature_delta[entry])
    count = np.float64(feature_ids.shape[0])
    out = np.empty(n_labels)
    for label in range(n_labels):
        out[label] = (np.float64(label_log_prior[label]) + count * np.float64(label_unseen[label])) + added[label]
    return out


@njit(cache=True, nogil=True)
def log_normalizer(log_scores):
    top = log_scores.max()
    if not np.isfinite(top):
        top = 0.0
    return top + np.log(np.exp(log_scores - top).sum())


@njit(cache=True, nogil=True)
def tfidf_row(feature_ids, idf):
    """A query's sorted unique features and their L2-normalized ``count · idf``:
    :meth:`qcat.models.xreg.TfidfFeatures.transform` for one query."""
    ids = np.sort(feature_ids)
    unique = np.empty(ids.shape[0], np.int64)
    values = np.empty(ids.shape[0])
    n = 0
    for i in range(ids.shape[0]):
        if n > 0 and unique[n - 1] == ids[i]:
            values[n - 1] += 1.0
        else:
            unique[n] = ids[i]
            values[n] = 1.0
            n += 1
    norm = 0.0
    for i in range(n):
        values[i] = values[i] * np.float64(idf[unique[i]])
        norm += values[i] * values[i]
    norm = np.sqrt(norm)
    for i in range(n):
        values[i] = values[i] / norm
    return unique[:n], values[:n]


@njit(cache=True, nogil=True, inline="always")
def _log_sigmoid(u):
    return -np.logaddexp(0.0, -u)


@njit(cache=True, nogil=True, inline="always")
def _sigmoid(u):
    if u >= 0:
        return 1.0 / (1.0 + np.exp(-u))
    e = np.exp(u)
    return e / (1.0 + e)


@njit(cache=True, nogil=True)
def _fill_table(features, values, n_features, keys, key_ptr, entry_offset, entry_weight, feature_ptr, feature_keys, table):
    """``w·x`` of every regressor the query's features reach, in ``table[group, offset]``: a walk
    of each feature's keys (``feature_keys[feature_ptr[f]:feature_ptr[f + 1]]``, by group).
    Each cell adds its terms in the order of :meth:`LabelTree.scores` (feature, then entry)."""
    table[:] = 0.0
    for i in range(features.shape[0]):
        f = features[i]
        for position in feature_keys[feature_ptr[f]:feature_ptr[f + 1]]:
            group = keys[position] // n_features
            for entry in range(key_ptr[position], key_ptr[position + 1]):
                table[group, entry_offset[entry]] += values[i] * np.float64(entry_weight[entry])


@njit(cache=True, nogil=True)
def _group_scores(features, values, group, n_features, keys, group_keys, key_ptr, entry_offset, entry_weight, bias,
                  table, out):
    """``w·x + b`` of the first ``len(out)`` regressors of ``group``: :meth:`LabelTree.scores`.
    From ``table`` when it was filled (``_fill_table``), else by searching the group's keys,
    ``keys[group_keys[group]:group_keys[group + 1]]``, for each feature."""
    width = out.shape[0]
    if table.shape[0] > 0:
        for j in range(width):
            out[j] = table[group, j] + bias[group, j]
        return
    out[:] = 0.0
    low, high = group_keys[group], group_keys[group + 1]
    for i in range(features.shape[0]):
        key = group * n_features + features[i]
        lo, hi = low, high
        while lo < hi:  # first position whose key is >= key (features are sorted: low only grows)
            mid = (lo + hi) >> 1
            if keys[mid] < key:
                lo = mid + 1
            else:
                hi = mid
        low = lo
        if lo < high and keys[lo] == key:
            for entry in range(key_ptr[lo], key_ptr[lo + 1]):
                offset = entry_offset[entry]
                if offset < width:
                    out[offset] += values[i] * np.float64(entry_weight[entry])
    for j in range(width):
        out[j] = out[j] + bias[group, j]


@njit(cache=True, nogil=True)
def xreg_relevance(features, values, first_tree, n_trees, divisor, depth, n_features, keys, group_keys, key_ptr,
                   entry_offset, entry_weight, bias, leaf_indptr, leaf_labels, leaf_width, feature_ptr, feature_keys,
                   whole_table, beam, relevance, reached):
    """Beam search of one query in trees ``first_tree`` .. ``first_tree + n_trees - 1`` of a
    (stacked) tree array set, adding ``exp(log p) / divisor`` of every label a beam reaches to
    ``relevance`` and marking it in ``reached``: :meth:`LabelTree.beam_search` and
    :meth:`XRegModel.relevance` for one query. With ``whole_table`` (small trees), the query's
    scores are computed for every group at once, feature by feature; else group by group as the
    beams reach them. A leaf label's probability is taken as
    ``exp(log p(leaf)) · σ(s)``, one exponential instead of three (equal to rounding)."""
    n_internal = 2 ** depth - 1
    n_nodes = 2 ** (depth + 1) - 1
    n_leaves = 2 ** depth
    pair = np.empty(2)
    leaf_scores = np.empty(leaf_width)
    table = np.zeros(bias.shape if whole_table else (0, 0))
    if whole_table:
        _fill_table(features, values, n_features, keys, key_ptr, entry_offset, entry_weight, feature_ptr, feature_keys, table)
    for tree in range(first_tree, first_tree + n_trees):
        nodes = np.zeros(1, np.int64)
        logp = np.zeros(1)
        for _ in range(depth):
            candidates = np.full(2 * nodes.shape[0], -np.inf)
            candidate_nodes = np.zeros(2 * nodes.shape[0], np.int64)
            for b in range(nodes.shape[0]):
                if not np.isfinite(logp[b]):
                    continue
                _group_scores(features, values, tree * n_nodes + nodes[b], n_features, keys, group_keys, key_ptr,
                              entry_offset, entry_weight, bias, table, pair)
                for j in range(2):
                    candidates[2 * b + j] = logp[b] + _log_sigmoid(pair[j])
                    candidate_nodes[2 * b + j] = 2 * nodes[b] + 1 + j
            keep = np.argsort(-candidates, kind="mergesort")[:beam]
            logp = candidates[keep]
            nodes = candidate_nodes[keep]
        for b in range(nodes.shape[0]):
            if not np.isfinite(logp[b]):
                continue
            _group_scores(features, values, tree * n_nodes + nodes[b], n_features, keys, group_keys, key_ptr,
                          entry_offset, entry_weight, bias, table, leaf_scores)
            leaf = tree * n_leaves + nodes[b] - n_internal
            leaf_p = np.exp(logp[b]) / divisor
            for slot in range(leaf_indptr[leaf + 1] - leaf_indptr[leaf]):
                label = leaf_labels[leaf_indptr[leaf] + slot]
                relevance[label] += leaf_p * _sigmoid(leaf_scores[slot])
                reached[label] = True


@njit(cache=True, nogil=True)
def xreg_relevance_rows(indptr, indices, data, first_tree, n_trees, divisor, depth, n_features, keys, group_keys,
                        key_ptr, entry_offset, entry_weight, bias, leaf_indptr, leaf_labels, leaf_width, feature_ptr,
                        feature_keys, whole_table, beam, relevance, reached):
    """:func:`xreg_relevance` for each CSR row ``r`` (features sorted), into ``relevance[r]`` and
    ``reached[r]``: the batch path of :meth:`qcat.models.xreg.XRegModel.top_relevance`."""
    for r in range(indptr.shape[0] - 1):
        start, stop = indptr[r], indptr[r + 1]
        xreg_relevance(indices[start:stop], data[start:stop], first_tree, n_trees, divisor, depth, n_features, keys,
                       group_keys, key_ptr, entry_offset, entry_weight, bias, leaf_indptr, leaf_labels, leaf_width,
                       feature_ptr, feature_keys, whole_table, beam, relevance[r], reached[r])


@njit(cache=True, nogil=True)
def top_k_rows(values, mask, labels, scores):
    """:func:`top_k` of each row of ``values`` (only where ``mask``) into ``labels`` and
    ``scores`` (as wide as k; left as they are past what a row has)."""
    for r in range(values.shape[0]):
        positions, top = top_k(values[r], labels.shape[1], mask[r])
        for j in range(positions.shape[0]):
            labels[r, j] = positions[j]
            scores[r, j] = top[j]


@njit(cache=True, nogil=True)
def blend_top_k(labels, weighted_scores, n_labels, k):
    """Top-k of the summed ``weighted_scores`` per label (the parts' top categories, already in
    the model's label positions and multiplied by each part's weight; ``-1`` pads), ties to the
    lower label: :meth:`HybridModel._blend` for one query."""
    total = np.zeros(n_labels)
    present = np.zeros(n_labels, np.bool_)
    for i in range(labels.shape[0]):
        if labels[i] >= 0:
            total[labels[i]] += weighted_scores[i]
            present[labels[i]] = True
    return top_k(total, k, present)


@njit(cache=True, nogil=True)
def calibrate_row(labels, scores, x, y, raw_share):
    """:meth:`qcat.models.calibration.Calibration.calibrate` of one row's float32 scores, in place
    (0 where there is no category), with numpy's float32 arithmetic for the raw share."""
    share = np.float32(raw_share)
    for i in range(scores.shape[0]):
        if labels[i] < 0:
            scores[i] = 0.0
        else:
            mapped = np.interp(np.float64(scores[i]), x, y)
            scores[i] = np.float32((1.0 - raw_share) * mapped + np.float64(share * scores[i]))


@njit(cache=True, nogil=True)
def node_chain(labels, scores, top, ancestors, node_depth, parents, knots_x, knots_y, knot_start, knot_end, floor):
    """:meth:`qcat.models.calibration.nodes.NodeCalibration.chain` of one query: its top ``top``
    leaves' mass summed up the tree, the depth maps (depth d's knots are
    ``knots_*[knot_start[d]:knot_end[d]]``), probabilities nested, and the path down from the root
    through the most probable child at each depth (ties: the heavier, then the first), with each
    node's probability."""
    max_depth = ancestors.shape[1]
    best = np.full(max_depth, -1, np.int64)
    best_probability = np.zeros(max_depth)
    n = min(top, labels.shape[0])
    total = 0.0
    for i in range(n):
        if labels[i] >= 0 and scores[i] > 0:
            total += np.float64(scores[i])
    if total <= 0:
        return best, best_probability
    denominator = max(total, floor)
    entry_node = np.empty(n * max_depth, np.int64)
    entry_weight = np.empty(n * max_depth)
    count = 0
    for i in range(n):
        if labels[i] < 0 or not scores[i] > 0:
            continue
        weight = np.float64(scores[i]) / denominator
        for d in range(max_depth):
            node = ancestors[labels[i], d]
            if node < 0:
                break
            entry_node[count] = node
            entry_weight[count] = weight
            count += 1
    order = np.argsort(entry_node[:count], kind="mergesort")  # stable: each node's weights add in order
    nodes = np.empty(count, np.int64)
    mass = np.zeros(count)
    size = 0
    for j in range(count):
        node = entry_node[order[j]]
        if size == 0 or nodes[size - 1] != node:
            nodes[size] = node
            size += 1
        mass[size - 1] += entry_weight[order[j]]
    probability = np.empty(size)
    for j in range(size):
        d = node_depth[nodes[j]]
        start, end = knot_start[d], knot_end[d]
        probability[j] = np.interp(mass[j], knots_x[start:end], knots_y[start:end])
    for d in range(max_depth, 1, -1):
        for j in range(size):
            if node_depth[nodes[j]] == d:
                parent = np.searchsorted(nodes[:size], parents[nodes[j]])
                if probability[j] > probability[parent]:
                    probability[parent] = probability[j]
    current = -1
    for d in range(1, max_depth + 1):
        pick = -1
        for j in range(size):
            if node_depth[nodes[j]] != d or parents[nodes[j]] != current:
                continue
            if (pick < 0 or probability[j] > probability[pick]
                    or (probability[j] == probability[pick] and mass[j] > mass[pick])):
                pick = j
        if pick < 0:
            break
        current = nodes[pick]
        best[d - 1], best_probability[d - 1] = current, probability[pick]
    return best, best_probability
