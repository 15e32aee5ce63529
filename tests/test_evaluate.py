"""``qcat evaluate`` on the demo corpus: the report's numbers, files and errors."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from test_cli import qcat

from qcat.classifier import default_model_dir, load_model
from qcat.cli import main as qcat_main
from qcat.evaluation.report import main_columns, tables
from qcat.measure.segments import segment_by_impressions
from qcat.training.nb import trainer as nb_trainer


@pytest.fixture(scope="module")
def demo_dataset(demo_ingested):
    return demo_ingested["dataset"]  # Corpus.open().dataset("base"), once a session (tests/conftest.py)


@pytest.fixture(scope="module")
def second_model(tmp_path_factory, demo_dataset):
    """An NB model with a coarse fixed threshold and alpha: a worse model to compare with."""
    model = nb_trainer.fit(demo_dataset, nb_trainer.NBConfig(thresholds=(20,), alphas=(1.0,)))
    directory = tmp_path_factory.mktemp("models") / "nb-coarse"
    model.save(directory)
    return directory


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory, second_model):
    out = tmp_path_factory.mktemp("report")
    code = qcat_main(["evaluate", "--model", str(default_model_dir()), "--name", "NB",
                      "--model", str(second_model), "--out", str(out)])
    assert code == 0
    return out


@pytest.mark.slow  # report_dir: an NB model trained and both evaluated on the demo corpus
def test_report_numbers_match_a_plain_recount(report_dir, demo_dataset) -> None:
    report = json.loads((report_dir / "report.json").read_text())
    test = demo_dataset.test
    assert report["source"]["queries"] == len(test.queries)
    assert [m["name"] for m in report["models"]] == ["NB", "nb-coarse"]

    # PR@1 and P@3 recounted with plain Python over the demo model's predictions.
    model = load_model(default_model_dir())
    predictions = model.predict(list(test.queries), 3)
    truth = [set() for _ in test.queries]
    for q, c in zip(test.pair_query, test.pair_category):
        truth[q].add(test.categories[c])
    top = [[model.labels[j] for j in row if j >= 0] for row in predictions.labels]
    pr1 = np.mean([row[0] in t for row, t in zip(top, truth)])
    p3 = np.mean([len(set(row[:3]) & t) / 3 for row, t in zip(top, truth)])
    scores = report["models"][0]["segments"]["all"]
    assert scores["PR@1"] == pytest.approx(pr1)
    assert scores["P@3"] == pytest.approx(p3)
    assert scores["PR@1"] == pytest.approx(model_metrics_pr1())

    segment = segment_by_impressions(np.nan_to_num(test.query_impressions))
    assert report["segments"] == {"head": int((segment == 0).sum()), "torso": int((segment == 1).sum()),
                                  "tail": int((segment == 2).sum())}
    head_pr1 = np.mean([row[0] in t for row, t, s in zip(top, truth, segment) if s == 0])
    assert report["models"][0]["segments"]["head"]["PR@1"] == pytest.approx(head_pr1)
    lengths = sum(b["queries"] for b in report["models"][0]["by_length"].values())
    assert lengths == len(test.queries)
    for model_report in report["models"]:
        for values in model_report["segments"].values():
            assert 0 <= values["PR@1"] <= 1 and 0 <= values["PSP@5"] <= 1 and values["XMAD@5"] >= 0


def model_metrics_pr1() -> float:
    """The demo model's own test PR@1, written into its manifest when it was built."""
    from qcat.bundles.bundle import read_manifest

    return read_manifest(default_model_dir()).metrics["test"]["pr@1"]


@pytest.mark.slow  # report_dir
def test_delta_table_is_laid_out_like_table_4(report_dir) -> None:
    report = json.loads((report_dir / "report.json").read_text())
    markdown = (report_dir / "report.md").read_text()
    section = markdown.split("### Differences against NB")[1].split("###")[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and "---" not in line]
    assert rows[0].startswith("| models | QSet | δ P | δ R | δ F1 | δ PR@1 | δ PR@3 | δ PR@10")
    assert [r.split("|")[2].strip() for r in rows[1:]] == ["head", "torso", "tail", "all",
                                                          "real-title", "real-2tok", "real-queries"]
    assert rows[1].split("|")[1].strip() == "nb-coarse − NB"
    for row, segment in zip(rows[1:], ["head", "torso", "tail", "all"]):
        delta_pr1 = float(row.split("|")[6])
        expected = 100 * (report["models"][1]["segments"][segment]["PR@1"] - report["models"][0]["segments"][segment]["PR@1"])
        assert delta_pr1 == pytest.approx(expected, abs=0.006)


