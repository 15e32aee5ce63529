"""``qcat evaluate``'s node answers (issue 52): figures hand-computed on a tiny tree, the "Node
answers" tables and the precision-depth plot, a model without a node calibration reported in one
line, and one end-to-end run on a small click log recounted through ``Classifier.classify``."""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse as sp

from qcat.bundles.bundle import read_manifest
from qcat.classifier import Classifier, default_model_dir
from qcat.cli import main as qcat_main
from qcat.evaluation.nodes import NodeSet, no_nodes_note, node_tables, score_nodes
from qcat.evaluation.plots import NODE_PLOT, node_precision_depth
from qcat.evaluation.report import Table, markdown_table
from qcat.measure.hierarchy import NodeTable, node_correct, node_summary, wilson_interval
from qcat.models.calibration.nodes import LEVELS, NodeChains
from qcat.taxonomy import from_paths, load_taxonomy

TAXONOMY = from_paths(["A > A1 > a", "A > A1 > b", "A > A2 > c", "B > B1 > d"])
ID = {path[-1]: node for node, path in zip(TAXONOMY.ids, TAXONOMY.paths)}  # "A1" -> its id
MODEL_TAXONOMY = TAXONOMY.subset([ID["a"], ID["b"], ID["c"]])  # the model's own tree: other positions
# Each query's chain (department, aisle, leaf) and probabilities; a node is answered at P when its
# probability reaches P (the thresholds below are the levels themselves). Truth: one leaf, none for q4.
CHAINS = [(("A", "A1", "a"), (0.99, 0.93, 0.85), "a"),  # 0.8: a (right leaf), 0.9: A1, 0.95: A
          (("A", "A1", "a"), (0.97, 0.90, 0.60), "b"),  # 0.8 and 0.9: A1 (right), 0.95: A
          (("A", "A2", "c"), (0.92, 0.82, 0.81), "d"),  # 0.8: c, 0.9: A (both wrong), 0.95: none
          (("A", "A2", "c"), (0.50, 0.40, 0.30), "c"),  # no node at any reported P
          (("A", "A1", "a"), (0.99, 0.99, 0.99), None)]  # no truth: left out
SEGMENT = np.array([0, 0, 1, 2, 0])  # head, head, torso, tail, head


class HandClassifier:
    """What score_nodes asks of a Classifier: its taxonomy, directory and node chains."""

    taxonomy = MODEL_TAXONOMY
    directory = "hand"

    def node_chains(self, queries):
        assert len(queries) == len(CHAINS)
        nodes = np.array([[MODEL_TAXONOMY.index(ID[name]) for name in chain] for chain, _, _ in CHAINS])
        probability = np.array([p for _, p, _ in CHAINS])
        return NodeChains(nodes, probability, np.tile(np.array(LEVELS), (len(CHAINS), 1)))


@pytest.fixture(scope="module")
def hand_figures():
    labels = [ID[leaf] for leaf in "abcd"]
    rows = [i for i, (_, _, truth) in enumerate(CHAINS) if truth]
    truth = sp.csr_matrix((np.ones(len(rows)), (rows, ["abcd".index(CHAINS[i][2]) for i in rows])),
                          shape=(len(CHAINS), len(labels)))
    groups = {"all": np.ones(len(CHAINS), dtype=bool)} | {name: SEGMENT == s for s, name in enumerate(("head", "torso", "tail"))}
    sets = [NodeSet(np.array([f"q{i}" for i in range(len(CHAINS))]), truth, groups, "all")]
    return score_nodes(HandClassifier(), NodeTable.build(TAXONOMY), labels, sets)


