"""Category sessions (issue 39): judges grade the categories the shipped demo model and its NB part
propose; the report equals a recount from the database; the export is a graded gold file.

The store is made by the CLI (``qcat judge create-session --kind categories``) from a small
traffic file, so no click log is read. The Chromium test has 3 judges grade every query with the
keyboard, checks each grade is stored as typed, that the models are never named on the wire or the
page, and writes docs/judging_categories_1280x800.png with ``QCAT_UPDATE_SCREENSHOT=1``.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from judging_fixtures import (
    CHROMIUM,
    ROOT,
    SETTLED,
    add_judges,
    launch_chromium,
    panel_shown,
    qcat,
    running_judging_app,
    stored_grades,
    type_keys,
)

from qcat.judging.grading import assignment, judgments, screens
from qcat.judging.grading.judges import find_judge
from qcat.judging.store.connection import open_store

MODEL = ROOT / "demo" / "qcat_demo" / "model"
NB = MODEL / "nb"
TRAFFIC = [("iphone 8 case", "head"), ("orange juice", "head"), ("lego star wars", "torso"),
           ("screen protector galaxy", "torso"), ("paprika", "tail"), ("remote control truck", "tail")]


def write_traffic(path: Path) -> Path:
    path.write_text("query,segment\n" + "".join(f"{q},{s}\n" for q, s in TRAFFIC), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def category_db(tmp_path_factory) -> tuple[Path, list[str]]:
    """A migrated SQLite store with 3 judges and a 6-query category session of two models."""
    root = tmp_path_factory.mktemp("categories")
    db = root / "cats.db"
    assert qcat("db", "upgrade", "--url", db).returncode == 0
    tokens = add_judges(db, ("ann", "bob", "cy"))
    result = qcat("judge", "create-session", "--kind", "categories", "--model", MODEL, "--model", NB,
                  "--traffic", write_traffic(root / "traffic.csv"), "--top-k", "3", "--name", "shipped vs nb",
                  "--display-name", "Category check", "--url", db)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "1"
    assert "6 queries" in result.stderr
    return db, tokens


def proposals(db: Path) -> dict[str, dict[int, list[str]]]:
    """system -> query id -> the categories the model proposed, best first (read with plain SQL)."""
    out: dict[str, dict[int, list[str]]] = defaultdict(dict)
    with sqlite3.connect(db) as con:
        for system, query_id, category in con.execute(
                "select l.system, l.query_id, i.listing_id from result_lists l join result_items i on i.list_id = l.id "
                "order by l.system, l.query_id, i.position"):
            out[system].setdefault(query_id, []).append(category)
    return out


@pytest.mark.slow
def test_a_category_session_stores_each_models_top_k_and_shows_their_union(category_db):
    db, _ = category_db
    proposed = proposals(db)
    assert set(proposed) == {"baseline", "target"} and len(proposed["baseline"]) == 6
    assert all(1 <= len(c) <= 3 for lists in proposed.values() for c in lists.values())
    with sqlite3.connect(db) as con:
        assert con.execute("select kind, baseline_model, target_model from judging_sessions").fetchone() == (
            "categories", str(MODEL), str(NB))
        assert dict(con.execute("select text, segment from session_queries")) == dict(TRAFFIC)
    store = open_store(str(db))
    try:
        with store.sessions() as session:
            orders = {}
            for judge_id in (1, 2, 3, 4, 5):
                shown = screens.screen(session, 1, judge_id)
                assert shown.kind == "categories" and shown.right == []
                assert [item.position for item in shown.left] == list(range(1, len(shown.left) + 1))
                orders[judge_id] = [item.listing_id for item in shown.left]
                assert orders[judge_id] == [i.listing_id for i in screens.screen(session, 1, judge_id).left]
            union = set(proposed["baseline"][1]) | set(proposed["target"][1])
            assert all(sorted(order) == sorted(union) for order in orders.values())  # each category once
            if len(union) > 2:
                assert len({tuple(order) for order in orders.values()}) > 1  # an order per judge
            path = screens.screen(session, 1, 1).left[0].title
            assert " > " in path  # the full path is shown
    finally:
        store.dispose()


@pytest.mark.slow
def test_wrong_flags_for_a_category_session_are_refused(category_db, tmp_path):
    db, _ = category_db
    traffic = write_traffic(tmp_path / "t.csv")
    cases = [
        (["--model", MODEL, "--baseline", MODEL], "--baseline applies to result sessions"),
        ([], "give --model MODEL once or twice"),
        (["--model", MODEL, "--model", MODEL], "is given twice"),
        (["--model", MODEL, "--top-k", "6"], "--top-k"),
        (["--model", MODEL, "--period", "candidate"], "--period"),
    ]
    for extra, message in cases:
        result = qcat("judge", "create-session", "--kind", "categories", "--traffic", traffic, *extra, "--url", db)
        assert result.returncode == 2, (extra, result.stderr)
        assert message in result.stderr and "Traceback" not in result.stderr, result.stderr
    bad = tmp_path / "bad.csv"
    bad.write_text("query,segment\nlego,middle\n", encoding="utf-8")
    result = qcat("judge", "create-session", "--kind", "categories", "--model", MODEL, "--traffic", bad, "--url", db)
    assert result.returncode == 2 and f"{bad}:2" in result.stderr and "middle" in result.stderr
    result = qcat("judge", "create-session", "--baseline", MODEL, "--target", MODEL, "--top-k", "2", "--url", db)
    assert result.returncode == 2 and "--top-k applies to --kind categories only" in result.stderr


@pytest.mark.slow
def test_the_shipped_guidelines_are_printed_to_start_a_teams_own_from():
    result = qcat("judge", "guidelines", "--kind", "categories")
    assert result.returncode == 0 and "| **3 Exact** |" in result.stdout and "| **0 Wrong** |" in result.stdout
    assert "Excellent" in qcat("judge", "guidelines").stdout  # a result session's


@pytest.mark.slow
def test_a_downgrade_below_0008_is_refused_while_a_category_session_exists(category_db, tmp_path):
    copy = tmp_path / "down.db"
    shutil.copy(category_db[0], copy)
    assert qcat("db", "downgrade", "--revision", "0008", "--url", copy).returncode == 0  # 0009: no node answers here
    result = qcat("db", "downgrade", "--url", copy)
    assert result.returncode == 2 and "1 category session(s) in the store would read as result sessions" in result.stderr
    assert qcat("db", "current", "--url", copy).stdout.strip() == "0008"
    with sqlite3.connect(copy) as con:
        con.execute("delete from judging_sessions where kind = 'categories'")
    assert qcat("db", "downgrade", "--url", copy).returncode == 0
    assert qcat("db", "current", "--url", copy).stdout.strip() == "0007"


@pytest.mark.slow
def test_a_session_drawn_from_a_users_own_click_log(tmp_path):
    """--log/--taxonomy: a third each of head, torso and tail of the log's queries by impressions,
    with a model trained on that log (its own taxonomy, no corpus)."""
    from tests.test_decide import small_log

    log, taxonomy = small_log(tmp_path)
    trained = qcat("train", "nb", "--log", log, "--taxonomy", taxonomy, "--min-clicks", "1", "--out", tmp_path / "nb")
    assert trained.returncode == 0, trained.stderr
    db = tmp_path / "own.db"
    assert qcat("db", "upgrade", "--url", db).returncode == 0
    result = qcat("judge", "create-session", "--kind", "categories", "--model", tmp_path / "nb", "--log", log,
                  "--taxonomy", taxonomy, "--queries", "9", "--top-k", "2", "--url", db)
    assert result.returncode == 0, result.stderr
    with sqlite3.connect(db) as con:
        segments = [row[0] for row in con.execute("select segment from session_queries")]
        settings = json.loads(con.execute("select settings from judging_sessions").fetchone()[0])
    assert sorted(segments) == ["head"] * 3 + ["tail"] * 3 + ["torso"] * 3
    assert settings["log"] == str(log) and settings["top_k"] == 2
    refused = qcat("judge", "create-session", "--kind", "categories", "--model", tmp_path / "nb", "--log", log,
                   "--url", db)
    assert refused.returncode == 2 and "--log and --taxonomy go together" in refused.stderr


def test_a_plain_traffic_file_counts_repeated_lines_as_impressions(tmp_path):
    from qcat.judging.grading.categories import read_traffic

    path = tmp_path / "traffic.txt"
    path.write_text("Lego\nlego\n\nPaprika\n", encoding="utf-8")
    assert read_traffic(path) == [("Lego", 2.0, None), ("Paprika", 1.0, None)]  # as first written
    assert read_traffic(path, "tail") == [("Lego", 2.0, "tail"), ("Paprika", 1.0, "tail")]


@pytest.mark.slow
def test_a_one_model_session_has_no_target_lists(category_db, tmp_path):
    db, _ = category_db
    copy = tmp_path / "one.db"
    shutil.copy(db, copy)
    result = qcat("judge", "create-session", "--kind", "categories", "--model", NB, "--traffic",
                  write_traffic(tmp_path / "t.csv"), "--top-k", "2", "--name", "nb alone", "--url", copy)
    assert result.returncode == 0, result.stderr
    session_id = int(result.stdout)
    with sqlite3.connect(copy) as con:
        systems = {row[0] for row in con.execute(
            "select l.system from result_lists l join session_queries q on q.id = l.query_id where q.session_id = ?",
            (session_id,))}
    assert systems == {"baseline"}


def simulated_grade(query_id: int, category: str, judge: str) -> int:
    """A made-up grade that differs by judge now and then (so that agreement is not trivially 1)."""
    return (query_id * 7 + sum(map(ord, category)) + (1 if judge == "cy" and query_id % 2 else 0)) % 4


def recount(db: Path, k: int) -> dict:
    """The report's main figures recomputed from the database with plain SQL and Python."""
    with sqlite3.connect(db) as con:
        grades = defaultdict(list)
        for query_id, category, grade in con.execute(
                "select j.query_id, j.listing_id, j.grade from judgments j join assignments a on a.judge_id = j.judge_id "
                "and a.query_id = j.query_id where a.status = 'done'"):
            grades[(query_id, category)].append(grade)
        paths = dict(con.execute("select listing_id, category from result_items"))
    graded = {key: int(np.floor(np.mean(g) + 0.5)) for key, g in grades.items()}
    out = {}
    for system, lists in proposals(db).items():
        acceptable, exact, severe, precision = [], [], [], []
        for query_id, ranked in sorted(lists.items()):
            top = graded[(query_id, ranked[0])]
            acceptable.append(top >= 2)
            exact.append(top == 3)
            good = {paths[c].split(" > ")[0] for (q, c), g in graded.items() if q == query_id and g >= 2}
            severe.append(top == 0 and bool(good) and paths[ranked[0]].split(" > ")[0] not in good)
            precision.append(sum(graded.get((query_id, c), 0) >= 2 for c in ranked[:k]) / k)
        out[system] = {name: float(np.mean(v)) for name, v in (("acceptable", acceptable), ("exact", exact),
                                                               ("severe", severe), ("precision", precision))}
    return out


