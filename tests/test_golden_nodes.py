"""The golden harness answering by node (issue 52 item 6): a search boosted or filtered by the node a
classifier answers at a precision P, against one by its top leaves; by hand, then on the demo."""

from __future__ import annotations

import math
from pathlib import Path

import duckdb
import numpy as np
import pytest
from test_golden import PATHS, hand_catalog, listing_ids, lookup_model

from qcat.bundles.bundle import read_manifest
from qcat.bundles.demo import demo_model_dir
from qcat.classifier import Classifier
from qcat.cli import main
from qcat.errors import InputError
from qcat.evaluation.golden.harness import HarnessConfig, golden_evaluate, node_answers
from qcat.evaluation.golden.inventory import build_inventory
from qcat.evaluation.golden.query_sets import Demand
from qcat.evaluation.golden.search import MiniSearch, SearchConfig
from qcat.evaluation.golden.system_metrics import METRICS, NODE_METRICS, QueryJudgments, per_query_metrics
from qcat.models.calibration.nodes import ALL_LENGTHS, LEVELS, NodeCalibration
from qcat.taxonomy import from_paths
from qcat.text.normalize import normalize

QUERIES = ["shoe rack", "running shoe"]
# Inventory rows follow the hand catalog: l0 red running shoe (Fashion > Shoes), l1 red shoe polish
# (Home > Shoe care), l2 red shoe rack (Home > Furniture), l3 blue running shoe (Fashion > Shoes), l4 oak table.
JUDGMENTS = QueryJudgments(
    indptr=np.array([0, 3, 6]),
    doc=np.array([0, 1, 2, 0, 1, 3]),
    relevance=np.array([0, 0, 1, 1, 0, 1], np.int8),
    grade=np.array([0, 1, 3, 3, 0, 3], float),
)


def identity_calibration() -> NodeCalibration:
    """A node calibration whose probability is the mass, and whose threshold for P is P."""
    identity = (np.array([0.0, 1.0]), np.array([0.0, 1.0]))
    return NodeCalibration({1: identity, 2: identity}, {ALL_LENGTHS: LEVELS}, top_k=10)


@pytest.fixture(scope="module")
def hand():
    """"shoe rack" is a Home > Furniture query whose wrong top leaf is Home > Shoe care (0.6), so its
    department, Home, holds all its mass; "running shoe" splits 0.55/0.45 between departments."""
    catalog = hand_catalog()
    taxonomy = from_paths(PATHS)
    inventory = build_inventory(catalog, taxonomy, catalog.listing_id, sample_fraction=0.0)
    model = lookup_model(taxonomy, {"shoe rack": {"Home > Shoe care": 60, "Home > Furniture": 40},
                                    "running shoe": {"Fashion > Shoes": 55, "Home > Shoe care": 45}})
    classifier = Classifier(model, model.taxonomy, Path("hand"), None, identity_calibration())
    return inventory, taxonomy, model, classifier


def test_filtering_by_the_department_keeps_what_the_wrong_top_leaf_loses(hand):
    inventory, taxonomy, model, classifier = hand
    tokens = [q.split() for q in QUERIES]
    answers = node_answers(classifier, np.array(QUERIES, dtype=object), 0.9)
    home = taxonomy.id_of_path("Home")
    # At 0.9: "shoe rack" by its department (mass 1), "running shoe" by nothing (0.55 < 0.9).
    assert answers.ids.tolist() == [home, ""] and answers.depth.tolist() == [1, 0]
    assert answers.probability.tolist() == pytest.approx([1.0, 0.0]) and not answers.leaf.any()
    search = MiniSearch(inventory, SearchConfig(mode="filter", categories=1), taxonomy)
    by_leaf = search.search(QUERIES, tokens, model)
    by_node = search.search(QUERIES, tokens, None, nodes=answers)
    # The top leaf keeps the polish only; Home keeps the rack too (BM25: both words first). Without
    # a node nothing is filtered: BM25 order, ties in inventory order.
    assert listing_ids(inventory, by_leaf) == [["l1"], ["l0", "l3"]]
    assert listing_ids(inventory, by_node) == [["l2", "l1"], ["l0", "l3", "l1", "l2"]]
    assert listing_ids(inventory, by_node)[1] == listing_ids(inventory, search.search(QUERIES, tokens))[1]
    leaf, node = per_query_metrics(JUDGMENTS, by_leaf.docs), per_query_metrics(JUDGMENTS, by_node.docs)
    # "shoe rack": its one relevant listing (l2) lost by the leaf, returned first by the node.
    assert leaf["PR@k"].tolist() == [0.0, 1.0] and node["PR@k"].tolist() == [1.0, 1.0]
    assert leaf["recall"][0] == 0 and node["recall"][0] == 1 and node["precision"].tolist() == pytest.approx([1 / 2, 2 / 3])
    discount = 1 / math.log2(3)
    assert leaf["NDCG*"][0] == pytest.approx(2 / 8)  # the polish (Acceptable) alone: 2^1 over 2^3
    assert node["NDCG*"][0] == pytest.approx((8 + 2 * discount) / (8 * (1 + discount)))  # Excellent, then Acceptable
    assert node["NDCG*"][0] == pytest.approx(0.70986, abs=1e-5)
    summary = answers.summary(np.arange(2))
    assert summary == {"queries": 2, "answered": 1, "mean_depth": 1.0, "no_node_share": 0.5,
                       "unsupported_share": 0.0, "leaf_share": 0.0}


