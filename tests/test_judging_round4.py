"""Issue 46, "Judging, round 4": what needs no browser. The stalled-answer and layout checks in
Chromium are in test_judging_typeahead.py and test_judging_screen.py."""

from __future__ import annotations

import pytest
from judging_fixtures import ROOT, qcat, toy_queries
from sqlalchemy import select

from qcat.judging.grading import assignment
from qcat.judging.grading.desk import MAX_HOLD, PREFETCH, GradingDesk
from qcat.judging.grading.judges import add_judge
from qcat.judging.grading.sessions import store_session
from qcat.judging.store.connection import open_store
from qcat.judging.store.migrate import upgrade
from qcat.judging.store.models import Assignment


@pytest.fixture
def store(tmp_path):
    url = f"sqlite:///{tmp_path / 'round4.db'}"
    upgrade(url)
    store = open_store(url)
    yield store
    store.dispose()


def test_item_1_an_answer_keeps_every_query_the_panel_holds_whatever_it_wants(store):
    """The panel held 11 queries and, its judge's pace measured on a quick first answer, wanted 5:
    the desk answered with the first 5 of the list, and the judge, on the 10th by the time the answer
    came, lost it. Every held query that is still the judge's comes back, in the panel's order."""
    session_id = store_session(store, "stalled", "A", "B", toy_queries(40), judges_per_query=1)
    ann, _ = add_judge(store, "ann")
    desk = GradingDesk(store, ann.id, session_id)
    held = [shown["id"] for shown in desk.queue([], MAX_HOLD)]
    assert len(held) == MAX_HOLD
    first = held[0]
    shown = desk.drawn[first]
    action = {"id": "enter-1", "kind": "submit", "query": first, "text": "q", "seconds": 1.0,
              "grades": [[slot["listing"], slot["side"], 1] for slot in shown["slots"]]}
    assert desk.take([action])["enter-1"]["status"] == "saved"
    answer = [shown["id"] for shown in desk.queue(held[1:], 1 + PREFETCH)]
    assert answer[:MAX_HOLD - 1] == held[1:]
    assert all(set(shown) == {"id"} for shown in desk.queue(held[1:], 1 + PREFETCH)[:MAX_HOLD - 1])
    with store.sessions() as session:
        still_open = set(session.scalars(select(Assignment.query_id).where(Assignment.judge_id == ann.id,
                                                                          Assignment.status == "open")))
    assert set(held[1:]) <= still_open
    # a held query whose claim went to another judge is still passed over (as before)
    bob, _ = add_judge(store, "bob")
    assignment.release(store, query_id=held[5])
    GradingDesk(store, bob.id, session_id).queue([], MAX_HOLD)
    assert held[5] not in [shown["id"] for shown in desk.queue(held[1:], 1 + PREFETCH)]


@pytest.mark.slow
def test_item_2_3_one_file_for_two_outputs_of_an_export_is_refused_writing_nothing(tmp_path):
    """``--gold F --csv F`` wrote one over the other and reported both written."""
    db = tmp_path / "export.db"
    assert qcat("db", "upgrade", "--url", db).returncode == 0
    target = tmp_path / "out.tsv"
    for flags in (["--gold", target, "--csv", target],
                  ["--csv", target, "--qrels", tmp_path / "." / "out.tsv"]):
        result = qcat("judge", "export", "any session", "--url", db, *flags)
        assert result.returncode == 2, result.stderr
        line = result.stderr.strip()
        assert line.startswith("qcat: error: ") and "\n" not in line and "Traceback" not in line
        assert "name one file" in line and flags[0] in line and flags[2] in line and "nothing written" in line, line
        assert not target.exists()
    target.write_text("kept\n")
    (tmp_path / "link.tsv").symlink_to(target)
    result = qcat("judge", "export", "any session", "--url", db, "--gold", target, "--qrels", tmp_path / "link.tsv")
    assert result.returncode == 2 and "--qrels and --gold name one file" in result.stderr, result.stderr
    assert target.read_text() == "kept\n"


# ---- a category session of two models (and one of one), graded by two judges who disagree
SHIPPED, NB = "models/shipped", "models/nb"
PATHS = {"c1": "Toys > Trains", "c2": "Toys > Track", "c3": "Food > Rice", "c4": "Food > Dal"}


def category_session(store, models=(SHIPPED, NB), name="cats") -> int:
    """Four queries; each model proposes three categories (the second another order and one other)."""
    from qcat.judging.grading.sessions import SEGMENTS, Listing, QuerySpec

    def listed(ids):
        return [Listing(c, PATHS[c], PATHS[c]) for c in ids]

    queries = [QuerySpec(f"query {i}", SEGMENTS[i % 3], listed(["c1", "c2", "c3"]),
                         listed(["c2", "c1", "c4"]) if len(models) == 2 else []) for i in range(4)]
    return store_session(store, name, models[0], models[1] if len(models) == 2 else "", queries, judges_per_query=2,
                         settings={"top_k": 3, "sampled": {"head": 2, "torso": 1, "tail": 1}}, kind="categories")