def test_hand_computed_node_figures(hand_figures) -> None:
    at = {s["P"]: s for s in hand_figures["answers"]["all"]}
    assert list(at) == [0.8, 0.9, 0.95]
    # P = 0.8: q0 a (right), q1 A1 (right), q2 c (wrong), q3 none; depths 3, 2, 3, 0; leaves q0, q2.
    assert (at[0.8]["answered"], at[0.8]["n"]) == (3, 4)
    assert at[0.8]["precision"] == pytest.approx(2 / 3)
    assert (at[0.8]["precision_low"], at[0.8]["precision_high"]) == pytest.approx(wilson_interval(2, 3))
    assert at[0.8]["mean_depth"] == pytest.approx(2.0) and at[0.8]["leaf_share"] == pytest.approx(0.5)
    assert at[0.8]["none_share"] == pytest.approx(0.25)
    # P = 0.9: A1, A1, A (wrong), none.
    assert at[0.9]["precision"] == pytest.approx(2 / 3) and at[0.9]["mean_depth"] == pytest.approx(1.25)
    assert at[0.9]["leaf_share"] == 0
    # P = 0.95: A, A, none, none: both answers right.
    assert at[0.95]["precision"] == 1 and at[0.95]["mean_depth"] == pytest.approx(0.5)
    assert at[0.95]["none_share"] == pytest.approx(0.5)
    head = {s["P"]: s for s in hand_figures["answers"]["head"]}  # q0, q1 (q4 has no truth)
    assert head[0.8]["n"] == 2 and head[0.8]["precision"] == 1 and head[0.8]["mean_depth"] == pytest.approx(2.5)
    assert hand_figures["answers"]["torso"][0]["precision"] == 0
    assert hand_figures["answers"]["tail"][0]["answered"] == 0 and hand_figures["answers"]["tail"][0]["precision"] is None
    # Hierarchical at 0.9: answered chains {A, A1}, {A, A1}, {A}: 4 of 5 nodes shared; truth 3 + 3 + 3 + 3 nodes.
    h = hand_figures["hierarchical"]["all"]
    assert (h["P"], h["precision"], h["recall"]) == (0.9, pytest.approx(0.8), pytest.approx(4 / 12))
    assert h["f1"] == pytest.approx(2 * 0.8 * (1 / 3) / (0.8 + 1 / 3))
    curve = hand_figures["curves"]["all"]
    assert curve["P"] == list(LEVELS) and len(curve["precision"]) == len(LEVELS)
    assert curve["precision"][LEVELS.index(0.8)] == pytest.approx(2 / 3)
    assert curve["mean_depth"][0] == pytest.approx((3 + 3 + 3 + 1) / 4)  # P = 0.5: a, a, c, A (0.50 reaches 0.5)


def test_node_tables_and_plot(hand_figures) -> None:
    report = {"models": [{"name": "hand", "nodes": hand_figures}, {"name": "plain", "nodes": None}]}
    answers, hierarchical = (Table(**fields) for fields in node_tables(report, ["all", "head", "torso", "tail"]))
    assert answers.title.startswith("Node answers")
    assert answers.header[2:] == ("P", "precision (%) [95% interval]", "mean depth", "leaf (%)", "no node (%)")
    low, high = wilson_interval(2, 3)
    assert answers.rows[0] == ("all (4)", "hand", "0.80", f"66.67 [{100 * low:.2f}, {100 * high:.2f}]", "2.00", "50.00",
                               "25.00")
    assert answers.rows[2][2:4] == ("0.95", "100.00 [34.24, 100.00]")
    assert answers.rows[9][:4] == ("tail (1)", "hand", "0.80", "–")  # nothing answered: no precision
    assert len(answers.rows) == 4 * 3  # the plain model has no rows
    assert hierarchical.rows[0] == ("all (4)", "hand", "80.00", "33.33", f"{100 * 2 * 0.8 / 3 / (0.8 + 1 / 3):.2f}")
    assert "| all (4) | hand | 0.80 | 66.67 \\[" in markdown_table(answers)
    assert node_tables({"models": [{"name": "plain", "nodes": None}]}, ["all"]) == []
    svg = node_precision_depth(report)
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg
    note = no_nodes_note("plain", "models/plain")
    assert "has no node calibration" in note and "qcat train nodes --model models/plain --out NEW_DIR" in note


def demo_has_nodes() -> bool:
    return "nodes.json" in read_manifest(default_model_dir(), verify=False).data["files"]


needs_demo_nodes = pytest.mark.skipif(not demo_has_nodes(), reason="the demo model has no node calibration "
                                      "(nodes.json) yet: its node figures are checked once it ships with one")


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    """`qcat evaluate` of the demo model and a tiny NB trained here (no node calibration) on a click
    log of the demo leaves' own names (51 test queries): the report directory and log."""
    from qcat.training.data.corpus import LogCorpus
    from qcat.training.nb import trainer as nb_trainer

    root = tmp_path_factory.mktemp("nodes-eval")
    taxonomy_file = root / "taxonomy.tsv"
    taxonomy_file.write_bytes((default_model_dir() / "taxonomy.tsv").read_bytes())
    taxonomy = load_taxonomy(taxonomy_file)
    lines = ["query,category,clicks,impressions"]
    for node in taxonomy.leaves:
        path = taxonomy.paths[taxonomy.index(node)]
        name = " ".join(path[-2:]).lower().replace(",", " ").replace('"', " ")
        lines.append(f"{name},{node},10,{20 + 3 * (len(lines) % 7)}")
    log = root / "clicks.csv"
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    plain = root / "plain-nb"
    nb_trainer.fit(LogCorpus(log, taxonomy_file).dataset(), nb_trainer.NBConfig(thresholds=(1,), alphas=(1.0,))).save(plain)
    out = root / "report"
    assert qcat_main(["evaluate", "--model", str(default_model_dir()), "--name", "demo", "--model", str(plain),
                      "--name", "plain", "--log", str(log), "--taxonomy", str(taxonomy_file), "--out", str(out)]) == 0
    return out, log, taxonomy_file


