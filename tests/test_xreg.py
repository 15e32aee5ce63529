"""XReg: tree balance, regressor weighting, the solver against scikit-learn, beam search and
labelwise inference against brute force, bundles (round trip, tampering, inconsistent arrays)."""

import itertools
import json
import math
import shutil

import numpy as np
import pytest
import scipy.sparse as sp

from qcat.errors import BundleError
from qcat.models.label_tree import LabelTree
from qcat.models.sparse_rows import Rows
from qcat.models.xreg import XRegModel
from qcat.training.xreg.features import from_csr
from qcat.training.xreg.solver import solve_batch, solve_joint
from qcat.training.xreg.synthetic import generate
from qcat.training.xreg.trainer import TreeTrainer, XRegConfig, fit_arrays
from qcat.training.xreg.tree import build_tree, label_vectors, tree_depth

CONFIG = XRegConfig(trees=2, leaf_size=4, beam=3, eps=1e-3, max_iter=200, prune=0.0)


@pytest.fixture(scope="module")
def small():
    """A generated problem (300 points, 23 labels) and the trees trained on it."""
    X, Y = generate(300, 23, 60, seed=3, topics=4)
    trees, tail = fit_arrays(X, Y, CONFIG)
    return X, Y, trees, tail


def model_of(trees, tail, n_labels, n_features, **config) -> XRegModel:
    from qcat.models.xreg import TfidfFeatures
    from qcat.taxonomy import from_paths

    taxonomy = from_paths([f"Root > L{i}" for i in range(n_labels)])
    labels = tuple(taxonomy.id_of_path(f"Root > L{i}") for i in range(n_labels))
    features = TfidfFeatures(tuple(f"f{j}" for j in range(n_features)), np.ones(n_features, np.float32))
    return XRegModel(labels=labels, taxonomy=taxonomy, features=features, trees=tuple(trees), tail=tail,
                     config={"beam": 3} | config, metrics={})


def path_log_probabilities(tree: LabelTree, rows: Rows) -> np.ndarray:
    """Exhaustive scoring: log P(label) for every (query, label) as the sum over its path."""
    n = rows.n
    node_logp = np.zeros((n, tree.n_nodes))
    queries = np.arange(n)
    for g in range(tree.n_internal):
        s = tree.scores(rows, queries, np.full(n, g), 2)
        for j in (0, 1):
            node_logp[:, 2 * g + 1 + j] = node_logp[:, g] - np.logaddexp(0, -s[:, j])
    n_labels = int(tree.leaf_labels.max()) + 1
    out = np.full((n, n_labels), -np.inf)
    for leaf in range(tree.n_leaves):
        g = tree.n_internal + leaf
        width = int(tree.leaf_indptr[leaf + 1] - tree.leaf_indptr[leaf])
        if width == 0:
            continue
        s = tree.scores(rows, queries, np.full(n, g), width)
        labels = tree.leaf_labels[tree.leaf_indptr[leaf]:tree.leaf_indptr[leaf + 1]]
        out[:, labels] = node_logp[:, [g]] - np.logaddexp(0, -s)
    return out


# -- trees -------------------------------------------------------------------------------


def test_tree_is_balanced_complete_and_covers_every_label_once():
    X, Y = generate(500, 37, 80, seed=1)
    vectors = label_vectors(X, Y)
    assert np.allclose(sp.linalg.norm(vectors, axis=1)[np.diff(vectors.indptr) > 0], 1.0)
    leaves = build_tree(vectors, leaf_size=5, seed=0)
    assert tree_depth(37, 5) == 3 and len(leaves) == 8
    sizes = [len(leaf) for leaf in leaves]
    assert max(sizes) <= 5 and max(sizes) - min(sizes) <= 1
    assert sorted(np.concatenate(leaves).tolist()) == list(range(37))
    # Every internal node splits its labels into halves of sizes ceil/floor.
    level = leaves
    while len(level) > 1:
        pairs = [(level[i], level[i + 1]) for i in range(0, len(level), 2)]
        assert all(len(a) - len(b) in (0, 1) for a, b in pairs)
        level = [np.concatenate(p) for p in pairs]
    assert build_tree(vectors, 5, seed=0)[0].tolist() == leaves[0].tolist()  # seeded
    assert [leaf.tolist() for leaf in build_tree(vectors, 5, seed=1)] != [leaf.tolist() for leaf in leaves]


