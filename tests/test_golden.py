"""The golden-data harness: search ordering, metrics by hand, importers, the CLI end to end."""

from __future__ import annotations

import gzip
import json
import math

import numpy as np
import pytest
from scipy.stats import mannwhitneyu
from test_cli import qcat

from qcat.classifier import default_model_dir
from qcat.errors import InputError
from qcat.evaluation.golden.golden_set import NO_GRADE
from qcat.evaluation.golden.importers import load_golden
from qcat.evaluation.golden.inventory import build_inventory
from qcat.evaluation.golden.query_sets import Demand, sample_query_sets
from qcat.evaluation.golden.search import MiniSearch, SearchConfig
from qcat.evaluation.golden.system_metrics import QueryJudgments, bootstrap_delta, per_query_metrics
from qcat.evaluation.metrics import roc_auc_by_group
from qcat.models.nb import NaiveBayesModel
from qcat.taxonomy import from_paths
from qcat.training.data.listings import Catalog

PATHS = ["Fashion > Shoes", "Home > Shoe care", "Home > Furniture"]


def hand_catalog() -> Catalog:
    rows = [("l0", "red running shoe", "Fashion > Shoes"), ("l1", "red shoe polish", "Home > Shoe care"),
            ("l2", "red shoe rack", "Home > Furniture"), ("l3", "blue running shoe", "Fashion > Shoes"),
            ("l4", "oak table", "Home > Furniture")]
    ids, titles, paths = zip(*rows)
    empty = np.array([""] * len(rows), dtype=object)
    return Catalog(np.array(ids, dtype=object), empty, np.array(titles, dtype=object), empty,
                   np.array(paths, dtype=object), np.full(len(rows), np.nan), np.full(len(rows), np.nan))


def lookup_model(taxonomy, query_scores: dict[str, dict[str, float]]) -> NaiveBayesModel:
    """A real NB model whose full-query lookup table answers the given queries."""
    labels = tuple(taxonomy.id_of_path(p) for p in PATHS)
    queries = sorted(query_scores)
    indptr, label_ids, clicks = [0], [], []
    for q in queries:
        ranked = sorted(query_scores[q].items(), key=lambda item: -item[1])
        label_ids += [labels.index(taxonomy.id_of_path(p)) for p, _ in ranked]
        clicks += [c for _, c in ranked]
        indptr.append(len(label_ids))
    return NaiveBayesModel(
        labels=labels, taxonomy=taxonomy.subset(list(labels)), vocabulary=(),
        feature_indptr=np.zeros(1, np.int64), feature_labels=np.zeros(0, np.int32),
        feature_delta=np.zeros(0, np.float32), label_log_prior=np.log(np.full(3, 1 / 3, np.float32)),
        label_unseen=np.zeros(3, np.float32), lookup_queries=tuple(queries),
        lookup_indptr=np.array(indptr, np.int64), lookup_labels=np.array(label_ids, np.int32),
        lookup_clicks=np.array(clicks, np.float32), config={}, metrics={},
    )


@pytest.fixture(scope="module")
def hand_search():
    catalog = hand_catalog()
    taxonomy = from_paths(PATHS)
    inventory = build_inventory(catalog, taxonomy, catalog.listing_id, sample_fraction=0.0)
    model = lookup_model(taxonomy, {"red shoe": {"Home > Shoe care": 70, "Fashion > Shoes": 30}})
    return inventory, model


def listing_ids(inventory, results) -> list[list[str]]:
    return [[inventory.listing_id[d] for d in row if d >= 0] for row in results.docs]


def test_bm25_filter_and_boost_ordering(hand_search):
    inventory, model = hand_search
    queries = ["red shoe", "zzz"]
    tokens = [q.split() for q in queries]

    def run(model_or_none, **config):
        return listing_ids(inventory, MiniSearch(inventory, SearchConfig(**config)).search(queries, tokens, model_or_none))

    # BM25 alone: the three titles with both words tie and keep inventory order; "oak table"
    # and an unknown word match nothing and are never returned.
    assert run(None) == [["l0", "l1", "l2", "l3"], []]
    assert run(model, mode="filter", categories=1) == [["l1"], []]
    assert run(model, mode="filter", categories=2) == [["l0", "l1", "l3"], []]
    # Boost: 1 + 0.7 (l1) > 1 + 0.3 (l0) > l3's lower BM25 + 0.3 vs l2's 1 + 0 depends on BM25.
    boosted = run(model, mode="boost", boost_weight=1.0)[0]
    assert boosted[:2] == ["l1", "l0"] and set(boosted) == {"l0", "l1", "l2", "l3"}
    assert run(model, mode="boost", boost_weight=0.0) == run(None)
    assert run(None, top_n=2) == [["l0", "l1"], []]
    big = run(model, mode="boost", boost_weight=100.0)[0]
    assert big == ["l1", "l0", "l3", "l2"]  # category scores dominate, BM25 breaks the tie