def graded_copy(db: Path, tmp_path: Path) -> Path:
    """A copy of the session's store with every query graded by ann, bob and cy (:func:`simulated_grade`)."""
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
    return copy


@pytest.mark.slow
def test_the_report_equals_a_recount_from_the_database_and_the_export_is_graded_gold(category_db, tmp_path):
    db, _ = category_db
    copy = graded_copy(db, tmp_path)
    out = tmp_path / "report"
    result = qcat("judge", "report", "shipped vs nb", "--url", copy, "--out", out, "--bootstrap", "200")
    assert result.returncode == 0, result.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["session"]["kind"] == "categories" and report["coverage"]["complete"] == 6
    overall = next(s for s in report["segments"] if s["segment"] == "all")
    expected = recount(copy, 3)
    for system in ("baseline", "target"):
        for name, value in expected[system].items():
            assert overall["models"][system][name]["value"] == pytest.approx(value), (system, name)
            cell = overall["models"][system][name]
            assert cell["low"] <= value + 1e-12 and value <= cell["high"] + 1e-12
    assert overall["paired"]["win"] + overall["paired"]["tie"] + overall["paired"]["loss"] == 6
    assert overall["paired"]["acceptable"]["value"] == pytest.approx(
        expected["target"]["acceptable"] - expected["baseline"]["acceptable"])
    assert report["agreement"][0]["units"] > 0
    markdown = (out / "report.md").read_text()
    assert "Human-judged top-1" in markdown and "Krippendorff" in markdown and (out / "report.html").exists()
    gold = tmp_path / "gold.tsv"
    result = qcat("judge", "export", "shipped vs nb", "--url", copy, "--gold", gold)
    assert result.returncode == 0, result.stderr
    from qcat.measure.graded_gold import read_graded_gold

    read = read_graded_gold(gold)
    assert read.top_k() == 3 and len(read) == 6 and set(read.segments.values()) == {"head", "torso", "tail"}
    with sqlite3.connect(copy) as con:
        texts = dict(con.execute("select id, text from session_queries"))
    counted = defaultdict(list)
    with sqlite3.connect(copy) as con:
        for query_id, category, grade in con.execute("select query_id, listing_id, grade from judgments"):
            counted[(texts[query_id], category)].append(grade)
    assert {(q, c): g for q, grades in read.grades.items() for c, g in grades.items()} == {
        key: int(np.floor(np.mean(g) + 0.5)) for key, g in counted.items()}
    # a graded gold file's queries can be gold questions of a category session (its column "category")
    lines = gold.read_text().splitlines()
    body = lines.index(next(line for line in lines if line.startswith("query\t"))) + 1  # after the # lines and header
    first = lines[body].split("\t")[0]
    (tmp_path / "known.tsv").write_text("\n".join(lines[:body] + [line for line in lines[body:]
                                                                   if line.startswith(first + "\t")]))
    added = qcat("judge", "add-gold", "--session", "shipped vs nb", "--file", tmp_path / "known.tsv", "--url", copy)
    assert added.returncode == 0 and "1 gold question" in added.stderr, added.stderr
    again = qcat("judge", "report", "shipped vs nb", "--url", copy, "--out", tmp_path / "report2", "--bootstrap", "40")
    assert again.returncode == 0, again.stderr
    gold_report = json.loads((tmp_path / "report2" / "report.json").read_text())
    assert gold_report["coverage"]["complete"] == 5 and gold_report["gold"]["queries"] == 1
    assert {g["judge"] for g in gold_report["gold"]["judges"]} == {"ann", "bob", "cy"}
    refused = qcat("judge", "export", "shipped vs nb", "--url", copy, "--golden", tmp_path / "golden.csv")
    assert refused.returncode == 2 and "grades categories, not listings" in refused.stderr
    assert not (tmp_path / "golden.csv").exists()