def test_similar_labels_share_a_leaf():
    # Labels 0-3 live on features 0-9, labels 4-7 on features 10-19.
    X, Y = generate(400, 8, 20, seed=2, topics=2, prototype=4)
    vectors = label_vectors(X, Y)
    cosine = (vectors @ vectors.T).toarray()
    leaves = build_tree(vectors, leaf_size=4, seed=0)
    within = np.mean([cosine[a, b] for leaf in leaves for a, b in itertools.combinations(leaf, 2)])
    assert within > cosine[np.triu_indices(8, 1)].mean()


# -- regressors ----------------------------------------------------------------------------


def test_regressor_targets_and_weights_on_a_hand_made_case():
    # 4 labels, leaves {0, 1} and {2, 3} (depth 1). Point 0: y0 = 0.8, y2 = 0.2;
    # point 1: y1 = 0.5; point 2: y3 = 1.0.
    Y = sp.csr_matrix(np.array([[0.8, 0, 0.2, 0], [0, 0.5, 0, 0], [0, 0, 0, 1.0]]))
    X = sp.identity(3, format="csr")
    trainer = TreeTrainer(X, Y, [np.array([0, 1]), np.array([2, 3])], XRegConfig(leaf_size=2))
    points, s, z = trainer.problem(0)  # root: every point, s = 1, z = max relevance in the child
    assert points.tolist() == [0, 1, 2] and s.tolist() == [1, 1, 1]
    np.testing.assert_allclose(z, [[0.8, 0.5, 0.0], [0.2, 0.0, 1.0]])
    points, s, z = trainer.problem(1)  # leaf {0, 1}: points 0 and 1, s = m = 0.8 and 0.5
    assert points.tolist() == [0, 1]
    np.testing.assert_allclose(s, [0.8, 0.5])
    np.testing.assert_allclose(z, [[1.0, 0.0], [0.0, 1.0]])
    points, s, z = trainer.problem(2)  # leaf {2, 3}: points 0 and 2, s = 0.2 and 1
    assert points.tolist() == [0, 2]
    np.testing.assert_allclose(s, [0.2, 1.0])
    np.testing.assert_allclose(z, [[1.0, 0.0], [0.0, 1.0]])
    # Weights s·z and s·(1 − z): the products along each label's path give back y.
    for label, (point, y) in {0: (0, 0.8), 2: (0, 0.2), 3: (2, 1.0)}.items():
        leaf = 1 if label < 2 else 2
        root_z = trainer.problem(0)[2][leaf - 1][point]
        pts, _, leaf_z = trainer.problem(leaf)
        assert root_z * leaf_z[label % 2][list(pts).index(point)] == pytest.approx(y)


@pytest.mark.slow
def test_dual_solver_matches_scikit_learn():
    linear_model = pytest.importorskip("sklearn.linear_model")
    rng = np.random.default_rng(0)
    n, d = 400, 30
    X = sp.random(n, d, density=0.15, random_state=4, format="csr")
    z = np.where(rng.random(n) < 0.4, rng.random(n), 0.0)
    z[:20] = 1.0
    cost = 10.0 * rng.random(n)
    weights = solve_batch(X.indptr.astype(np.int64), X.indices.astype(np.int64), X.data, d, cost, z[None, :],
                          1e-10, 10000)[0]
    # The same problem as duplicated points with weights c·z (label 1) and c·(1 - z) (label 0),
    # the bias a regularized feature of value 1.
    Xb = sp.hstack([X, np.ones((n, 1))]).tocsr()
    reference = linear_model.LogisticRegression(C=1.0, fit_intercept=False, tol=1e-12, max_iter=10000).fit(
        sp.vstack([Xb, Xb]), np.r_[np.ones(n), np.zeros(n)], sample_weight=np.r_[cost * z, cost * (1 - z)])
    np.testing.assert_allclose(weights, reference.coef_[0], atol=1e-5)


def _random_problem(n=600, d=40, regressors=5, seed=0):
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=0.12, random_state=seed, format="csr")
    X.sort_indices()
    targets = np.where(rng.random((regressors, n)) < 0.3, rng.random((regressors, n)), 0.0)
    targets[:, :15] = 1.0
    targets[0, :] = 0.0  # a regressor with negatives only
    cost = 30.0 * rng.random(n)
    return X.indptr.astype(np.int64), X.indices.astype(np.int64), X.data, d, cost, targets