def test_search_config_is_validated():
    with pytest.raises(InputError, match="search mode"):
        SearchConfig(mode="rerank")
    with pytest.raises(InputError, match="top N"):
        SearchConfig(top_n=0)
    with pytest.raises(InputError, match="boost weight"):
        SearchConfig(boost_weight=-1)


def hand_judgments() -> tuple[QueryJudgments, np.ndarray]:
    # Inventory rows: A=0 B=1 C=2 D=3 X=4 F=5 G=6 H=7; -1 is an unsearchable listing (E).
    judgments = QueryJudgments(
        indptr=np.array([0, 5, 7, 8]),
        doc=np.array([0, 1, 2, 3, -1, 5, 6, 7]),
        relevance=np.array([1, 0, 1, 0, 1, 0, 0, 1], np.int8),
        grade=np.array([3, 0, 2, 1, 3, 0, 1, 2], float),
    )
    docs = np.array([[0, 1, 4], [5, -1, -1], [-1, -1, -1]])
    return judgments, docs


def test_every_metric_on_a_hand_computed_case():
    judgments, docs = hand_judgments()
    m = per_query_metrics(judgments, docs)
    # Query 0: TP A, FP B, FN C and E (unsearchable), TN D; X is returned but unjudged.
    assert m["accuracy"][0] == pytest.approx(2 / 5)
    assert m["precision"][0] == pytest.approx(1 / 2)
    assert m["recall"][0] == pytest.approx(1 / 3)
    assert m["F1"][0] == pytest.approx(2 / 5)
    # Rank scores A 3, B 2, C/D/E 0: positives (3, 0, 0) vs negatives (2, 0) -> 3 of 6.
    assert m["AUC"][0] == pytest.approx(0.5)
    dcg = 2**3 / math.log2(2) + 1 / math.log2(3) + 1 / math.log2(4)
    assert m["NDCG*"][0] == pytest.approx(dcg / (8 * (1 / math.log2(2) + 1 / math.log2(3) + 1 / math.log2(4))))
    assert m["judged_share"][0] == pytest.approx(2 / 3)
    # Query 1: one irrelevant listing returned, one not: no positive, so recall and AUC are undefined.
    assert m["accuracy"][1] == 0.5 and m["precision"][1] == 0 and m["F1"][1] == 0
    assert math.isnan(m["recall"][1]) and math.isnan(m["AUC"][1])
    assert m["NDCG*"][1] == pytest.approx(1 / 8)
    # Query 2: nothing returned.
    assert m["accuracy"][2] == 0 and math.isnan(m["precision"][2]) and m["recall"][2] == 0
    assert m["NDCG*"][2] == 0 and m["returned"][2] == 0 and math.isnan(m["judged_share"][2])


def test_ndcg_star_is_nan_without_grades():
    judgments, docs = hand_judgments()
    ungraded = QueryJudgments(judgments.indptr, judgments.doc, judgments.relevance, np.full(8, np.nan))
    assert np.isnan(per_query_metrics(ungraded, docs)["NDCG*"]).all()


def test_auc_by_group_matches_mann_whitney():
    rng = np.random.default_rng(3)
    group = rng.integers(0, 20, 400)
    score = rng.integers(0, 4, 400).astype(float)
    positive = rng.random(400) < 0.4
    got = roc_auc_by_group(group, score, positive, 21)
    for g in range(21):
        pos, neg = score[(group == g) & positive], score[(group == g) & ~positive]
        if len(pos) and len(neg):
            assert got[g] == pytest.approx(mannwhitneyu(pos, neg).statistic / (len(pos) * len(neg)))
        else:
            assert math.isnan(got[g])


def test_bootstrap_delta_resamples_queries_in_pairs():
    rng = np.random.default_rng(0)
    baseline = rng.random(200)
    target = baseline + 0.1 + rng.normal(0, 0.01, 200)
    target[::7] = np.nan
    delta, low, high = bootstrap_delta(baseline, target, draws=300, seed=5)
    assert delta == pytest.approx(np.nanmean(target) - np.nanmean(baseline))
    assert low < delta < high and high - low < 0.1
    # Brute force with the same draws.
    draws = np.random.default_rng(5).integers(0, 200, size=(300, 200))
    brute = [np.nanmean(target[d]) - np.nanmean(baseline[d]) for d in draws]
    assert (low, high) == pytest.approx(tuple(np.percentile(brute, [2.5, 97.5])))
    same = bootstrap_delta(baseline, baseline, draws=100)
    assert same == (0.0, 0.0, 0.0)