# ---- the grading panel in a real browser

playwright = pytest.importorskip("playwright.sync_api", reason="playwright is in the test extra")


@pytest.mark.slow
def test_three_judges_grade_a_category_session_in_chromium_blind(category_db, tmp_path):
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM}: install the 'chromium' system package (.ci/run does)")
    db = tmp_path / "e2e.db"
    shutil.copy(category_db[0], db)
    tokens = category_db[1]
    typed: dict[str, dict[int, dict[tuple[str, str], int]]] = {}
    wire: list[bytes] = []
    pages: list[str] = []
    data: list[str] = []  # what the server sent the panel, as it holds it
    with running_judging_app(db, tmp_path / "app.log") as url, playwright.sync_playwright() as p:
        browser = launch_chromium(p)
        try:
            for index, (name, token) in enumerate(zip(("ann", "bob", "cy"), tokens)):
                context = browser.new_context(viewport={"width": 1280, "height": 800})
                page = context.new_page()
                page.set_default_timeout(20_000)
                page.on("websocket", lambda ws: ws.on("framereceived", lambda payload: wire.append(
                    payload if isinstance(payload, bytes) else payload.encode())))  # every frame the page gets
                page.goto(url)
                page.get_by_label("Your judge token").fill(token)
                page.keyboard.press("Enter")
                typed[name] = {}
                shown = panel_shown(page)
                page.locator(".qcat-panel .help").wait_for()  # issue 46 item 2.5: qcat's guidelines open first
                page.keyboard.press("Escape")
                for step in range(6):
                    assert page.locator(".qcat-panel .categories .card.category").count() == len(shown["slots"])
                    if index == 0 and step == 0 and os.environ.get("QCAT_UPDATE_SCREENSHOT"):
                        page.screenshot(path=str(ROOT / "docs" / "judging_categories_1280x800.png"))
                    digits = [(shown["id"] + i + index) % 4 for i in range(len(shown["slots"]))]
                    typed[name][shown["id"]] = {tuple(slot): d for slot, d in zip(shown["slots"], digits)}
                    pages.append(page.content())
                    data.append(page.evaluate("() => JSON.stringify(window.qcatPanel.data)"))
                    type_keys(page, [*digits, "Enter"])
                    if step < 5:
                        shown = panel_shown(page)
                        assert shown["id"] not in typed[name]
                page.wait_for_function(SETTLED)
                assert page.locator(".qcat-panel .msg.error").count() == 0
                context.close()
        finally:
            browser.close()
    for name, grades in typed.items():
        assert stored_grades(db, name) == grades
    received = b"".join(wire)
    assert b"Categories proposed for this query" in received  # the frames were heard
    for secret in (str(MODEL), str(NB), "qcat_demo/model", "shipped vs nb"):  # the models and the session's name
        assert secret.encode() not in received, secret
        assert all(secret not in html for html in pages), secret
    for word in ("baseline", "target", "system", "model"):  # the panel's data never says who proposed what
        assert all(word not in sent for sent in data), word
    result = qcat("judge", "report", "1", "--url", db, "--out", tmp_path / "report", "--bootstrap", "100")
    assert result.returncode == 0, result.stderr
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    assert report["coverage"]["complete"] == 6 and report["coverage"]["judges"] == 3
    overall = next(s for s in report["segments"] if s["segment"] == "all")
    for system, figures in recount(db, 3).items():
        for name, value in figures.items():
            assert overall["models"][system][name]["value"] == pytest.approx(value), (system, name)


