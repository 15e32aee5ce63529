"""Issue 41, items 1 and 2: keys typed ahead, blind, are never lost nor shifted; and the panel
holds enough queries, from the judge's pace, not to run dry.

Three judges in Chromium (Debian's, driven by Playwright) each type groups of 8 grades and Enter,
a key about every 30 ms, without ever looking at the screen (no wait for a query to show), against
a real ``qcat judge app`` whose every panel message is slowed by a test hook
(``QCAT_TEST_PANEL_DELAY``), so that their panels run out of queries held ready again and again.
Each typed group must be stored once, on a query of its own, in the order typed. A judge typing at
speed, who looks at each query, never waits for one on that slow server: their panel asks for as
many queries as they get through in two round trips.
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from pathlib import Path

import pytest
from judging_fixtures import (
    CHROMIUM,
    SETTLED,
    free_port,
    launch_chromium,
    panel_shown,
    running_judging_app,
    signed_in_panel,
    start_judging_app,
    stop_judging_app,
)
from sqlalchemy import select

from qcat.judging.grading import screens
from qcat.judging.grading.desk import MAX_HOLD, PREFETCH, GradingDesk, screen_data
from qcat.judging.grading.judges import add_judge
from qcat.judging.grading.sessions import SEGMENTS, Listing, QuerySpec, store_session
from qcat.judging.pages.panel import TEST_DELAY_ENV
from qcat.judging.store.connection import open_store
from qcat.judging.store.migrate import upgrade
from qcat.judging.store.models import Assignment, Judge, JudgingSession, Judgment

playwright = pytest.importorskip("playwright.sync_api", reason="playwright is in the test extra")

JUDGES, GROUPS, SLOTS = 3, 14, 8


def eight_slot_session(url: str, queries: int) -> list[str]:
    """A session of ``queries`` queries of 5 + 5 listings, 2 in both groups (8 to grade), one judge
    per query, and the tokens of 3 judges."""
    upgrade(url)
    store = open_store(url)
    specs = [QuerySpec(f"query {q}", SEGMENTS[q % 3],
                       [Listing(f"s{q}-{i}", f"shared {q}.{i}") for i in range(2)]
                       + [Listing(f"a{q}-{i}", f"A {q}.{i}") for i in range(3)],
                       [Listing(f"s{q}-{i}", f"shared {q}.{i}") for i in range(2)]
                       + [Listing(f"b{q}-{i}", f"B {q}.{i}") for i in range(3)]) for q in range(queries)]
    store_session(store, "blind", "A", "B", specs, judges_per_query=1, seed=1)
    tokens = [add_judge(store, f"judge{j}")[1] for j in range(JUDGES)]
    store.dispose()
    return tokens


def typed_groups() -> dict[int, list[list[int]]]:
    """A different group of 8 grades for every judge and query (a shifted group matches none)."""
    rng, seen, groups = random.Random(41), set(), {}
    for j in range(JUDGES):
        groups[j] = []
        while len(groups[j]) < GROUPS:
            group = tuple(rng.randrange(4) for _ in range(SLOTS))
            if group not in seen and len(set(group)) > 1:
                seen.add(group)
                groups[j].append(list(group))
    return groups


def stored_in_order(url: str, judge: str) -> list[list[int]]:
    """The grades of every query the judge submitted, in slot order (as the keys go), in the order
    the store took them."""
    store = open_store(url)
    try:
        with store.sessions() as session:
            done = session.scalars(select(Assignment.query_id).join(Judge, Judge.id == Assignment.judge_id)
                                   .where(Judge.name == judge, Assignment.status == "done")
                                   .order_by(Assignment.finished_at, Assignment.id)).all()
            out = []
            for query_id in done:
                grades = {(listing, side): grade for listing, side, grade in session.execute(
                    select(Judgment.listing_id, Judgment.side, Judgment.grade).join(Judge, Judge.id == Judgment.judge_id)
                    .where(Judge.name == judge, Judgment.query_id == query_id)).all()}
                slots = screen_data(screens.screen(session, query_id))["slots"]
                out.append([grades.get((slot["listing"], slot["side"])) for slot in slots])
    finally:
        store.dispose()
    return out


def test_issue_41_groups_typed_ahead_in_one_outbox_are_stored_once_each_in_the_order_typed(tmp_path):
    """The server's half of typing blind: the groups typed on the queries a panel holds reach the
    desk in one outbox, then again with one more (the panel sends its whole outbox until answered),
    then from a reloaded page: each group is stored once, on the query it was typed on, in the order
    typed, as the browser tests read the store back (:func:`stored_in_order`)."""
    url = f"sqlite:///{tmp_path / 'ahead.db'}"
    eight_slot_session(url, 6)
    groups = typed_groups()[0][:3]
    store = open_store(url)
    try:
        with store.sessions() as session:
            judge_id = session.scalar(select(Judge.id).where(Judge.name == "judge0"))
            session_id = session.scalar(select(JudgingSession.id))
        desk = GradingDesk(store, judge_id, session_id)
        held = desk.queue()
        assert len(held) == 1 + PREFETCH and all(len(shown["slots"]) == SLOTS for shown in held)
        outbox = [{"id": f"enter-{g}", "kind": "submit", "query": shown["id"], "text": shown["text"], "seconds": 0.3,
                   "grades": [[slot["listing"], slot["side"], grade] for slot, grade in zip(shown["slots"], group)]}
                  for g, (shown, group) in enumerate(zip(held, groups))]
        assert [a["status"] for a in desk.take(outbox[:2]).values()] == ["saved"] * 2
        assert [a["status"] for a in desk.take(outbox).values()] == ["saved"] * 3
        reloaded = GradingDesk(store, judge_id, session_id).take(outbox)
        assert [a["message"].endswith("were saved already.") for a in reloaded.values()] == [True] * 3
    finally:
        store.dispose()
    assert stored_in_order(url, "judge0") == groups


@pytest.mark.slow  # over 3 s: a Streamlit server and Chromium
def test_issue_41_keys_typed_blind_through_dry_spells_are_stored_once_each_on_a_query_of_their_own(tmp_path):
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM}: install the 'chromium' system package (.ci/run does)")
    db = tmp_path / "blind.db"
    url = f"sqlite:///{db}"
    tokens = eight_slot_session(url, JUDGES * (GROUPS + MAX_HOLD))  # the queries each panel holds at the end too
    groups = typed_groups()
    slow = {TEST_DELAY_ENV: "2.5"}  # seconds before every answer of the app
    with running_judging_app(db, tmp_path / "app.log", env=slow) as app_url, playwright.sync_playwright() as p:
        browser = launch_chromium(p)
        try:
            pages = [signed_in_panel(browser, app_url, token)[1] for token in tokens]
            for page in pages:
                assert len(panel_shown(page)["slots"]) == SLOTS
            for g in range(GROUPS):  # blind: nobody waits for the next query to show
                for key in range(SLOTS + 1):
                    for j, page in enumerate(pages):
                        page.keyboard.press(str(groups[j][g][key]) if key < SLOTS else "Enter")
                    time.sleep(0.01)  # with the three presses: about 30 ms between one judge's keys
            for page in pages:
                page.wait_for_function("() => window.qcatPanel.waiting.length === 0 && window.qcatPanel.current",
                                       timeout=90_000)
                page.wait_for_function(SETTLED, timeout=60_000)
            dry = [page.evaluate("() => window.qcatPanel.loadingShown") for page in pages]
            errors = [page.locator(".qcat-panel .msg.error").count() for page in pages]
        finally:
            browser.close()
    assert errors == [0] * JUDGES
    # The scenario happened: a panel ran dry while keys were typed ahead (on a loaded machine the
    # browser types slower and a panel may keep up; which ones run dry is timing, not behaviour).
    assert any(n >= 1 for n in dry), dry
    for j in range(JUDGES):
        assert stored_in_order(url, f"judge{j}") == groups[j], j  # each group once, as typed, in order


@pytest.mark.slow  # over 3 s: a Streamlit server and Chromium
def test_issue_41_a_fast_judge_on_a_slow_server_never_waits_for_a_query(tmp_path):
    """The panel held 5 queries whatever the pace: a judge who takes 0.35 s a query ran out of them
    on a server that answers in 1 s. It now asks for more from the judge's pace and the measured
    round trip (within the server's bounds): once both are measured (the first queries), Enter always
    finds the next query held."""
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM}: install the 'chromium' system package (.ci/run does)")
    db = tmp_path / "fast.db"
    url = f"sqlite:///{db}"
    token = eight_slot_session(url, 40)[0]
    slow = {TEST_DELAY_ENV: "1"}
    with running_judging_app(db, tmp_path / "app.log", env=slow) as app_url, playwright.sync_playwright() as p:
        browser = launch_chromium(p)
        try:
            page = signed_in_panel(browser, app_url, token)[1]
            held = []
            for q in range(24):
                shown = panel_shown(page)  # a judge who looks at each query
                held.append(page.evaluate("() => window.qcatPanel.order.length"))
                for key in [*[(q + i) % 4 for i in range(len(shown["slots"]))], "Enter"]:
                    page.keyboard.press(str(key))
                    time.sleep(0.03)
            page.wait_for_function(SETTLED, timeout=60_000)
            waits = page.evaluate("() => window.qcatPanel.transitions.map(t => Math.round(t.ms))")
            asked = page.evaluate("() => window.qcatPanel.asked")
        finally:
            browser.close()
    # Enter -> next query, ms. Running dry costs at least the server's 1 s delay; a query already held
    # shows at once. The bar sits between the two so that a busy machine does not decide it (speed
    # targets are the bench's: benchmarks/bench_judging.py).
    assert len(waits) == 24 and max(waits[1 + PREFETCH:]) < 900, (waits, held)
    assert 1 + PREFETCH < max(held) <= MAX_HOLD and 1 + PREFETCH < asked <= MAX_HOLD, (held, asked)


def _server_pid(wrapper_pid: int) -> int:
    """The Streamlit server that ``qcat judge app`` (``wrapper_pid``) started: its one child."""
    children = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    if int(handle.read().rsplit(")", 1)[1].split()[1]) == wrapper_pid:
                        children.append(int(entry))
            except OSError:
                continue
    assert len(children) == 1, children
    return children[0]


# Every message line the panel shows, as it shows it (a newer message replaces the last on screen).
RECORD_MESSAGES = """() => { window.qcatSaid = [];
  const box = window.qcatPanel.root.querySelector('.messages');
  new MutationObserver(() => { if (box.textContent) window.qcatSaid.push(box.textContent); })
    .observe(box, {childList: true, subtree: true, characterData: true}); }"""


@pytest.mark.slow  # over 3 s: a Streamlit server and Chromium
def test_issue_46_a_late_answer_built_on_an_older_holding_list_never_takes_the_query_on_screen(tmp_path):
    """Issue 46, item 1: the panel's first message (want 12, holding 5) is answered at once; the
    second, sent with the first Enter (want 5, holding 11), is answered 2.5 s late, when the judge,
    typing blind, is on the 10th query or so. The answer, built on that older holding list, took
    the query on screen away ("… in another window …", its grades forgotten, the keys typed after
    it one slot off). Every typed group must be stored once, in order, and nothing said of another
    window."""
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM}: install the 'chromium' system package (.ci/run does)")
    db = tmp_path / "stalled.db"
    url = f"sqlite:///{db}"
    token = eight_slot_session(url, 48)[0]
    groups = typed_groups()[0] + typed_groups()[1][:4]  # 18 groups of 8 grades, all different
    port = free_port()
    wrapper = start_judging_app(db, port, tmp_path / "app.log")
    server = _server_pid(wrapper.pid)
    resume = None
    try:
        with playwright.sync_playwright() as p:
            browser = launch_chromium(p)
            try:
                page = signed_in_panel(browser, f"http://127.0.0.1:{port}", token)[1]
                assert len(panel_shown(page)["slots"]) == SLOTS
                page.evaluate(RECORD_MESSAGES)
                for g, group in enumerate(groups):
                    # the browser's driver waits 30 ms between keys: a busy machine slows the judge less
                    # than a round trip from this process per key would (the first keys set their pace)
                    page.keyboard.type("".join(map(str, group)), delay=30)
                    if g == 0:  # the first answer (to the message the first keys sent) is in: a fast one
                        page.wait_for_function("() => window.qcatPanel.trips.length >= 1"
                                               " && window.qcatPanel.order.length > 5", timeout=20_000)
                    time.sleep(0.03)
                    page.keyboard.press("Enter")
                    if g == 0:  # the answer to the message of this Enter comes 2.5 s late
                        os.kill(server, signal.SIGSTOP)
                        resume = threading.Timer(2.5, os.kill, (server, signal.SIGCONT))
                        resume.start()
                resume.join()
                page.wait_for_function("() => window.qcatPanel.waiting.length === 0 && window.qcatPanel.current",
                                       timeout=60_000)
                page.wait_for_function(SETTLED, timeout=60_000)
                said = page.evaluate("() => window.qcatSaid")
                asked = page.evaluate("() => window.qcatPanel.asked")
            finally:
                browser.close()
    finally:
        if resume is not None:
            resume.join()
        os.kill(server, signal.SIGCONT)
        stop_judging_app(wrapper)
    stored = stored_in_order(url, "judge0")
    lost = [g for g, group in enumerate(groups) if group not in stored]
    assert (lost, [line for line in said if "another window" in line]) == ([], []), (said, asked)
    assert stored == groups  # each group once, as typed, in order