@pytest.mark.slow
def test_model_without_calibration_is_one_line(small_run) -> None:
    out, _, _ = small_run
    report = json.loads((out / "report.json").read_text())
    plain = report["models"][1]
    assert plain["nodes"] is None
    lines = [note for note in report["notes"] if "node calibration" in note]
    assert any(note.startswith("plain has no node calibration") and "qcat train nodes --model" in note for note in lines)
    assert len([note for note in lines if note.startswith("plain ")]) == 1
    markdown = (out / "report.md").read_text()
    assert markdown.count("plain has no node calibration") == 1
    nodes_section = markdown.split("### Node answers", 1)[1].split("## Plots")[0] if "### Node answers" in markdown else ""
    assert "| plain |" not in nodes_section


@pytest.mark.slow
@needs_demo_nodes
def test_demo_node_figures_match_a_recount(small_run) -> None:
    """The report's figures at P = 0.9 on all the test queries, recounted through classify's node
    answers (the single-query path's code, not node_chains) and the measure's node_summary."""
    from qcat.training.data.corpus import LogCorpus

    out, log, taxonomy_file = small_run
    report = json.loads((out / "report.json").read_text())
    figures = report["models"][0]["nodes"]
    test = LogCorpus(log, taxonomy_file).dataset().test
    gold = [[] for _ in test.queries]
    for q, c in zip(test.pair_query, test.pair_category):
        gold[q].append(test.categories[c])
    answers = Classifier.load(default_model_dir(), overrides=False).classify(list(test.queries), 1, precision=0.9)
    nodes = [None if a.node is None else a.node.id for a in answers]
    table = NodeTable.build(load_taxonomy(taxonomy_file))
    at = table.positions(nodes)
    expected = node_summary(node_correct(table, nodes, gold), table.depth[at], at >= 0, table.leaf[at])
    reported = {s["P"]: s for s in figures["answers"]["all"]}[0.9]
    assert reported["n"] == len(test.queries) and reported["answered"] == expected["answered"]
    for key in ("precision", "precision_low", "precision_high", "mean_depth", "leaf_share", "none_share"):
        assert reported[key] == pytest.approx(expected[key]), key
    curve = figures["curves"]["all"]
    assert curve["precision"][LEVELS.index(0.9)] == pytest.approx(expected["precision"])
    assert all(d is None or 0 <= d <= 6 for d in curve["mean_depth"])
    hierarchical = figures["hierarchical"]["all"]
    assert hierarchical["P"] == 0.9 and 0 <= hierarchical["precision"] <= 1 and 0 <= hierarchical["recall"] <= 1


@pytest.mark.slow
@needs_demo_nodes
def test_report_carries_node_tables_and_plot(small_run) -> None:
    out, _, _ = small_run
    markdown, html = (out / "report.md").read_text(), (out / "report.html").read_text()
    for text in (markdown, html):
        assert "Node answers (the deepest taxonomy node right at least P of the time)" in text
        assert "hierarchical precision, recall and F1" in text
    rows = [line for line in markdown.split("### Node answers (")[1].split("###")[0].splitlines()
            if line.startswith("| ") and "---" not in line][1:]
    assert [row.split("|")[3].strip() for row in rows[:3]] == ["0.80", "0.90", "0.95"]
    assert rows[0].split("|")[1].strip().startswith("all (") and any(r.split("|")[1].strip().startswith("tail (")
                                                                    for r in rows)
    assert (out / "plots" / "node_precision_depth.svg").read_text().lstrip().startswith("<?xml")
    assert f"![{NODE_PLOT}](plots/node_precision_depth.svg)" in markdown
    assert html.count("<svg") == 4 and NODE_PLOT in html