# ---- the app under AppTest: the guidelines, the panel's data and the admin page of a category session

CATEGORY_QUERIES = [("lego star wars", "head", ["c1", "c2"], ["c2", "c3"]),
                    ("paprika", "tail", ["c4"], ["c5", "c4"])]


@pytest.fixture
def category_app(tmp_path, monkeypatch, fresh_sign_in_limits):
    from qcat.judging.grading.judges import add_admin, add_judge
    from qcat.judging.grading.sessions import Listing, QuerySpec, store_session
    from qcat.judging.store.migrate import upgrade

    url = f"sqlite:///{tmp_path / 'app.db'}"
    upgrade(url)
    store = open_store(url)

    def listed(ids: list[str]) -> list[Listing]:
        return [Listing(c, f"Toys > Leaf {c}", f"Toys > Leaf {c}") for c in ids]

    session_id = store_session(store, "secret-model-a vs secret-model-b", "models/secret-model-a", "models/secret-model-b",
                               [QuerySpec(text, segment, listed(a), listed(b)) for text, segment, a, b in CATEGORY_QUERIES],
                               kind="categories", settings={"kind": "categories", "top_k": 2})
    tokens = {name: add_judge(store, name)[1] for name in ("ann", "bob")}
    tokens["boss"] = add_admin(store, "boss")[1]
    monkeypatch.setenv("QCAT_DB_URL", url)
    monkeypatch.setenv("QCAT_JUDGE_SESSION", str(session_id))
    yield store, tokens
    store.dispose()