def test_query_sets_follow_the_logs_demand():
    demand = Demand(np.array(["a", "b", "c", "d", "e"], dtype=object), np.array([50.0, 20, 10, 10, 10]), "hand")
    # Shares before each query: a 0 -> head, b .5 -> torso, c .7/d .8/e .9 -> tail.
    sets = sample_query_sets(np.array(["a", "b", "c", "d", "e", "zz"], dtype=object), demand, per_segment=2, seed=0)
    assert sets.queries["head"].tolist() == ["a"] and sets.queries["torso"].tolist() == ["b"]
    assert len(sets.queries["tail"]) == 2 and set(sets.queries["tail"]) <= {"c", "d", "e"}
    assert sets.queries["no demand"].tolist() == ["zz"]
    assert sets.available == {"head": 1, "torso": 1, "tail": 3, "no demand": 1}


def test_inventory_reports_unsearchable_listings():
    catalog = hand_catalog()
    inventory = build_inventory(catalog, from_paths(PATHS), np.array(["l1", "nope", "l1"], dtype=object),
                                sample_fraction=0.0)
    assert inventory.listing_id.tolist() == ["l1"] and inventory.unsearchable.tolist() == ["nope"]


# -- importers ----------------------------------------------------------------------


def test_csv_importer_counts_every_bad_row(tmp_path):
    path = tmp_path / "golden.csv"
    path.write_text(
        "query,listing_id,relevance,grade,judge\n"
        "Red Shoe,l0,1,Excellent,ann\n"      # kept (grade by name, query normalized)
        "red shoe,l1,0,0,ann\n"               # kept
        "red shoe,l2,,2,bob\n"                # kept: relevance from the grade
        "red shoe,l0,1,3,ann\n"               # the same judge again: skipped
        "!!!,l3,1,,ann\n"                     # empty query
        "red shoe,,1,,ann\n"                  # empty listing id
        "red shoe,l4,yes,,ann\n"              # bad relevance
        "red shoe,l5,1,7,ann\n"               # bad grade
        "red shoe,l6,1\n",                    # too few fields
        encoding="utf-8",
    )
    golden = load_golden(path)
    report = golden.report
    assert report.rows_read == 9 and report.rows_kept == 3 and sum(report.skipped.values()) == 6
    assert golden.query.tolist() == ["red shoe"] * 3
    assert golden.relevance.tolist() == [1, 0, 1] and golden.grade.tolist() == [3, 0, 2]
    text = report.format()
    for reason in ("empty after normalization", "listing id is empty", "relevance is not 0 or 1",
                   "grade is not 0-3", "wrong number of fields", "same judge"):
        assert reason in text
    with pytest.raises(InputError, match=r"golden.csv:6: the query '!!!' is empty once normalized"):
        load_golden(path, strict=True)


def test_csv_importer_refuses_unusable_files(tmp_path):
    (tmp_path / "cols.csv").write_text("query,listing\nx,y\n", encoding="utf-8")
    with pytest.raises(InputError, match="lacks columns listing_id, relevance"):
        load_golden(tmp_path / "cols.csv")
    (tmp_path / "bad.csv").write_bytes(b"query,listing_id,relevance\n\xff\xfe,1,1\n")
    with pytest.raises(InputError, match="not valid UTF-8"):
        load_golden(tmp_path / "bad.csv")
    (tmp_path / "none.csv").write_text("query,listing_id,relevance\n!!,x,1\n", encoding="utf-8")
    with pytest.raises(InputError, match="no usable judgments"):
        load_golden(tmp_path / "none.csv")
    with pytest.raises(InputError, match="--golden .*missing.csv: no such file"):
        load_golden(tmp_path / "missing.csv")


def test_aggregated_pairs_average_judges(tmp_path):
    path = tmp_path / "golden.csv"
    path.write_text("query,listing_id,relevance,grade,judge\nq,l,1,3,a\nq,l,0,1,b\nq,l,1,2,c\nq,m,0,,a\n", encoding="utf-8")
    pairs = load_golden(path).pairs()
    assert pairs.listing_id.tolist() == ["l", "m"]
    assert pairs.relevance.tolist() == [1, 0] and pairs.judgments.tolist() == [3, 1]
    assert pairs.grade[0] == pytest.approx(2.0) and math.isnan(pairs.grade[1])