def test_boosting_by_a_node_and_lower_precisions(hand):
    inventory, taxonomy, model, classifier = hand
    tokens = [q.split() for q in QUERIES]
    search = MiniSearch(inventory, SearchConfig(mode="boost", boost_weight=1.0), taxonomy)
    answers = node_answers(classifier, np.array(QUERIES, dtype=object), 0.9)
    # Home's listings gain its probability (1); the unanswered query keeps BM25 order.
    assert listing_ids(inventory, search.search(QUERIES, tokens, None, nodes=answers)) == \
        [["l2", "l1", "l0", "l3"], ["l0", "l3", "l1", "l2"]]
    # At 0.55 both queries are answered by their top leaf, the first one wrong, as the leaf filter.
    low = node_answers(classifier, np.array(QUERIES, dtype=object), 0.55)
    assert low.ids.tolist() == [taxonomy.id_of_path("Home > Shoe care"), taxonomy.id_of_path("Fashion > Shoes")]
    assert low.leaf.all() and low.depth.tolist() == [2, 2]
    assert low.probability.tolist() == pytest.approx([0.6, 0.55])
    filtering = MiniSearch(inventory, SearchConfig(mode="filter", categories=1), taxonomy)
    assert listing_ids(inventory, filtering.search(QUERIES, tokens, None, nodes=low)) == \
        listing_ids(inventory, filtering.search(QUERIES, tokens, model))
    with pytest.raises(InputError, match="not both"):
        filtering.search(QUERIES, tokens, model, nodes=low)
    with pytest.raises(InputError, match="needs the inventory's taxonomy"):
        MiniSearch(inventory).search(QUERIES, tokens, None, nodes=low)


def test_precisions_are_checked():
    with pytest.raises(InputError, match="--target-precision: precision 1.0"):
        HarnessConfig(precisions=(None, 1.0))
    with pytest.raises(InputError, match="--baseline-precision"):
        HarnessConfig(precisions=(0.0, None))


# -- the demo ---------------------------------------------------------------------------------


def demo_has_nodes() -> bool:
    return "nodes.json" in read_manifest(demo_model_dir(), verify=False).data["files"]


needs_demo_nodes = pytest.mark.skipif(
    not demo_has_nodes(), reason="the shipped demo model has no node calibration (nodes.json) yet: it is being "
                                 "rebuilt with one (issue 52)")


def intents_demand(corpus) -> Demand:
    """The simulator's searches per (normalized) query: a stand-in for the log's demand that reads
    in a fraction of a second (log_demand ingests the log, about 13 s)."""
    rows = duckdb.execute("select query, searches from read_parquet(?)", [str(corpus.path("intents"))]).fetchall()
    searches: dict[str, float] = {}
    for query, count in rows:
        key = normalize(query)
        searches[key] = searches.get(key, 0.0) + count
    searches.pop("", None)
    return Demand(np.array(list(searches), dtype=object), np.array(list(searches.values())), "the demo's intents")


@pytest.fixture(scope="module")
def demo_inputs():
    from qcat.evaluation.golden.demo import DemoGoldenConfig, generate_demo_golden
    from qcat.training.data.corpus import Corpus

    corpus = Corpus.open()
    catalog, taxonomy, demand = corpus.catalog(), corpus.taxonomy(), intents_demand(corpus)
    golden = generate_demo_golden(corpus, demand, DemoGoldenConfig(per_segment=30), catalog, taxonomy)
    return golden, catalog, taxonomy, demand


