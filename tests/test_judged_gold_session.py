"""Issue 39's requirement: ``qcat evaluate --gold`` on a category session's export gives exactly the
figures ``qcat judge report`` gives for the same models (values, bootstrap intervals, per segment,
wins/ties/losses and paired differences)."""

from __future__ import annotations

import json

import pytest
from judging_fixtures import qcat

from tests.test_judging_categories import MODEL, NB, category_db, graded_copy  # noqa: F401  (a fixture)


@pytest.mark.slow
def test_evaluate_gold_on_the_export_equals_the_session_report(category_db, tmp_path) -> None:  # noqa: F811
    copy = graded_copy(category_db[0], tmp_path)
    result = qcat("judge", "report", "shipped vs nb", "--url", copy, "--out", tmp_path / "session")
    assert result.returncode == 0, result.stderr
    report = json.loads((tmp_path / "session" / "report.json").read_text())
    gold = tmp_path / "gold.tsv"
    result = qcat("judge", "export", "shipped vs nb", "--url", copy, "--gold", gold)
    assert result.returncode == 0, result.stderr
    # The session's baseline and target, in that order; the smallest click-based part beside it.
    result = qcat("evaluate", "--model", MODEL, "--model", NB, "--gold", gold, "--query-set", "real-queries",
                  "--out", tmp_path / "evaluated")
    assert result.returncode == 0, result.stderr
    evaluated = json.loads((tmp_path / "evaluated" / "report.json").read_text())
    assert evaluated["gold"]["k"] == report["session"]["top_k"] == 3
    baseline, target = evaluated["models"]
    assert [s["segment"] for s in report["segments"]] == list(baseline["gold"]) == ["all", "head", "torso", "tail"]
    for segment in report["segments"]:
        name = segment["segment"]
        assert segment["models"]["baseline"] == baseline["gold"][name], name
        assert segment["models"]["target"] == target["gold"][name], name
        assert segment["paired"] == target["gold_paired"][name], name