@pytest.mark.slow  # report_dir
def test_report_files_are_self_contained(report_dir) -> None:
    html = (report_dir / "report.html").read_text()
    calibrated = "nodes.json" in json.loads((default_model_dir() / "manifest.json").read_text())["files"]
    assert html.count("<svg") == 3 + calibrated  # the node answers' curve with a node calibration (issue 52)
    assert not re.search(r'(src|href)="(http|//|plots/)', html)  # nothing to fetch: plots are inline
    for title in ("all queries", "head queries", "torso queries", "tail queries", "Differences against NB"):
        assert title in html
    markdown = (report_dir / "report.md").read_text()
    for path in re.findall(r"!\[[^]]*\]\(([^)]+)\)", markdown):
        assert (report_dir / path).read_text().lstrip().startswith("<?xml")
    json.loads((report_dir / "report.json").read_text(), parse_constant=lambda c: pytest.fail(f"{c} in JSON"))


@pytest.mark.slow  # a qcat evaluate process on the demo corpus
def test_evaluate_cli_json_and_fit(tmp_path) -> None:
    # The real sets and the hybrid are the report fixture's: its NB part answers here (about two thirds of the CPU)
    result = qcat("evaluate", "--model", default_model_dir() / "nb", "--out", tmp_path / "r", "--json", "--fit-propensity",
                  "-k", "3", "--query-set", "simulated")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["propensity"]["fitted"] and report["options"]["k"] == 3
    assert "PSP@3" in report["models"][0]["segments"]["tail"]
    assert "fitted propensity" in result.stderr


@pytest.mark.slow  # a qcat process each
@pytest.mark.parametrize("args, message", [
    (["--model", "/nonexistent/model"], "/nonexistent/model"),
    (["--threshold", "2"], "--threshold must lie in [0, 1]"),
    (["--name", "a", "--name", "b"], "2 names for 1 models"),
])
def test_evaluate_errors_are_one_line(tmp_path, args, message) -> None:
    base = [] if "--model" in args else ["--model", str(default_model_dir())]
    result = qcat("evaluate", *base, *args, "--out", tmp_path)
    assert result.returncode == 2
    assert message in result.stderr and "Traceback" not in result.stderr


@pytest.mark.slow  # bestbuy_model_dir trains a model
def test_model_on_another_taxonomy_is_refused(tmp_path, bestbuy_model_dir) -> None:
    result = qcat("evaluate", "--model", bestbuy_model_dir, "--out", tmp_path)
    assert result.returncode == 2
    assert "another taxonomy" in result.stderr and "Traceback" not in result.stderr


def test_a_report_without_the_simulated_split_compares_its_real_sets_only() -> None:
    """A report of real-text sets alone (``--query-set real-title --query-set real-2tok``): the
    difference table has no head/torso/tail rows, one row per set, each cell the later model's
    figure minus the first's in percentage points, "–" where a figure is missing."""
    columns = main_columns(5)

    def scores(base: float) -> dict:
        return {c: base + i / 100 for i, c in enumerate(columns)} | {"ECE": 0.1, "ECE raw": 0.2}

    b_2tok = scores(0.25) | {"PR@10": float("nan")}
    report = {"options": {"k": 5}, "query_sets": ["real-title", "real-2tok"],
              "real_sets": {"real-title": {"split": "test", "queries": 10}, "real-2tok": {"split": "test", "queries": 8}},
              "models": [{"name": "NB", "query_sets": {"real-title": scores(0.5), "real-2tok": scores(0.375)}},
                         {"name": "XReg", "query_sets": {"real-title": scores(0.625), "real-2tok": b_2tok}}]}
    delta, = (t for t in tables(report) if t.title.startswith("Differences against NB"))
    assert delta.header == ("models", "QSet") + tuple(f"δ {c}" for c in columns)
    assert [row[:2] for row in delta.rows] == [("XReg − NB", "real-title"), ("", "real-2tok")]
    assert delta.rows[0][2:] == ("+12.50",) * len(columns)
    assert delta.rows[1][2:] == tuple("–" if c == "PR@10" else "-12.50" for c in columns)
    assert not any(t.title.split()[0] in ("all", "head", "torso", "tail") for t in tables(report))
