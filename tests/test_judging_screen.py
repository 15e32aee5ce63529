"""Issue 41, items 4 and 5, in Chromium against a real ``qcat judge app`` on a PostgreSQL store of
the test's own: the guidelines open over the panel's column, never under the sidebar (1280x800 and
1920x1080); the listings never move, whatever the messages (after each submit, during a store
outage); the progress line stays during the outage; and once the store is back the kept queries
are sent again with no key pressed.

``QCAT_UPDATE_SCREENSHOT=1`` also writes the screenshots to docs/: judging_guidelines_<size>.png,
judging_grading_<size>.png (the normal screen after 5 submits) and judging_outage_<size>.png.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
from judging_fixtures import (
    CHROMIUM,
    ROOT,
    SETTLED,
    free_port,
    launch_chromium,
    panel_shown,
    qcat,
    signed_in_panel,
    start_judging_app,
    stop_judging_app,
    stored_grades,
    toy_queries,
    type_keys,
)

from qcat.judging.grading.desk import GradingDesk
from qcat.judging.grading.judges import add_judge
from qcat.judging.grading.sessions import store_session
from qcat.judging.store.connection import open_store
from qcat.judging.store.migrate import upgrade

playwright = pytest.importorskip("playwright.sync_api", reason="playwright is in the test extra")

SIZES = ((1280, 800), (1920, 1080))
GUIDELINES = """# Gadget relevance (round 5)