def judge_everything(store, session_id: int, grades: dict[str, int]) -> None:
    from qcat.judging.grading import judgments

    for name, grade in grades.items():
        judge = add_judge(store, name)[0]
        while (screen := assignment.next_query(store, judge.id, session_id)) is not None:
            judgments.submit(store, judge.id, screen.query_id, {key: grade for key in screen.expected()})


def test_item_2_9_and_2_10_the_category_report_and_export_name_models_by_path(store, tmp_path):
    """Report and export called the two --models "baseline" and "target" (words the command line
    never uses), and report.md showed "`qcat judge add-gold`" with its backticks."""
    import csv

    from qcat.judging.reporting.categories import build_category_report, render_markdown
    from qcat.judging.reporting.export import write_csv

    session_id = category_session(store)
    judge_everything(store, session_id, {"ann": 3, "bob": 1})
    report = build_category_report(store, session_id, bootstrap=50)
    markdown = render_markdown(report, {})
    assert "baseline" not in markdown.lower() and "target" not in markdown.lower(), markdown
    assert "`" not in markdown
    assert f"categories of {SHIPPED} and {NB}" in markdown
    assert f"| all | {SHIPPED} | 4 |" in markdown.replace("\\_", "_")
    assert f"{NB} vs {SHIPPED}, per query" in markdown and f"δ = {NB} − {SHIPPED}" in markdown
    write_csv(store, session_id, tmp_path / "judgments.csv")
    with open(tmp_path / "judgments.csv", encoding="utf-8") as handle:
        systems = {row["listing_id"]: row["system"] for row in csv.DictReader(handle)}
    assert systems == {"c1": f"{SHIPPED} + {NB}", "c2": f"{SHIPPED} + {NB}", "c3": SHIPPED, "c4": NB}


def test_item_2_10_no_negative_zero_in_a_figure():
    """"δ precision@3 -0.0": a difference a hair below zero was written with its sign."""
    from qcat.evaluation.gold import interval
    from qcat.evaluation.report import with_interval

    tiny = {"value": -1e-17, "low": -0.0004, "high": 0.0867}
    assert with_interval(tiny, "+", digits=1) == "+0.0 [+0.0, +8.7]"
    assert with_interval({"value": -1e-17, "low": None, "high": None}, digits=1) == "0.0"
    assert interval({"value": -1e-17, "low": -0.00001, "high": 0.1}, "+") == "+0.0000 [+0.0000, +0.1000]"
    assert with_interval({"value": -0.02, "low": -0.05, "high": 0.0}, "+", digits=1) == "-2.0 [-5.0, +0.0]"


def test_item_2_4_a_one_model_category_session_reads_as_one(store):
    from qcat.judging.reporting.categories import build_category_report, render_markdown

    session_id = category_session(store, models=(SHIPPED,), name="one")
    judge_everything(store, session_id, {"ann": 2, "bob": 2})
    markdown = render_markdown(build_category_report(store, session_id, bootstrap=20), {})
    assert "model' " not in markdown and "models'" not in markdown
    assert f"categories of {SHIPPED}; judges saw the model's top 3 for each query" in markdown.replace("\\_", "_")


def test_item_2_4_add_gold_on_a_category_session_speaks_of_categories_and_their_grades(store, tmp_path):
    from qcat.errors import InputError
    from qcat.judging.grading.gold import add_gold

    session_id = category_session(store)
    cases = [("query 0\tc9\t3\n", "category 'c9' is not shown for query 'query 0' (among the categories proposed for "
                                  "it)"),
             ("query 0\tc1\t7\n", "0 (Wrong) to 3 (Exact)"),
             ("query 0\tc1\t3\n", "needs a grade for every category shown for it; 3 missing: 'c2', 'c3', 'c4'")]
    for row, message in cases:
        path = tmp_path / "gold.tsv"
        path.write_text("query\tcategory\tgrade\n" + row, encoding="utf-8")
        with pytest.raises(InputError) as error:
            add_gold(store, session_id, path)
        text = str(error.value)
        assert message in text, text
        assert "listing" not in text and "group" not in text and "Off-topic" not in text, text
    (tmp_path / "bad.tsv").write_text("query\tgrade\nquery 0\t3\n", encoding="utf-8")
    with pytest.raises(InputError, match="needs the columns query, category, grade; category missing"):
        add_gold(store, session_id, tmp_path / "bad.tsv")