def app_signed_in(token: str):
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "judging_app" / "pages" / "app.py"), default_timeout=30).run()
    at.text_input(key="token").input(token)
    next(b for b in at.button if b.label == "Sign in").click()
    return at.run()


@pytest.mark.slow
def test_the_app_sends_one_group_of_categories_with_their_own_grades_and_guidelines(category_app):
    from judging_fixtures import panel_data, panel_send

    store, tokens = category_app
    for name, grade in (("ann", 0), ("bob", 3)):  # 3 grades apart on every category: disputed
        at = app_signed_in(tokens[name])
        data = panel_data(at)
        shown = data["queue"][0]
        assert shown["kind"] == "categories" and shown["right"] == []
        assert shown["grade_names"] == ["Wrong", "Related", "Acceptable", "Exact"]
        assert "Judge each category against the query" in data["guidelines_html"]
        assert "secret-model" not in json.dumps(data)
        for _ in CATEGORY_QUERIES:
            query = panel_data(at)["queue"][0]
            action = {"id": f"{name}-{query['id']}", "kind": "submit", "query": query["id"], "text": query["text"],
                      "grades": [[slot["listing"], slot["side"], grade] for slot in query["slots"]]}
            at = panel_send(at, action)
    at = app_signed_in(tokens["boss"])
    assert not at.exception
    assert any(r.key and r.key.startswith("admin_settle_") and "3 Exact" in r.options
               for r in at.radio), [r.key for r in at.radio]