def _objective(X, cost, targets, weights):
    """The primal objective of each regressor (the module docstring's f(w))."""
    u = X @ weights[:, :-1].T + weights[:, -1]
    loss = cost[:, None] * (targets.T * np.logaddexp(0, -u) + (1 - targets.T) * np.logaddexp(0, u))
    return 0.5 * (weights ** 2).sum(axis=1) + loss.sum(axis=0)


@pytest.mark.slow
def test_shrinking_and_the_joint_solver_reach_the_plain_solvers_optimum():
    indptr, indices, data, d, cost, targets = _random_problem()
    X = sp.csr_matrix((data, indices, indptr), shape=(len(indptr) - 1, d))
    plain = solve_batch(indptr, indices, data, d, cost, targets, 1e-6, 5000)
    for shrink, recheck in ((0.01, 0), (0.01, 5), (0.1, 3)):
        shrunk = solve_batch(indptr, indices, data, d, cost, targets, 1e-6, 5000, shrink, False, recheck)
        np.testing.assert_allclose(shrunk, plain, atol=1e-4)
    joint = solve_joint(indptr, indices, data, d, cost, targets, 1e-6, 5000, 0)
    np.testing.assert_allclose(joint, plain, atol=1e-4)
    np.testing.assert_allclose(solve_joint(indptr, indices, data, d, cost, targets, 1e-6, 5000, 0, 0.01, 5), plain,
                               atol=1e-4)
    # A warm start from the mirrored first edge reaches the same optimum too.
    pair = np.vstack([targets[1], 1.0 - targets[1]])
    np.testing.assert_allclose(solve_batch(indptr, indices, data, d, cost, pair, 1e-6, 5000, 0.0, True),
                               solve_batch(indptr, indices, data, d, cost, pair, 1e-6, 5000), atol=1e-4)
    # Under a budget of epochs (the training default), the joint solver is no worse than the
    # plain one, and shrinking with rechecks stays close.
    budget = {"plain": solve_batch(indptr, indices, data, d, cost, targets, 0.1, 20),
              "shrink": solve_batch(indptr, indices, data, d, cost, targets, 0.1, 20, 0.01, False, 5),
              "joint": solve_joint(indptr, indices, data, d, cost, targets, 0.1, 20, 0)}
    best = _objective(X, cost, targets, plain)
    excess = {name: (_objective(X, cost, targets, w) - best) / best for name, w in budget.items()}
    assert excess["joint"].max() <= excess["plain"].max() + 1e-3
    assert excess["shrink"].max() <= excess["plain"].max() + 1e-2


def test_threads_train_the_same_trees():
    X, Y = generate(400, 19, 50, seed=5, topics=3)
    one, _ = fit_arrays(X, Y, CONFIG)
    two, _ = fit_arrays(X, Y, XRegConfig(**{**CONFIG.__dict__, "threads": 2}))
    for a, b in zip(one, two):
        for field in ("keys", "key_ptr", "entry_offset", "entry_weight", "reg_bias", "node_frac"):
            np.testing.assert_array_equal(getattr(a, field), getattr(b, field))


# -- inference -----------------------------------------------------------------------------


def test_beam_search_equals_exhaustive_scoring_when_the_beam_is_large(small):
    X, Y, trees, tail = small
    rows = from_csr(X[:60])
    exhaustive = np.mean([np.exp(path_log_probabilities(t, rows)) for t in trees], axis=0)
    model = model_of(trees, tail, Y.shape[1], X.shape[1], beam=max(t.n_leaves for t in trees))
    query, label, relevance = model.relevance(rows)
    found = np.zeros_like(exhaustive)
    found[query, label] = relevance
    np.testing.assert_allclose(found, exhaustive, rtol=1e-9, atol=1e-12)
    labels, scores = model.predict_rows(rows, 5)
    np.testing.assert_allclose(scores, -np.sort(-exhaustive, axis=1)[:, :5], rtol=1e-6)
    # A narrow beam keeps the P best nodes per level: its labels are a subset, scored the same.
    narrow = model.with_options(beam=1)
    query, label, relevance = narrow.relevance(rows)
    assert len(query) < len(np.nonzero(exhaustive)[0])
    per_tree = [np.exp(path_log_probabilities(t, rows)) for t in trees]
    for q, l, r in zip(query, label, relevance):
        reached = [t for t in range(len(trees)) if _in_greedy_leaf(trees[t], rows, q, l)]
        assert r == pytest.approx(sum(per_tree[t][q, l] for t in reached) / len(trees))


