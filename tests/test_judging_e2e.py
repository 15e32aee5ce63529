"""End to end: ``qcat judge app`` serves the real app on a free port over a store prepared by the
CLI; headless Chromium (Debian's, driven by Playwright; nothing is downloaded) signs in, grades
one query and submits; the grades are then in the database.

``QCAT_UPDATE_SCREENSHOT=1`` also writes the screenshot of the graded page to docs/judging_app.png.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
from sqlalchemy import func, select

from judging_app.models import Assignment, Judge, Judgment, ResultItem, ResultList, SessionQuery
from judging_app.store import open_store
from judging_fixtures import ROOT, free_port, running_judging_app, start_judging_app, stop_judging_app

CHROMIUM = os.environ.get("QCAT_CHROMIUM", "/usr/bin/chromium")
playwright = pytest.importorskip("playwright.sync_api", reason="playwright is in the test extra")
TIMEOUT_MS = 20_000


@pytest.fixture
def running_app(demo_db, tmp_path):
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM}: install the 'chromium' system package (.ci/run does)")
    db = tmp_path / "e2e.db"
    shutil.copy(demo_db[0], db)
    with running_judging_app(db, tmp_path / "app.log") as url:
        yield url, db, demo_db[1]


def stable_count(locator, settle: float = 0.5, timeout: float = 15) -> int:
    """The number of matches once it stops changing (Streamlit renders a page in pieces)."""
    last, since, deadline = -1, time.monotonic(), time.monotonic() + timeout
    while time.monotonic() < deadline:
        n = locator.count()
        if n != last:
            last, since = n, time.monotonic()
        elif time.monotonic() - since >= settle:
            return n
        time.sleep(0.1)
    return last


# Exactly one grading form on the page: while Streamlit replaces a query's form by the next one,
# both may be in the page for a moment.
ONE_FORM = """() => Array.from(document.querySelectorAll('button'))
  .filter(b => b.innerText.trim() === 'Flag & skip').length === 1"""


def form_ready(page) -> None:
    """Wait for the grading form (its last button is rendered) and for it alone."""
    page.get_by_role("button", name="Flag & skip").first.wait_for()
    page.wait_for_function(ONE_FORM)


def signed_in_page(browser, url: str, token: str, viewport: dict):
    """A new page of the app in ``browser``, signed in with ``token``."""
    page = browser.new_page(viewport=viewport)
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(url)
    page.get_by_label("Your judge token").fill(token)
    page.get_by_role("button", name="Sign in").click()
    return page


def test_sign_in_grade_one_query_and_find_the_rows(running_app, tmp_path):
    url, db, tokens = running_app
    started = time.perf_counter()
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        try:
            page = signed_in_page(browser, url, tokens[0], {"width": 1440, "height": 1150})
            page.get_by_text("Group A", exact=True).wait_for()
            page.get_by_text("Group B", exact=True).wait_for()
            form_ready(page)  # the form's last element: all is rendered
            query = page.locator("h2").filter(has_text="Query:").first.inner_text().removeprefix("Query:").strip()
            radios = page.locator('[data-testid="stRadio"]')
            radios.first.wait_for()
            n = stable_count(radios)
            assert 2 <= n <= 10
            # keyboard: the arrow keys move a radio group's choice (0 Off-topic -> 3 Excellent)
            radios.nth(0).get_by_text("0 Off-topic", exact=True).click()
            for _ in range(3):
                page.keyboard.press("ArrowRight")
            assert radios.nth(0).locator("input").nth(3).is_checked()
            page.keyboard.press("Tab")  # Tab goes on to the next listing's grades
            for _ in range(2):
                page.keyboard.press("ArrowRight")
            assert radios.nth(1).locator("input").nth(2).is_checked()  # 2 Good
            for i in range(2, n):
                grade = "3 Excellent" if i % 5 == 0 else "2 Good"
                radios.nth(i).get_by_text(grade, exact=True).click()
            page.get_by_role("button", name="Submit grades").scroll_into_view_if_needed()
            page.mouse.wheel(0, -10_000)
            shot = tmp_path / "judging_app.png"
            page.screenshot(path=str(shot), full_page=True)
            # keyboard: from the last listing's grades, Tab reaches the note field; Enter there submits
            radios.nth(n - 1).locator("input:checked").focus()
            page.keyboard.press("Tab")
            page.keyboard.press("Enter")
            page.get_by_text(f"Saved your {n} grades").wait_for()
        finally:
            browser.close()
    if os.environ.get("QCAT_UPDATE_SCREENSHOT"):
        shutil.copy(shot, ROOT / "docs" / "judging_app.png")
    assert shot.stat().st_size > 10_000
    store = open_store(str(db))
    with store.sessions() as session:
        ann = session.scalar(select(Judge.id).where(Judge.name == "ann"))
        grades = session.scalars(select(Judgment.grade).where(Judgment.judge_id == ann)).all()
        done = session.scalar(select(func.count()).select_from(Assignment).where(Assignment.status == "done"))
    store.dispose()
    # the demo session compares the demo model with itself: both groups show the same listings, each graded
    # once (n controls) and stored for both sides
    assert len(grades) == 2 * n and sorted(set(grades)) == ([2, 3] if n > 1 else [3])
    assert grades.count(3) == 2 * len(range(0, n, 5)) and done == 1
    assert query
    print(f"\nE2E: signed in, graded {n} listings of {query!r}, submitted in {time.perf_counter() - started:.1f} s")


# How far the main area is scrolled: the window's and every scrolled ancestor's of the main content.
MAIN_SCROLL = """() => {
  let top = window.scrollY;
  for (let node = document.querySelector('[data-testid="stMainBlockContainer"]'); node; node = node.parentElement) {
    top = Math.max(top, node.scrollTop);
  }
  return top;
}"""


def test_the_next_query_opens_at_the_top(running_app):
    url, _, tokens = running_app
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        try:
            page = signed_in_page(browser, url, tokens[1], {"width": 1000, "height": 500})
            form_ready(page)
            heading = page.locator("h2").filter(has_text="Query:").first
            first = heading.inner_text()
            radios = page.locator('[data-testid="stRadio"]')
            for i in range(stable_count(radios)):
                radios.nth(i).get_by_text("1 Acceptable", exact=True).click()
            page.get_by_role("button", name="Submit grades").scroll_into_view_if_needed()
            scrolled = page.evaluate(MAIN_SCROLL)
            assert scrolled > 100, scrolled  # the page is scrolled down to the button
            page.get_by_role("button", name="Submit grades").click()
            page.get_by_text("Saved your").wait_for()
            page.wait_for_function(f"() => !document.body.innerText.includes({first!r})")
            form_ready(page)
            page.wait_for_function(f"() => ({MAIN_SCROLL})() === 0", timeout=10_000)
            time.sleep(1)  # and it stays there once the page has finished rendering
            assert page.evaluate(MAIN_SCROLL) == 0
            # the same query shown again (an incomplete submission's warning) keeps its place
            page.get_by_role("button", name="Submit grades").scroll_into_view_if_needed()
            page.get_by_role("button", name="Submit grades").click()
            page.get_by_text("Grade every listing first").wait_for()
            time.sleep(1)
            assert page.evaluate(MAIN_SCROLL) > 100
        finally:
            browser.close()


def query_shown(page) -> str:
    return page.locator("h2").filter(has_text="Query:").first.inner_text().removeprefix("Query:").strip()


# The radio group holding the keyboard focus (its index among the form's listings), or -1.
FOCUSED_GROUP = """() => Array.from(document.querySelectorAll('[data-testid="stForm"] [data-testid="stRadio"]'))
  .findIndex(g => g.contains(document.activeElement))"""


def test_a_whole_query_graded_with_digit_hotkeys_only(running_app):
    url, db, tokens = running_app
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            page.set_default_timeout(TIMEOUT_MS)
            page.goto(url)
            page.get_by_label("Your judge token").fill(tokens[2])
            page.keyboard.press("Enter")  # signs in
            form_ready(page)
            query = query_shown(page)
            radios = page.locator('[data-testid="stForm"] [data-testid="stRadio"]')
            n = stable_count(radios)
            assert n >= 2
            page.wait_for_function(f"() => ({FOCUSED_GROUP})() === 0")  # the first listing has the focus
            ring = radios.nth(0).evaluate("g => [getComputedStyle(g).outlineStyle, getComputedStyle(g).outlineWidth]")
            assert ring[0] == "solid" and float(ring[1].removesuffix("px")) >= 2, ring  # a visible focus ring
            digits = [(3, 2, 1, 0)[i % 4] for i in range(n)]
            for digit in digits:  # as fast as the keyboard goes: each digit grades the next listing
                page.keyboard.press(str(digit))
            for i, digit in enumerate(digits):
                assert radios.nth(i).locator("input").nth(digit).is_checked(), i
            page.wait_for_function("() => document.activeElement.innerText.startsWith('Submit grades')", timeout=5000)
            page.keyboard.press("Enter")
            page.get_by_text(f"Saved your {n} grades").wait_for()
        finally:
            browser.close()
    store = open_store(str(db))
    with store.sessions() as session:
        cy = session.scalar(select(Judge.id).where(Judge.name == "cy"))
        rows = session.execute(
            select(ResultItem.position, Judgment.grade)
            .join(SessionQuery, SessionQuery.id == Judgment.query_id)
            .join(ResultList, (ResultList.query_id == Judgment.query_id) & (ResultList.side == Judgment.side))
            .join(ResultItem, (ResultItem.list_id == ResultList.id) & (ResultItem.listing_id == Judgment.listing_id))
            .where(Judgment.judge_id == cy, SessionQuery.text == query, Judgment.side == "left")
            .order_by(ResultItem.position)).all()
    store.dispose()
    assert [grade for _, grade in rows] == digits  # each listing got the digit typed for it


def test_a_reload_keeps_the_sign_in_and_the_grades_entered(running_app):
    url, _, tokens = running_app
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        try:
            page = signed_in_page(browser, url, tokens[0], {"width": 1280, "height": 800})
            form_ready(page)
            query = query_shown(page)
            radios = page.locator('[data-testid="stForm"] [data-testid="stRadio"]')
            stable_count(radios)
            page.wait_for_function(f"() => ({FOCUSED_GROUP})() === 0")
            page.keyboard.press("2")
            page.keyboard.press("0")
            page.get_by_placeholder("e.g. offensive").fill("typo in the query")
            page.reload()
            form_ready(page)  # no sign-in form
            assert "token" not in page.url
            assert query_shown(page) == query
            stable_count(radios)
            page.wait_for_function("() => document.querySelectorAll('[data-testid=\"stForm\"] input:checked').length === 2")
            assert radios.nth(0).locator("input").nth(2).is_checked() and radios.nth(1).locator("input").nth(0).is_checked()
            assert page.get_by_placeholder("e.g. offensive").input_value() == "typo in the query"
            page.wait_for_function(f"() => ({FOCUSED_GROUP})() === 2")  # the first listing without a grade
            page.get_by_role("button", name="Sign out").click()
            page.get_by_label("Your judge token").wait_for()
            page.reload()
            page.get_by_label("Your judge token").wait_for()  # signed out stays signed out
        finally:
            browser.close()


def test_digits_typed_before_the_focus_lands_or_after_it_is_lost_still_grade(running_app):
    """Issue 24, defects 3 and 5: digits typed as soon as the query appears (before the focus lands
    on the first listing, about 0.4 s later) were lost; and with no listing focused (after a
    reconnect) digits did nothing. Now such a digit grades the first listing without a grade."""
    url, _, tokens = running_app
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            page.set_default_timeout(TIMEOUT_MS)
            page.goto(url)
            page.get_by_label("Your judge token").fill(tokens[1])
            page.keyboard.press("Enter")
            radios = page.locator('[data-testid="stForm"] [data-testid="stRadio"]')
            radios.first.wait_for()  # the query appears: type at once
            for digit in "32":
                page.keyboard.press(digit)
            n = stable_count(radios)
            assert n >= 3
            page.wait_for_function("() => document.querySelectorAll('[data-testid=\"stForm\"] input:checked').length === 2")
            assert radios.nth(0).locator("input").nth(3).is_checked() and radios.nth(1).locator("input").nth(2).is_checked()
            page.evaluate("() => document.activeElement && document.activeElement.blur()")  # no listing has the focus
            assert page.evaluate(FOCUSED_GROUP) == -1
            page.keyboard.press("1")
            assert radios.nth(2).locator("input").nth(1).is_checked()  # the first listing without a grade
            page.wait_for_function(f"() => ({FOCUSED_GROUP})() === {3 if n > 3 else -1}")
        finally:
            browser.close()


def test_after_the_app_restarts_and_the_page_reconnects_digits_still_grade(demo_db, tmp_path):
    """Issue 24, defect 5: after a restart of the app the page reconnects with no listing focused;
    digits did nothing. Now the first digit grades the first listing without a grade."""
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM}")
    db = tmp_path / "restart.db"
    shutil.copy(demo_db[0], db)
    port, log = free_port(), tmp_path / "app.log"
    process = start_judging_app(db, port, log)
    try:
        with playwright.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
            try:
                page = signed_in_page(browser, f"http://127.0.0.1:{port}", demo_db[1][0], {"width": 1280, "height": 800})
                form_ready(page)
                query = query_shown(page)
                radios = page.locator('[data-testid="stForm"] [data-testid="stRadio"]')
                stable_count(radios)
                stop_judging_app(process)
                page.wait_for_timeout(1500)  # the page notices the server is gone
                page.get_by_text("Connection error").wait_for()
                process = start_judging_app(db, port, log)
                page.get_by_text("Connection error").wait_for(state="detached", timeout=40_000)  # reconnected
                page.wait_for_function("() => !document.body.innerText.includes('CONNECTING')", timeout=40_000)
                form_ready(page)
                assert query_shown(page) == query
                n = stable_count(radios)
                page.evaluate("() => document.activeElement && document.activeElement.blur()")
                page.keyboard.press("2")
                page.wait_for_function("() => document.querySelectorAll('[data-testid=\"stForm\"] input:checked')"
                                       ".length === 1")
                assert radios.nth(0).locator("input").nth(2).is_checked()
                for _ in range(n - 1):
                    page.keyboard.press("1")
                page.wait_for_function("() => document.activeElement.innerText.startsWith('Submit grades')")
                page.keyboard.press("Enter")
                page.get_by_text(f"Saved your {n} grades").wait_for()
            finally:
                browser.close()
    finally:
        stop_judging_app(process)