Judge each listing as a shopper who typed the query would. **Chargers and cables** for the device
asked for are *Acceptable*; the device itself in another colour or size is *Good*.
"""
HELP_IN_VIEW = """() => {
  const root = window.qcatPanel.root, help = root.querySelector('.help').getBoundingClientRect();
  const side = document.querySelector('[data-testid="stSidebar"]').getBoundingClientRect();
  const first = root.querySelector('.help-text > *').getBoundingClientRect();
  const at = (root.getRootNode().elementFromPoint ? root.getRootNode() : document).elementFromPoint(first.left + 2, first.top + 4);
  return {help: [help.left, help.top, help.right, help.bottom], sidebar_right: side.right, width: innerWidth,
          height: innerHeight, first_line_shown: !!at && root.contains(at)};
}"""
LAYOUT = """() => {
  const root = window.qcatPanel.root, box = (s) => root.querySelector(s).getBoundingClientRect();
  const cards = root.querySelectorAll('.groups .group:first-child .card'), retry = root.querySelector('.messages .retry');
  return {retry_in_view: retry ? retry.getBoundingClientRect().right <= box('.messages').right + 1 : null,groups_top: Math.round(box('.groups').top), fifth_a_bottom: cards[4].getBoundingClientRect().bottom,
          actions_top: box('.actions').top, progress: root.querySelector('.progress').textContent,
          lines: Array.from(root.querySelectorAll('.messages .msg')).map((m) => [m.className, m.innerText])};
}"""


def test_issue_41_grades_the_store_cannot_take_are_kept_and_sent_again_stored_once(tmp_path):
    """The server's half of the outage: a submit the store cannot take is answered ``store_down``
    with the line the panel shows (R to send again), nothing stored and the query not let go; sent
    again under an id of its own once the store is back, the grades are stored once."""
    db = tmp_path / "outage.db"
    upgrade(f"sqlite:///{db}")
    store = open_store(str(db))
    gone = open_store(f"sqlite:///{tmp_path / 'no such folder' / 'outage.db'}", check=False)  # cannot be opened
    try:
        session_id = store_session(store, "outage", "A", "B", toy_queries(3), judges_per_query=1)
        desk = GradingDesk(store, add_judge(store, "ann")[0].id, session_id, prefetch=1)
        shown = desk.queue()[0]
        action = {"id": "enter-1", "kind": "submit", "query": shown["id"], "text": shown["text"], "seconds": 2.0,
                  "grades": [[slot["listing"], slot["side"], 2] for slot in shown["slots"]]}
        desk.store = gone  # the store stops
        answer = desk.take([action])["enter-1"]
        assert answer == {"status": "store_down", "query_id": shown["id"], "message": (
            "Not saved: the judging store cannot be reached right now. Your grades are kept here: press R "
            "(or Retry) in a moment.")}
        assert shown["id"] not in desk.finished and stored_grades(db, "ann") == {}
        desk.store = store  # back: the panel sends the kept query again, under a new id
        again = {**action, "id": "enter-1~1"}
        assert desk.take([again])["enter-1~1"]["status"] == "saved"
        assert desk.take([again])["enter-1~1"]["status"] == "saved" and desk.answered.keys() == {"enter-1~1"}
        assert shown["id"] not in [queued["id"] for queued in desk.queue([shown["id"]])]
    finally:
        gone.dispose()
        store.dispose()
    stored = stored_grades(db, "ann")
    assert list(stored) == [shown["id"]] and len(stored[shown["id"]]) == 10  # 5 + 5 listings, each once a side
    assert set(stored[shown["id"]].values()) == {2}


@pytest.mark.slow  # over 3 s: PostgreSQL, `qcat` commands, a Streamlit server and Chromium
def test_issue_41_guidelines_in_view_listings_that_never_move_and_kept_queries_sent_on_their_own(tmp_path):
    from judging_fixtures import PostgresServer, fresh_database

    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM}: install the 'chromium' system package (.ci/run does)")
    server = PostgresServer()
    server.start()
    url, drop = fresh_database(server.admin_url)
    assert qcat("db", "upgrade", "--url", url).returncode == 0
    token = qcat("judge", "add-judge", "ann", "--url", url).stdout.strip()
    (tmp_path / "guidelines.md").write_text(GUIDELINES)
    demo = ROOT / "demo" / "qcat_demo" / "model"
    made = qcat("judge", "create-session", "--baseline", demo, "--target", demo, "--queries", 12, "--name", "round 5",
                "--guidelines", tmp_path / "guidelines.md", "--url", url)
    assert made.returncode == 0, made.stderr
    port = free_port()
    process = start_judging_app(url, port, tmp_path / "app.log")
    shots: dict[str, Path] = {}
    typed: dict[int, list[int]] = {}
    try:
        with playwright.sync_playwright() as p:
            browser = launch_chromium(p)
            try:
                page = signed_in_panel(browser, f"http://127.0.0.1:{port}", token)[1]
                shown = panel_shown(page)
                page.locator(".qcat-panel .help").wait_for()  # a first sign-in opens the session's guidelines
                for width, height in SIZES:  # item 4: the whole box beside the sidebar, every line's start shown
                    page.set_viewport_size({"width": width, "height": height})
                    time.sleep(0.3)
                    view = page.evaluate(HELP_IN_VIEW)
                    left, top, right, bottom = view["help"]
                    assert left >= view["sidebar_right"] - 1 and right <= view["width"], view
                    assert top >= 0 and bottom <= view["height"] and view["first_line_shown"], view
                    shots[f"guidelines_{width}x{height}"] = tmp_path / f"guidelines_{width}x{height}.png"
                    page.screenshot(path=str(shots[f"guidelines_{width}x{height}"]))
                page.keyboard.press("Escape")
                page.set_viewport_size({"width": 1280, "height": 800})
                time.sleep(0.3)
                before = page.evaluate(LAYOUT)
                assert before["lines"] == []
                for index in range(5):  # item 5: a message after every submit, the listings stay put
                    digits = [(index + i) % 4 for i in range(len(shown["slots"]))]
                    typed[shown["id"]] = digits
                    type_keys(page, [*digits, "Enter"])
                    shown = panel_shown(page)
                    page.wait_for_function(SETTLED)
                    layout = page.evaluate(LAYOUT)
                    assert layout["groups_top"] == before["groups_top"] and len(layout["lines"]) == 1, layout
                    assert layout["lines"][0][0] == "msg ok", layout
                for width, height in SIZES[::-1]:
                    page.set_viewport_size({"width": width, "height": height})
                    time.sleep(0.3)
                    shots[f"grading_{width}x{height}"] = tmp_path / f"grading_{width}x{height}.png"
                    page.screenshot(path=str(shots[f"grading_{width}x{height}"]))
                page.wait_for_function("() => window.qcatPanel.order.length >= 3")
                progress = page.evaluate(LAYOUT)["progress"]
                server.stop()
                for index in range(2):  # typed while the store is down: kept in the panel
                    digits = [(index + 2 * i) % 4 for i in range(len(shown["slots"]))]
                    typed[shown["id"]] = digits
                    type_keys(page, [*digits, "Enter"])
                    shown = panel_shown(page)
                page.wait_for_function("() => window.qcatPanel.failed.length === 2", timeout=30_000)
                for width, height in SIZES[::-1]:
                    page.set_viewport_size({"width": width, "height": height})
                    time.sleep(0.3)
                    layout = page.evaluate(LAYOUT)
                    assert width == 1920 or layout["groups_top"] == before["groups_top"], layout  # one line, in place
                    assert [c for c, _ in layout["lines"]] == ["msg error"], layout  # no old green line above it
                    assert "2 queries are kept here" in layout["lines"][0][1] and layout["retry_in_view"], layout
                    assert layout["progress"] == progress, layout  # the last counts known stay
                    assert layout["fifth_a_bottom"] <= layout["actions_top"] + 1, layout  # Group A's 5th above the bar
                    shots[f"outage_{width}x{height}"] = tmp_path / f"outage_{width}x{height}.png"
                    page.screenshot(path=str(shots[f"outage_{width}x{height}"]))
                server.start()  # no key pressed: the kept queries go on their own
                page.wait_for_function(SETTLED, timeout=60_000)
                page.wait_for_function("() => window.qcatPanel.root.querySelectorAll('.messages .msg.error').length === 0",
                                       timeout=30_000)
                assert page.evaluate(LAYOUT)["groups_top"] == before["groups_top"]
            finally:
                browser.close()
        stored = stored_grades(url, "ann")
        assert set(stored) == set(typed)  # all 7, the 2 kept during the outage included
    finally:
        stop_judging_app(process)
        drop()
        server.remove()
    if os.environ.get("QCAT_UPDATE_SCREENSHOT"):
        for name, path in shots.items():
            shutil.copy(path, ROOT / "docs" / f"judging_{name}.png")
