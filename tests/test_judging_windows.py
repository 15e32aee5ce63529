"""Issue 41, item 3, in Chromium against a real ``qcat judge app``: two windows (tabs) of one judge
are offered queries of their own, so both windows' grades are stored; a window closed gives its
queries back to the judge's window still open."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from judging_fixtures import (
    CHROMIUM,
    SETTLED,
    launch_chromium,
    panel_shown,
    running_judging_app,
    signed_in_panel,
    stored_grades,
    type_keys,
)
from test_judging_typeahead import eight_slot_session, stored_in_order

from qcat.judging.grading.windows import Windows

playwright = pytest.importorskip("playwright.sync_api", reason="playwright is in the test extra")

HELD = "() => window.qcatPanel.order.slice()"


def test_the_record_of_windows_per_judge_and_session_sign_out_closed_windows_and_picking_one_at_a_time():
    """The record behind item 3 (qcat.judging.grading.windows): a window holds what it last said,
    per judge and session; a closed window's record is dropped; a window whose judge signed out
    holds nothing in any session, other judges' windows keeping theirs; and one judge's windows
    pick one at a time, while another judge's pick at once."""
    windows = Windows()
    windows.hold(1, 10, "a", [1, 2, 3])
    windows.hold(1, 10, "b", [4, 5])
    windows.hold(1, 11, "a", [7])
    windows.hold(2, 10, "c", [8])
    assert windows.held_elsewhere(1, 10, "a") == {4, 5} and windows.held_elsewhere(1, 10, "b") == {1, 2, 3}
    assert windows.held_elsewhere(1, 11, "b") == {7} and windows.held_elsewhere(2, 10, "d") == {8}
    windows.hold(1, 10, "a", [3, 6])  # what it holds now replaces what it held
    assert windows.held_elsewhere(1, 10, "b") == {3, 6}
    assert windows.held_elsewhere(1, 10, "b", alive=lambda window: window != "a") == set()  # "a" closed
    assert windows.held_elsewhere(1, 10, "b") == set()  # and forgotten
    windows.hold(1, 10, "a", [9])
    windows.forget(1, "a")  # ann signed out in window "a"
    assert windows.held_elsewhere(1, 10, "b") == set() and windows.held_elsewhere(1, 11, "b") == set()
    assert windows.held_elsewhere(2, 10, "d") == {8}
    picked = []

    def pick(judge: int) -> None:
        with windows.picking(judge, 10):
            picked.append(judge)

    with windows.picking(1, 10):
        same, other = threading.Thread(target=pick, args=(1,)), threading.Thread(target=pick, args=(2,))
        same.start()
        other.start()
        other.join(5)
        same.join(0.1)
        assert picked == [2] and same.is_alive()  # the same judge's second window waits its turn
    same.join(5)
    assert picked == [2, 1]


@pytest.mark.slow  # over 3 s: a Streamlit server and Chromium
def test_issue_41_two_windows_of_one_judge_grade_different_queries_and_every_grade_is_stored(tmp_path):
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM}: install the 'chromium' system package (.ci/run does)")
    db = tmp_path / "tabs.db"
    token = eight_slot_session(f"sqlite:///{db}", 30)[0]
    typed: dict[int, list[int]] = {}
    with running_judging_app(db, tmp_path / "app.log") as url, playwright.sync_playwright() as p:
        browser = launch_chromium(p)
        try:
            context, first = signed_in_panel(browser, url, token)
            panel_shown(first)
            second = context.new_page()  # the same judge (the sign-in cookie), a second tab
            second.goto(url)
            panel_shown(second)
            assert not set(first.evaluate(HELD)) & set(second.evaluate(HELD))
            for round_ in range(4):  # both windows grade, in turn
                for tab, page in enumerate((first, second)):
                    shown = panel_shown(page)
                    digits = [(round_ + tab + i) % 4 for i in range(len(shown["slots"]))]
                    typed[shown["id"]] = digits
                    type_keys(page, [*digits, "Enter"])
            for page in (first, second):
                page.wait_for_function(SETTLED)
                assert page.locator(".qcat-panel .messages .msg.warn").count() == 0, page.inner_text(".qcat-panel .messages")
            held_by_first = first.evaluate(HELD)
            first.close()  # the first window closed: its queries go to the window still open
            second.reload()
            panel_shown(second)
            second.wait_for_function("(ids) => ids.some((id) => window.qcatPanel.order.includes(id))",
                                     arg=held_by_first)
        finally:
            browser.close()
    assert len(typed) == 8  # 8 different queries graded in the two windows
    assert set(stored_grades(db, "judge0")) == set(typed)
    assert sorted(stored_in_order(f"sqlite:///{db}", "judge0")) == sorted(typed.values())  # every grade, as typed
