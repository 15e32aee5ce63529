"""Node answers (issue 52): masses and probabilities that sum and nest, the stated precision held on
generated data with known labels, the same node from the CLI, the service and the Python API, and
a bundle without a node calibration refused for --precision in one line."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from test_cli import qcat

from qcat.bundles.bundle import read_manifest, relist_files
from qcat.bundles.demo import demo_model_dir
from qcat.classifier import Classifier, load_model
from qcat.errors import BundleError, InputError, QcatError
from qcat.models.calibration.nodes import (
    ALL_LENGTHS,
    LEVELS,
    MASS_FLOOR,
    NODES_FILE,
    NodeCalibration,
    NodeTree,
    check_precision,
    level_index,
)
from qcat.models.model import Predictions
from qcat.taxonomy import from_paths
from qcat.training.data.real_text import table_from_pairs
from qcat.training.selection.nodes import fit_node_calibration

DEMO = demo_model_dir()
PATHS = ["Toys", "Toys > Lego", "Toys > Lego > City", "Toys > Lego > Star Wars", "Toys > Dolls",
         "Phones", "Phones > Cases", "Phones > Chargers", "Phones > Chargers > USB"]


def hand_tree():
    taxonomy = from_paths(PATHS)
    labels = tuple(node for node in taxonomy.ids if taxonomy.is_leaf(node))
    return taxonomy, labels, NodeTree(taxonomy, labels)


def position(taxonomy, path: str) -> int:
    return taxonomy.index(taxonomy.id_of_path(path))


def test_masses_sum_up_the_tree_and_the_floor_keeps_small_scores_small():
    taxonomy, labels, tree = hand_tree()
    row = np.array([labels.index(taxonomy.id_of_path(p)) for p in
                    ("Toys > Lego > City", "Toys > Lego > Star Wars", "Phones > Chargers > USB",
                     "Toys > Dolls")] + [-1])
    nodes, mass = tree.masses(row, np.array([0.4, 0.3, 0.2, 0.1, 0.0]))
    held = dict(zip(nodes.tolist(), mass.tolist()))
    assert held[position(taxonomy, "Toys > Lego")] == pytest.approx(0.7)
    assert held[position(taxonomy, "Toys")] == pytest.approx(0.8)
    assert held[position(taxonomy, "Phones")] == held[position(taxonomy, "Phones > Chargers")] == pytest.approx(0.2)
    assert sum(held[position(taxonomy, d)] for d in ("Toys", "Phones")) == pytest.approx(1.0)
    assert position(taxonomy, "Phones > Cases") not in held  # no mass: no node
    # Scores summing to less than the floor are divided by it: an unsure model places little mass.
    _, small = tree.masses(row, np.array([0.04, 0.03, 0.02, 0.01, 0.0]))
    assert small.max() == pytest.approx(0.08 / MASS_FLOOR)


def hand_calibration(thresholds=None) -> NodeCalibration:
    identity = (np.array([0.0, 1.0]), np.array([0.0, 1.0]))
    squashed = (np.array([0.0, 1.0]), np.array([0.0, 0.5]))  # depth 3 is never sure
    return NodeCalibration({1: identity, 2: identity, 3: squashed},
                           thresholds or {ALL_LENGTHS: tuple(LEVELS)}, top_k=5)


def test_probabilities_nest_and_the_answer_is_the_deepest_node_reaching_the_threshold():
    taxonomy, labels, tree = hand_tree()
    calibration = hand_calibration()
    row = np.array([labels.index(taxonomy.id_of_path(p)) for p in ("Toys > Lego > City", "Toys > Lego > Star Wars")])
    nodes, mass, probability = calibration.probabilities(tree, row, np.array([0.9, 0.1]))
    p = dict(zip(nodes.tolist(), probability.tolist()))
    assert p[position(taxonomy, "Toys > Lego > City")] == pytest.approx(0.45)  # 0.9 through the depth-3 map
    assert p[position(taxonomy, "Toys > Lego")] == pytest.approx(1.0)
    for node, value in p.items():
        parent = taxonomy.parents[node]
        assert parent < 0 or p[parent] >= value
    answer = calibration.answer(tree, row, np.array([0.9, 0.1]), 0.9)
    assert (answer.path, answer.depth, answer.leaf) == ("Toys > Lego", 2, False)
    assert calibration.answer(tree, row, np.array([0.9, 0.1]), 0.4).path == "Toys > Lego > City"
    # A child raised above its parent's map is carried up: the parent is never less likely.
    raised = NodeCalibration({1: (np.array([0.0, 1.0]), np.array([0.0, 0.2])), 2: hand_calibration().maps[2],
                              3: hand_calibration().maps[3]}, {ALL_LENGTHS: tuple(LEVELS)}, top_k=5)
    nodes, _, probability = raised.probabilities(tree, row, np.array([0.9, 0.1]))
    assert dict(zip(nodes.tolist(), probability.tolist()))[position(taxonomy, "Toys")] == pytest.approx(1.0)


def test_precision_is_checked_and_rounded_up_to_a_kept_level():
    for bad in (0, 1, -0.5, 1.5, float("nan"), True, "0.9"):
        with pytest.raises(InputError, match="strictly between 0 and 1"):
            check_precision(bad)
    assert LEVELS[level_index(0.9)] == 0.9 and LEVELS[level_index(0.901)] == 0.91
    assert LEVELS[level_index(0.1)] == 0.5 and level_index(0.995) is None


@dataclass
class GeneratedModel:
    """Scores with known labels: each query's true leaf, its siblings and the rest get noisy logits
    whose spread depends on the query's difficulty; the model protocol's ``predict``."""

    taxonomy: object
    labels: tuple
    answers: dict
    backend: str = "generated"

    def predict(self, queries, k):
        labels = np.stack([self.answers[q][0][:k] for q in queries])
        scores = np.stack([self.answers[q][1][:k] for q in queries]).astype(np.float32)
        return Predictions(labels.astype(np.int32), scores, ("generated",) * len(queries))


def generated(seed: int, sizes: dict[str, int]):
    rng = np.random.default_rng(seed)
    paths = [f"D{d}" for d in range(3)] + [f"D{d} > A{a}" for d in range(3) for a in range(3)] + \
            [f"D{d} > A{a} > L{leaf}" for d in range(3) for a in range(3) for leaf in range(4)]
    taxonomy = from_paths(paths)
    labels = tuple(node for node in taxonomy.ids if taxonomy.is_leaf(node))
    aisle = np.array([taxonomy.parents[taxonomy.index(label)] for label in labels])
    answers, tables = {}, {}
    for name, size in sizes.items():
        queries, truth = [], []
        for i in range(size):
            true = int(rng.integers(len(labels)))
            sure = rng.uniform(0, 4)
            logits = rng.normal(0, 1, len(labels)) + sure * (np.arange(len(labels)) == true) \
                + 0.6 * sure * (aisle == aisle[true])
            probability = np.exp(logits) / np.exp(logits).sum()
            order = np.argsort(-probability)[:10]
            query = f"q{seed}{name}{i}"
            answers[query] = (order, probability[order])
            queries.append(query), truth.append(labels[true])
        tables[name] = table_from_pairs(queries, truth)
    return GeneratedModel(taxonomy, labels, answers), tables


def node_precision(model, calibration, table, precision):
    tree = NodeTree(model.taxonomy, model.labels)
    predictions = model.predict(list(table.queries), calibration.top_k)
    right = answered = 0
    pairs = zip(table.queries[table.pair_query], table.categories[table.pair_category])
    for row, (query, category) in enumerate(pairs):
        answer = calibration.answer(tree, predictions.labels[row], predictions.scores[row],
                                    calibration.threshold(precision, 1))
        if answer is not None:
            answered += 1
            right += category == answer.id or answer.path in model.taxonomy.path_of(category)
    return right / answered, answered / len(table.queries)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_stated_precision_holds_on_queries_the_calibration_never_saw(seed):
    model, tables = generated(seed, {"a": 800, "b": 800, "test": 2500})
    calibration = fit_node_calibration(model, {"a": (tables["a"], 0.5), "b": (tables["b"], 0.5)}, top_k=10,
                                       min_queries=100)
    for precision in (0.8, 0.9):
        kept, answered = node_precision(model, calibration, tables["test"], precision)
        assert kept >= precision - 0.02, (seed, precision, kept)
        assert answered > 0.5  # the promise is not kept by answering nothing


def test_a_precision_the_data_cannot_support_is_said_per_query():
    model, tables = generated(5, {"a": 150})
    calibration = fit_node_calibration(model, {"a": (tables["a"], 1.0)}, top_k=10, min_queries=100)
    assert calibration.threshold(0.99, 1) is None
    assert "cannot support precision 0.99" in calibration.unsupported(0.99, 1)


needs_demo_nodes = pytest.mark.skipif(NODES_FILE not in read_manifest(DEMO, verify=False).data["files"],
                                      reason="the demo model has no node calibration")
QUERIES = ["lego star wars", "rocketfish mobile", "dior gaudron", "hornby"]


@pytest.mark.slow
@needs_demo_nodes
def test_cli_and_api_answer_the_same_node_and_the_leaves_do_not_change():
    classifier = Classifier.load()
    batch = classifier.classify(QUERIES, k=3, precision=0.9)
    plain = classifier.classify(QUERIES, k=3)
    assert [a.categories for a in batch] == [a.categories for a in plain]
    compiled = classifier.compile()
    for query, answer in zip(QUERIES, batch):
        assert compiled.classify([query], k=3, precision=0.9)[0].node == answer.node
    result = qcat("classify", "--json", "--precision", "0.9", "-k", "3", *QUERIES)
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [line["node"] for line in lines] == [a.to_json()["node"] for a in batch]
    assert set(lines[0]["node"]) == {"id", "path", "depth", "probability", "leaf"}
    unknown = lines[QUERIES.index("dior gaudron")]
    assert unknown["node"] is None and unknown["node_why"]
    text = qcat("classify", "--precision", "0.9", "lego star wars").stdout
    assert "node at precision 0.9: " in text


def without_nodes(tmp_path: Path) -> Path:
    copy = tmp_path / "model"
    shutil.copytree(DEMO, copy)
    (copy / NODES_FILE).unlink(missing_ok=True)
    relist_files(copy)
    return copy


@pytest.mark.slow
def test_a_bundle_without_node_calibration_is_refused_for_precision_in_one_line(tmp_path):
    copy = without_nodes(tmp_path)
    result = qcat("classify", "--model", copy, "--precision", "0.9", "lego")
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert result.stderr.strip().count("\n") == 0 and "has no node calibration" in result.stderr
    assert "qcat train nodes" in result.stderr
    with pytest.raises(QcatError, match="has no node calibration"):
        Classifier.load(copy).classify(["lego"], precision=0.9)
    assert Classifier.load(copy).classify(["lego"])[0].categories  # it still answers leaves


@needs_demo_nodes
def test_a_changed_node_calibration_is_refused_on_load(tmp_path):
    copy = tmp_path / "model"
    shutil.copytree(DEMO, copy)
    data = json.loads((copy / NODES_FILE).read_text())
    data["thresholds"]["all"][40] = 0.0
    (copy / NODES_FILE).write_text(json.dumps(data))
    with pytest.raises(BundleError, match="does not match its hash"):
        Classifier.load(copy)


@pytest.mark.slow
def test_node_probabilities_nest_for_the_demo_backends():
    """Every backend through the one protocol: NB, XReg and their hybrid (XML-Q: the test below)."""
    from qcat.training.data.corpus import Corpus

    table = Corpus.open().query_set("real-2tok", "validation")
    for model in (load_model(DEMO), load_model(DEMO / "nb"), load_model(DEMO / "xreg")):
        calibration = fit_node_calibration(model, {"real-2tok": (table, 1.0)}, min_queries=100)
        tree = NodeTree(model.taxonomy, model.labels)
        predictions = model.predict(["lego star wars", "rocketfish mobile", "hornby"], calibration.top_k)
        for labels, scores in zip(predictions.labels, predictions.scores):
            nodes, mass, probability = calibration.probabilities(tree, labels, scores)
            p = dict(zip(nodes.tolist(), probability.tolist()))
            assert all(0 <= value <= 1 for value in p.values())
            for node, value in p.items():
                assert model.taxonomy.parents[node] < 0 or p[model.taxonomy.parents[node]] >= value
            departments = [m for n, m in zip(nodes.tolist(), mass.tolist()) if model.taxonomy.parents[n] < 0]
            assert sum(departments) <= 1 + 1e-9


@needs_demo_nodes
@pytest.mark.slow
def test_the_service_answers_the_same_node_and_refuses_a_bundle_without_calibration():
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    from serve_load import ServerProcess
    from test_serve import call

    expected = [a.to_json() for a in Classifier.load().classify(QUERIES, k=3, precision=0.9)]
    server = ServerProcess(["--model", str(DEMO)])
    try:
        status, _, body = call(server.port, "POST", "/v1/classify", {"queries": QUERIES, "k": 3, "precision": 0.9})
        assert status == 200 and body["results"] == expected
        status, _, single = call(server.port, "GET", "/v1/classify?q=lego%20star%20wars&k=3&precision=0.9")
        assert status == 200 and single["results"] == expected[:1]
        status, _, bad = call(server.port, "GET", "/v1/classify?q=lego&precision=1")
        assert status == 400 and "strictly between 0 and 1" in bad["error"]
        assert call(server.port, "GET", "/v1/model")[2]["node_calibration"] is True
        document = call(server.port, "GET", "/openapi.json")[2]
        assert "precision" in document["components"]["schemas"]["ClassifyRequest"]["properties"]
    finally:
        server.stop()
    part = ServerProcess(["--model", str(DEMO / "nb")])  # a hybrid's part: no node calibration of its own
    try:
        status, _, body = call(part.port, "POST", "/v1/classify", {"queries": ["lego"], "precision": 0.9})
        assert status == 400 and "has no node calibration" in body["error"]
        assert call(part.port, "POST", "/v1/classify", {"queries": ["lego"]})[0] == 200
    finally:
        part.stop()


@pytest.mark.slow
def test_train_nodes_adds_a_node_calibration_to_a_bundle_without_one(bestbuy_model_dir, tmp_path):
    assert NODES_FILE not in read_manifest(bestbuy_model_dir).data["files"]
    out = tmp_path / "with-nodes"
    result = qcat("train", "nodes", "--model", bestbuy_model_dir, "--out", out)
    assert result.returncode == 0, result.stderr
    assert "node calibration (--precision)" in result.stdout
    assert NODES_FILE in read_manifest(out).data["files"]  # listed, hashed and verified
    queries = ["iphone case", "tv", "usb cable"]
    before, after = Classifier.load(bestbuy_model_dir), Classifier.load(out)
    assert [a.categories for a in before.classify(queries)] == [a.categories for a in after.classify(queries)]
    answers = after.classify(queries, precision=0.8)
    assert all(a.precision == 0.8 and (a.node is not None or a.node_why) for a in answers)
    again = qcat("train", "nodes", "--model", bestbuy_model_dir, "--out", out)
    assert again.returncode != 0 and "Traceback" not in again.stderr  # --out exists: refused, nothing overwritten


def test_the_compiled_chain_equals_the_batch_one():
    """The single-query kernel (qcat serve, Classifier.compile) and the numpy path give the same
    nodes and probabilities, to the bit, including ties and scores below the mass floor, a query
    alone or in a batch of many."""
    model, _ = generated(7, {"a": 1})
    tree = NodeTree(model.taxonomy, model.labels)
    rng = np.random.default_rng(3)
    maps = {d: (np.sort(rng.uniform(0, 1, 6)), np.sort(rng.uniform(0, 1, 6))) for d in (1, 3)}  # depth 2 borrows
    calibration = NodeCalibration(maps, {ALL_LENGTHS: tuple(LEVELS)}, top_k=8)
    compiled = calibration.compiled_chain(tree)
    rows = []
    for case in range(300):
        labels = rng.permutation(len(model.labels))[:10].astype(np.int32)
        labels[rng.uniform(size=10) < 0.1] = -1
        scores = np.round(rng.uniform(0, 1 if case % 3 else 0.05, 10), 2).astype(np.float32)
        for (a, b) in zip(calibration.chain(tree, labels, scores), compiled(labels, scores)):
            assert np.array_equal(a, b), case
        rows.append((labels, scores))
    # All 300 at once (fitting the calibration walks every validation query's chain in one batch),
    # one of them with no score at all: each row as the query alone.
    rows[7] = (rows[7][0], np.zeros(10, dtype=np.float32))
    nodes, probability = calibration.batch_chains(tree, np.array([r[0] for r in rows]), np.array([r[1] for r in rows]))
    for case, (labels, scores) in enumerate(rows):
        alone = compiled(labels, scores)
        assert np.array_equal(nodes[case], alone[0]) and np.array_equal(probability[case], alone[1]), case
    assert (nodes[7] == -1).all()


def test_answers_at_lower_precision_lie_beneath_those_at_higher():
    """The walk down from the root: a lower threshold only ever answers deeper on the same path,
    beneath the most probable department (never a stray leaf of another department)."""
    model, _ = generated(8, {"a": 1})
    tree = NodeTree(model.taxonomy, model.labels)
    rng = np.random.default_rng(4)
    calibration = NodeCalibration({d: (np.array([0.0, 1.0]), np.array([0.0, 1.0])) for d in (1, 2, 3)},
                                  {ALL_LENGTHS: tuple(LEVELS)}, top_k=10)
    for _ in range(200):
        labels = rng.permutation(len(model.labels))[:10].astype(np.int32)
        scores = np.sort(rng.dirichlet(np.ones(10) * 0.3))[::-1].astype(np.float32)
        answers = [calibration.answer(tree, labels, scores, t) for t in (0.9, 0.6, 0.3, 0.05, 0.0)]
        paths = [a.path for a in answers if a is not None]
        for higher, lower in zip(paths, paths[1:]):
            assert lower == higher or lower.startswith(higher + " > ")


@pytest.mark.slow
def test_an_xmlq_bundle_ships_a_node_calibration_whose_probabilities_nest(xmlq_cli_run):
    """`qcat train xmlq` fits the node calibration like every train command (the suite's one-epoch run)."""
    pytest.importorskip("tensorflow")
    classifier = Classifier.load(xmlq_cli_run / "xmlq")
    assert classifier.nodes is not None
    tree = NodeTree(classifier.taxonomy, classifier.model.labels)
    predictions = classifier.model.predict(["iphone case", "hdmi cable", "tv"], classifier.nodes.top_k)
    for labels, scores in zip(predictions.labels, predictions.scores):
        nodes, mass, probability = classifier.nodes.probabilities(tree, labels, scores)
        p = dict(zip(nodes.tolist(), probability.tolist()))
        for node, value in p.items():
            assert classifier.taxonomy.parents[node] < 0 or p[classifier.taxonomy.parents[node]] >= value
    answers = classifier.classify(["iphone case", "hdmi cable"], precision=0.8)
    assert all(a.node is not None or a.node_why for a in answers)