def test_stacked_trees_search_exactly_like_each_tree(small):
    """One beam search over the stacked ensemble gives, bit for bit, the per-tree results."""
    X, Y, trees, tail = small
    rows = from_csr(X[:80])
    stacked = LabelTree.stacked(trees)
    tiled = rows.take(np.tile(np.arange(rows.n), len(trees)))
    for beam in (1, 2, 3):
        query, label, logp = stacked.beam_search(tiled, beam, np.repeat(np.arange(len(trees)), rows.n))
        per_tree = [tree.beam_search(rows, beam) for tree in trees]
        np.testing.assert_array_equal(query % rows.n, np.concatenate([f[0] for f in per_tree]))
        np.testing.assert_array_equal(label, np.concatenate([f[1] for f in per_tree]))
        np.testing.assert_array_equal(logp, np.concatenate([f[2] for f in per_tree]))
    assert model_of(trees, tail, Y.shape[1], X.shape[1])._stacked is not None


@pytest.mark.parametrize("sparse_top", [False, True])
def test_the_compiled_batch_path_answers_as_the_numpy_path(small, sparse_top):
    """Large batches are searched by the single-query kernels, row by row: the same labels and
    scores as numpy's search, for each beam and both the dense and the sparse ranking."""
    X, Y, trees, tail = small
    rows = from_csr(X[:200])
    for options in ({"beam": 1}, {"beam": 3}, {"beam": 64}):
        model = model_of(trees, tail, Y.shape[1], X.shape[1]).with_options(**options)
        model.__dict__["_sparse_top"] = sparse_top  # which ranking the model's size would choose
        for k in (1, 5, Y.shape[1] + 3):
            numpy_labels, numpy_scores = model.top_relevance(rows, k, compiled=False)
            labels, scores = model.top_relevance(rows, k, compiled=True)
            np.testing.assert_array_equal(labels, numpy_labels)
            np.testing.assert_array_equal(scores, numpy_scores)
        assert (labels >= 0).sum() > rows.n  # more than one label a row: the ranking is compared


def _in_greedy_leaf(tree, rows, q, label):
    node = 0
    for _ in range(tree.depth):
        s = tree.scores(rows, np.array([q]), np.array([node]), 2)[0]
        node = 2 * node + 1 + int(s[1] > s[0])
    leaf = node - tree.n_internal
    return label in tree.leaf_labels[tree.leaf_indptr[leaf]:tree.leaf_indptr[leaf + 1]]


def algorithm_1(tree: LabelTree, rows: Rows, factor: float) -> dict[int, dict[int, float]]:
    """Algorithm 1 as printed: breadth-first over every node, point by point."""
    n = rows.n
    points = {0: {i: 1.0 for i in range(n)}}
    predictions = {}
    for g in range(tree.n_nodes):
        here = points.get(g, {})
        ids = np.array(sorted(here), dtype=np.int64)
        if g < tree.n_internal:
            for j, child in enumerate((2 * g + 1, 2 * g + 2)):
                z = {}
                for i in ids:
                    s = tree.scores(rows, np.array([i]), np.array([g]), 2)[0, j]
                    z[int(i)] = here[int(i)] / (1 + math.exp(-s))
                keep = math.ceil(factor * float(tree.node_frac[child]) * n)
                ranked = sorted(z, key=lambda i: (-z[i], i))[:keep]
                points[child] = {i: z[i] for i in ranked}
        else:
            leaf = g - tree.n_internal
            labels = tree.leaf_labels[tree.leaf_indptr[leaf]:tree.leaf_indptr[leaf + 1]]
            for slot, label in enumerate(labels):
                predictions[int(label)] = {}
                for i in ids:
                    s = tree.scores(rows, np.array([i]), np.array([g]), len(labels))[0, slot]
                    predictions[int(label)][int(i)] = here[int(i)] / (1 + math.exp(-s))
    return predictions