@pytest.mark.slow
def test_a_settled_category_grade_replaces_the_judges_mean_in_the_report_and_the_export(category_db, tmp_path):
    from qcat.judging.grading import disagreements
    from qcat.judging.reporting.categories import build_category_report
    from qcat.measure.graded_gold import read_graded_gold

    copy = graded_copy(category_db[0], tmp_path)
    top = proposals(copy)["baseline"][1][0]  # the baseline's top category of query 1
    store = open_store(str(copy))
    try:
        before = build_category_report(store, 1, bootstrap=0)
        for grade in (0, 3):  # settled wrong, then exact: the latest settlement counts
            disagreements.settle(store, None, 1, {top: grade}, "checked against the catalog", 1)
            report = build_category_report(store, 1, bootstrap=0)
            query = next(q for q in report["per_query"] if q["query_id"] == 1)
            assert query["grades"][top] == grade and report["settled_categories"] == 1
    finally:
        store.dispose()
    overall = next(s for s in report["segments"] if s["segment"] == "all")["models"]["baseline"]
    first = next(q for q in before["per_query"] if q["query_id"] == 1)["grades"][top]
    was = next(s for s in before["segments"] if s["segment"] == "all")["models"]["baseline"]["exact"]["value"]
    assert overall["exact"]["value"] == pytest.approx(was + (first != 3) / 6)
    assert qcat("judge", "export", "1", "--url", copy, "--gold", tmp_path / "g.tsv").returncode == 0
    with sqlite3.connect(copy) as con:
        text = con.execute("select text from session_queries where id = 1").fetchone()[0]
    assert read_graded_gold(tmp_path / "g.tsv").grades[text][top] == 3
