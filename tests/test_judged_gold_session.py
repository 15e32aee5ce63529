"""Issue 39's requirement: ``qcat evaluate --gold`` on a category session's export gives exactly the
figures ``qcat judge report`` gives for the same models (values, bootstrap intervals, per segment,
wins/ties/losses and paired differences)."""

from __future__ import annotations

import json
import shutil

import pytest
from judging_fixtures import qcat

from qcat.judging.grading import assignment, judgments
from qcat.judging.grading.judges import find_judge
from qcat.judging.store.connection import open_store
from tests.test_judging_categories import MODEL, NB, category_db, simulated_grade  # noqa: F401  (a fixture)


@pytest.mark.slow
def test_evaluate_gold_on_the_export_equals_the_session_report(category_db, tmp_path) -> None:  # noqa: F811
    db, _ = category_db
    copy = tmp_path / "graded.db"
    shutil.copy(db, copy)
    store = open_store(str(copy))
    try:
        with store.sessions() as session:
            judges = {name: find_judge(session, name).id for name in ("ann", "bob", "cy")}
        for name, judge_id in judges.items():
            while (shown := assignment.next_query(store, judge_id, 1)) is not None:
                judgments.submit(store, judge_id, shown.query_id,
                                 {(i.listing_id, "left"): simulated_grade(shown.query_id, i.listing_id, name)
                                  for i in shown.left}, resubmit=False)
    finally:
        store.dispose()
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