def test_esci_importer(tmp_path, data_dir):
    golden = load_golden(data_dir / "esci_us_judgments.json")
    assert golden.report.rows_read == 6678 and golden.report.rows_kept == 6678
    assert len(set(golden.query.tolist())) == 150 and set(golden.grade.tolist()) <= {0, 1, 2, 3}
    assert golden.relevance.tolist() == (golden.grade >= 2).astype(int).tolist()
    bad = {"judgmentRatings": [
        {"query": "tv", "ratings": [{"docId": "a", "rating": "100.000"}, {"docId": "b", "rating": "55"},
                                    {"rating": "1.0"}, "junk"]},
        {"ratings": []},
    ]}
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad), encoding="utf-8")
    golden = load_golden(path)
    assert golden.report.rows_kept == 1 and sum(golden.report.skipped.values()) == 4
    assert golden.grade.tolist() == [3] and golden.judge.tolist() == ["esci"]
    with pytest.raises(InputError, match=r"judgmentRatings\[0\].ratings\[1\]: rating is not one of"):
        load_golden(path, strict=True)
    (tmp_path / "broken.json").write_text("{nope", encoding="utf-8")
    with pytest.raises(InputError, match="not valid JSON"):
        load_golden(tmp_path / "broken.json")
    (tmp_path / "other.json").write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(InputError, match="judgmentRatings"):
        load_golden(tmp_path / "other.json")


def test_csv_round_trip(tmp_path, data_dir):
    golden = load_golden(data_dir / "esci_us_judgments.json")
    golden.save_csv(tmp_path / "esci.csv.gz")
    again = load_golden(tmp_path / "esci.csv.gz")
    assert again.query.tolist() == golden.query.tolist() and again.grade.tolist() == golden.grade.tolist()
    assert again.relevance.tolist() == golden.relevance.tolist() and again.judge.tolist() == golden.judge.tolist()
    with gzip.open(tmp_path / "esci.csv.gz", "rt") as handle:
        assert handle.readline().strip() == "query,listing_id,relevance,grade,judge,simulated"


# -- the command line -----------------------------------------------------------------


@pytest.mark.slow
def test_golden_evaluate_on_the_demo(tmp_path):
    golden_file = tmp_path / "golden.csv.gz"
    result = qcat("golden", "generate", "--per-segment", "150", "--out", str(golden_file))
    assert result.returncode == 0, result.stderr
    golden = load_golden(golden_file)
    assert golden.simulated.all() and set(golden.judge.tolist()) == {"simulator"}
    assert (golden.grade != NO_GRADE).all() and golden.relevance.tolist() == (golden.grade >= 2).astype(int).tolist()
    # Each query judges its intent listing as Excellent.
    excellent_queries = set(golden.query[golden.grade == 3].tolist())
    assert excellent_queries == set(golden.query.tolist())

    out = tmp_path / "report"
    model = str(default_model_dir())
    result = qcat("golden", "evaluate", "--baseline", model, "--target", model, "--names", "NB", "NB again",
                  "--golden", str(golden_file), "--bootstrap", "50", "--out", str(out), "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert [s["name"] for s in report["systems"]] == ["no classifier", "NB", "NB again"]
    floor, nb, again = (s["segments"]["all"] for s in report["systems"])
    assert nb == again
    assert nb["F1"] > floor["F1"] + 0.05 and nb["NDCG*"] > floor["NDCG*"]
    assert set(report["query_sets"]["sampled"]) == {"head", "torso", "tail", "no demand"}
    same = [d for d in report["deltas"] if d["target"] == "NB again"][0]
    assert all(same[m]["delta"] == 0 for m in ("accuracy", "F1", "AUC", "NDCG*"))
    for name in ("report.md", "report.html", "report.json", "plots/metrics_by_segment.svg", "plots/target_deltas.svg"):
        assert (out / name).stat().st_size > 0
    markdown = (out / "report.md").read_text()
    assert "SIMULATED" in markdown and "| NB again − NB | head |" in markdown


@pytest.mark.slow
def test_golden_evaluate_esci_reports_unsearchable_listings(tmp_path, data_dir):
    model = str(default_model_dir())
    result = qcat("golden", "evaluate", "--baseline", model, "--target", model, "--golden",
                  str(data_dir / "esci_us_judgments.json"), "--bootstrap", "20", "--out", str(tmp_path), "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["inventory"]["unsearchable_golden_listings"] == 6597
    assert report["golden"]["queries"] == 150 and report["golden"]["graded"]
    assert "unsearchable" in result.stderr and "WARNING" in (tmp_path / "report.md").read_text()


@pytest.mark.slow
@pytest.mark.parametrize("args, message", [
    (["--golden", "/nonexistent/golden.csv"], "--golden /nonexistent/golden.csv: no such file"),
    (["--top-n", "0"], "argument -n/--top-n: must be at least 1, got 0"),
    (["--names", "no classifier", "x"], "distinct names"),
    (["--sample-fraction", "2"], "--sample-fraction: must be a number in [0, 1]"),
])
def test_golden_evaluate_errors_are_one_line(tmp_path, args, message):
    model = str(default_model_dir())
    result = qcat("golden", "evaluate", "--baseline", model, "--target", model, "--out", str(tmp_path), *args)
    assert result.returncode == 2 and message in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1
