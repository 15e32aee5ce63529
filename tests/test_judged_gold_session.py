"""Issue 39's requirement: ``qcat evaluate --gold`` on a category session's export gives exactly the
figures ``qcat judge report`` gives for the same models (values, bootstrap intervals, per segment,
wins/ties/losses and paired differences)."""

from __future__ import annotations

import json

import pytest
from judging_fixtures import qcat

from qcat.judging.grading import assignment, judgments
from qcat.judging.grading.judges import add_judge
from qcat.judging.grading.sessions import SEGMENTS, Listing, QuerySpec, store_session
from qcat.judging.reporting.categories import category_grades
from qcat.judging.reporting.export import write_graded_gold_file
from qcat.judging.reporting.results import load_results
from qcat.judging.store.connection import open_store
from qcat.judging.store.migrate import upgrade
from qcat.measure.graded_gold import read_graded_gold
from qcat.measure.judged import judged_grade
from tests.test_judging_categories import MODEL, NB, category_db, graded_copy  # noqa: F401  (a fixture)


def test_the_gold_export_of_a_category_session_reads_back_with_the_judged_grades_segments_and_k(tmp_path) -> None:
    """The hand-over the slow test relies on, in-process: ``export --gold`` of a category session
    writes, per query and category, the grade the report uses (two judges' mean rounded half up),
    each query's segment and the session's k, and evaluate's reader reads back exactly those."""
    url = f"sqlite:///{tmp_path / 'cats.db'}"
    upgrade(url)
    store = open_store(url)
    given: dict[str, dict[str, list[int]]] = {}
    texts: dict[int, str] = {}
    try:
        def listed(categories: tuple[str, ...]) -> list[Listing]:
            return [Listing(c, f"Toys > {c}", f"Toys > {c}") for c in categories]

        queries = [QuerySpec(f"query {q}", SEGMENTS[q % 3], listed(("c1", "c2")), listed(("c2", "c3"))) for q in range(3)]
        session_id = store_session(store, "a vs b", "a", "b", queries, judges_per_query=2, settings={"top_k": 2},
                                   kind="categories")
        for offset, name in enumerate(("ann", "bob")):
            judge = add_judge(store, name)[0].id
            while (shown := assignment.next_query(store, judge, session_id)) is not None:
                grades = {item.listing_id: (shown.query_id + offset * int(item.listing_id[1])) % 4
                          for item in shown.left}
                judgments.submit(store, judge, shown.query_id, {(c, "left"): g for c, g in grades.items()})
                texts[shown.query_id] = shown.text
                for category, grade in grades.items():
                    given.setdefault(shown.text, {}).setdefault(category, []).append(grade)
        reported = category_grades(load_results(store, session_id))
        assert write_graded_gold_file(store, "a vs b", tmp_path / "gold.tsv") == 9  # 3 categories a query
    finally:
        store.dispose()
    gold = read_graded_gold(tmp_path / "gold.tsv", say=None)
    assert gold.grades == {texts[query]: grades for query, grades in reported.items()}  # the report's grades
    assert gold.grades == {text: {c: judged_grade(g) for c, g in grades.items()} for text, grades in given.items()}
    assert gold.segments == {f"query {q}": SEGMENTS[q % 3] for q in range(3)}
    assert gold.top_k() == 2 and gold.meta["sample"] == "random"


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