@pytest.mark.slow
@needs_demo_nodes
def test_top_leaf_against_node_on_the_demo(demo_inputs, tmp_path):
    """Filtering by the top leaf against filtering by the node at 0.9 (boosting: by hand above)."""
    from qcat.evaluation.golden.cli import node_summary
    from qcat.evaluation.golden.report import render_markdown
    from qcat.evaluation.report_files import clean_json, write_report_files

    golden, catalog, taxonomy, demand = demo_inputs
    model = demo_model_dir()
    search = SearchConfig(mode="filter", categories=1)
    plain = golden_evaluate(golden, model, model, catalog, taxonomy, demand, HarnessConfig(search=search, bootstrap=20),
                            ("leaf", "leaf again"))
    report = golden_evaluate(golden, model, model, catalog, taxonomy, demand,
                             HarnessConfig(search=search, bootstrap=20, precisions=(None, 0.9)), ("leaf", "node"))
    segments = ["head", "torso", "tail", "all"]
    # Without a precision the report is as before: no PR@k, no node figures.
    assert plain["options"]["metrics"] == list(METRICS) and "precisions" not in plain["options"]
    assert all("node" not in s and "PR@k" not in s["segments"]["all"] for s in plain["systems"])
    _, leaf, node = report["systems"]
    assert report["options"]["metrics"] == list(NODE_METRICS)
    assert report["options"]["precisions"] == {"baseline": None, "target": 0.9}
    assert "node" not in leaf and node["node"]["precision"] == 0.9 and list(node["node"]["segments"]) == segments
    # The leaf side searches as without the flags.
    for segment in segments:
        assert {m: leaf["segments"][segment][m] for m in METRICS} == \
            {m: plain["systems"][1]["segments"][segment][m] for m in METRICS}
    figures = node["node"]["segments"]
    for segment in segments:
        f = figures[segment]
        assert f["queries"] == 30 * (3 if segment == "all" else 1)
        assert f["answered"] == round(f["queries"] * (1 - f["no_node_share"]))
        assert 1 <= f["mean_depth"] <= 4 and 0 <= f["leaf_share"] <= 1 - f["no_node_share"]
    assert figures["all"]["mean_depth"] == pytest.approx(
        sum(figures[s]["mean_depth"] * figures[s]["answered"] for s in segments[:3]) / figures["all"]["answered"])
    first = report["deltas"][0]
    assert (first["target"], first["baseline"]) == ("node", "leaf") and set(NODE_METRICS) <= set(first)
    assert first["PR@k"]["delta"] == pytest.approx(node["segments"]["head"]["PR@k"] - leaf["segments"]["head"]["PR@k"])
    lines = node_summary(clean_json(report))
    assert lines[0].startswith("node − leaf (points, 20-draw 95% intervals)") and len(lines) == 5
    assert lines[4].startswith("  all (90 queries): δ PR@5 ") and "node: mean depth" in lines[4]
    assert node_summary(clean_json(plain)) == []
    # One bundle on both sides at two precisions (its chains computed once): answering at the higher
    # precision answers no deeper and more often not at all.
    both = golden_evaluate(golden, model, model, catalog, taxonomy, demand,
                           HarnessConfig(search=search, bootstrap=0, precisions=(0.7, 0.95)), ("at 0.7", "at 0.95"))
    low, high = (s["node"]["segments"]["all"] for s in both["systems"][1:])
    assert high["mean_depth"] <= low["mean_depth"] and high["no_node_share"] >= low["no_node_share"]
    assert both["options"]["precisions"] == {"baseline": 0.7, "target": 0.95}
    write_report_files(clean_json(report), tmp_path, {}, render_markdown, lambda r, p: "")
    markdown = (tmp_path / "report.md").read_text()
    assert "answers each query by its node at precision 0.9" in markdown and "### Node answers" in markdown
    assert "| node | 0.9 | head | 30 |" in markdown and "δ PR@5" in markdown


def test_a_bundle_without_node_calibration_is_refused_in_one_line(tmp_path, capsys, monkeypatch):
    """Refused before any golden data is read or simulated: the flag, its P and the bundle in one line."""
    monkeypatch.setenv("QCAT_QUIET", "1")
    nb = demo_model_dir() / "nb"  # the demo hybrid's NB part: a bundle of its own, without nodes.json
    assert "nodes.json" not in read_manifest(nb, verify=False).data["files"]
    result = main(["golden", "evaluate", "--baseline", str(nb), "--target", str(nb), "--target-precision", "0.8",
                   "--out", str(tmp_path / "report")])
    error = capsys.readouterr().err.strip()
    assert result == 2 and len(error.splitlines()) == 1
    assert error.startswith(f"qcat: error: --target-precision 0.8: model bundle {nb} has no node calibration")
    assert not (tmp_path / "report").exists()