def test_labelwise_matches_brute_force(small):
    X, Y, trees, tail = small
    rows = from_csr(X[:40])
    model = model_of(trees, tail, Y.shape[1], X.shape[1])
    per_tree = [algorithm_1(t, rows, factor=1.5) for t in trees]
    exhaustive = np.mean([np.exp(path_log_probabilities(t, rows)) for t in trees], axis=0)
    for label in range(Y.shape[1]):
        expected = np.zeros(rows.n)
        for found in per_tree:
            for i, y in found[label].items():
                expected[i] += y / len(trees)
        order = sorted(range(rows.n), key=lambda i: (-expected[i], i))[:7]
        got = model.labelwise_rows(rows, label, 7, factor=1.5)
        assert [i for i, _ in got] == [i for i in order if expected[i] > 0]
        np.testing.assert_allclose([y for _, y in got], expected[[i for i, _ in got]], rtol=1e-9)
        # With a factor large enough to keep every point, labelwise is exhaustive scoring.
        everything = model.labelwise_rows(rows, label, 7, factor=1e6)
        best = sorted(range(rows.n), key=lambda i: (-exhaustive[i, label], i))[:7]
        assert [i for i, _ in everything] == best
        np.testing.assert_allclose([y for _, y in everything], exhaustive[best, label], rtol=1e-9)


def test_tail_reranking_follows_the_pfastrexml_formula(small):
    X, Y, trees, tail = small
    rows = from_csr(X[:30])
    model = model_of(trees, tail, Y.shape[1], X.shape[1], beam=8)
    reranked = model.with_options(rerank=True, alpha=0.8, gamma=30.0, shortlist=6)
    labels, scores = reranked.predict_rows(rows, 3)
    base_labels, base_scores = model.predict_rows(rows, 6)
    means = np.zeros((Y.shape[1], X.shape[1]))
    label_of_key, feature_of_key = np.divmod(tail.keys, X.shape[1])
    means[label_of_key, feature_of_key] = tail.values
    dense = X[:30].toarray()
    for q in range(30):
        candidates = base_labels[q][base_labels[q] >= 0]
        distance = ((dense[q] - means[candidates]) ** 2).sum(axis=1)
        s = 0.8 * np.log(base_scores[q][: len(candidates)]) - 0.2 * np.logaddexp(0, 15.0 * distance)
        order = np.lexsort((candidates, -s))[:3]
        assert labels[q].tolist() == candidates[order].tolist()
        np.testing.assert_allclose(scores[q], np.exp(s[order]), rtol=1e-4)


# -- bundles -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def bundle(small, tmp_path_factory):
    X, Y, trees, tail = small
    directory = tmp_path_factory.mktemp("xreg") / "model"
    model_of(trees, tail, Y.shape[1], X.shape[1]).save(directory)
    return directory


def test_bundle_round_trip(small, bundle):
    from qcat.classifier import load_model

    X, Y, trees, tail = small
    model = model_of(trees, tail, Y.shape[1], X.shape[1])
    loaded = load_model(bundle)
    assert isinstance(loaded, XRegModel) and loaded.labels == model.labels
    queries = ["f1 f7 f30", "f2", "f40 f41 f59 f3", "nothing known"]
    before, after = model.predict(queries, 5), loaded.predict(queries, 5)
    np.testing.assert_array_equal(before.labels, after.labels)
    np.testing.assert_allclose(before.scores, after.scores, rtol=2e-3)  # weights are stored as float16
    a, b = loaded.labelwise(model.labels[3], queries, 2), model.labelwise(model.labels[3], queries, 2)
    assert [i for i, _ in a] == [i for i, _ in b] and np.allclose([s for _, s in a], [s for _, s in b], rtol=2e-3)
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert manifest["backend"] == "xreg" and set(manifest["files"]) >= {"xreg.npz", "vocabulary.txt", "labels.txt"}
    with np.load(bundle / "xreg.npz", allow_pickle=False) as npz:
        assert all(npz[key].dtype != object for key in npz.files)


def test_bundle_tampering_is_refused(bundle, tmp_path):
    from qcat.classifier import load_model

    copy = tmp_path / "model"
    shutil.copytree(bundle, copy)
    with open(copy / "xreg.npz", "ab") as handle:
        handle.write(b"\0")
    with pytest.raises(BundleError, match="xreg.npz does not match its hash"):
        load_model(copy)


def test_inconsistent_arrays_are_a_bundle_error(small):
    from dataclasses import replace

    X, Y, trees, tail = small
    model = model_of(trees, tail, Y.shape[1], X.shape[1])
    broken = replace(trees[0], leaf_labels=trees[0].leaf_labels + 100)
    with pytest.raises(BundleError, match="inconsistent arrays.*leaf labels out of range"):
        replace(model, trees=(broken,)).check_shapes("here")
    short = replace(trees[1], reg_bias=trees[1].reg_bias[:-1])
    with pytest.raises(BundleError, match="regressor or node array lengths"):
        replace(model, trees=(short,)).check_shapes("here")