@pytest.mark.slow
def test_item_2_4_the_admin_page_speaks_of_categories_in_a_category_session(tmp_path, monkeypatch):
    from streamlit.testing.v1 import AppTest

    from qcat.judging.grading.judges import add_admin

    url = f"sqlite:///{tmp_path / 'admin.db'}"
    upgrade(url)
    store = open_store(url)
    try:
        session_id = category_session(store)
        judge_everything(store, session_id, {"ann": 3, "bob": 1})  # 2 grades apart on every category
        token = add_admin(store, "lead")[1]
    finally:
        store.dispose()
    monkeypatch.setenv("QCAT_DB_URL", url)
    monkeypatch.setenv("QCAT_JUDGE_SESSION", str(session_id))
    at = AppTest.from_file(str(ROOT / "judging_app" / "pages" / "app.py"), default_timeout=30).run()
    at.text_input(key="token").input(token)
    next(b for b in at.button if b.label == "Sign in").click()
    at.run()
    captions = [c.value for c in at.caption]
    assert any("or more grades on a category, largest first" in c for c in captions), captions
    next(b for b in at.button if b.label == "Settle with these grades").click()
    at.run()
    assert [w.value for w in at.warning] == ["Choose a grade for at least one disputed category, then press Settle "
                                             "again."]
    assert not [c for c in captions if "listing" in c]


@pytest.mark.slow
def test_item_2_4_create_session_of_one_model_says_the_models_top_k_and_names_it_so(tmp_path):
    db = tmp_path / "one.db"
    assert qcat("db", "upgrade", "--url", db).returncode == 0
    (tmp_path / "traffic.txt").write_text("lego star wars\norange juice\nlego star wars\n", encoding="utf-8")
    model = ROOT / "demo" / "qcat_demo" / "model"
    result = qcat("judge", "create-session", "--kind", "categories", "--model", model, "--traffic",
                  tmp_path / "traffic.txt", "--default-segment", "tail", "--url", db)
    assert result.returncode == 0, result.stderr
    assert "each with the model's top 3 categories, in an order drawn per judge" in result.stderr, result.stderr
    assert "model' " not in result.stderr and "models'" not in result.stderr
    listed = qcat("judge", "sessions", "--url", db)
    assert "  categories of model, 20" in listed.stdout and " vs categories" not in listed.stdout, listed.stdout


@pytest.mark.slow
def test_item_2_5_a_category_session_opens_qcats_category_guidelines_on_a_judges_first_visit(tmp_path, monkeypatch):
    """Without --guidelines, judges never saw what Exact / Acceptable / Related / Wrong mean
    unless they pressed ?."""
    from judging_fixtures import panel_data
    from streamlit.testing.v1 import AppTest

    url = f"sqlite:///{tmp_path / 'guidelines.db'}"
    upgrade(url)
    store = open_store(url)
    try:
        cats = category_session(store)
        results = store_session(store, "results", "A", "B", toy_queries(3))
        token = add_judge(store, "ann")[1]
    finally:
        store.dispose()
    monkeypatch.setenv("QCAT_DB_URL", url)
    opened = {}
    for session_id in (cats, results):
        monkeypatch.setenv("QCAT_JUDGE_SESSION", str(session_id))
        at = AppTest.from_file(str(ROOT / "judging_app" / "pages" / "app.py"), default_timeout=30).run()
        at.text_input(key="token").input(token)
        next(b for b in at.button if b.label == "Sign in").click()
        at.run()
        data = panel_data(at)
        opened[session_id] = data["open_guidelines"]
        if session_id == cats:
            assert "3 Exact" in data["guidelines_html"] and "0 Wrong" in data["guidelines_html"]
            at.run()  # the same visit, a later run: not opened again
            assert panel_data(at)["open_guidelines"] is False
    assert opened == {cats: True, results: False}  # a result session without guidelines: as before


def test_item_2_10_you_n_judged_counts_a_submit_at_once(store):
    """"You: 0 judged" stayed 0 for the first submits: the counts were read again every 5 s."""
    session_id = store_session(store, "counts", "A", "B", toy_queries(10), judges_per_query=1)
    ann, _ = add_judge(store, "ann")
    desk = GradingDesk(store, ann.id, session_id)
    queue = desk.queue()
    assert desk.progress()["judged"] == 0
    for n, shown in enumerate(queue[:3], start=1):
        action = {"id": f"a{n}", "kind": "submit", "query": shown["id"], "text": "q", "seconds": 1.0,
                  "grades": [[slot["listing"], slot["side"], 2] for slot in shown["slots"]]}
        assert desk.take([action])[action["id"]]["status"] == "saved"
        assert desk.progress()["judged"] == n  # within the 5 s the session's counts are kept
    desk.take([{"id": "s", "kind": "skip", "query": queue[3]["id"], "text": "q"}])
    assert (desk.progress()["judged"], desk.progress()["skipped"]) == (3, 1)
