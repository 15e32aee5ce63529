"""Issue 53 ("Never silently wrong, round 5"), items 15-17, in Chromium against a real ``qcat judge
app``: keys typed over the first-visit guidelines close them and grade (15); the page does not move
after an app restart (16); the line shown while the app restarts fits at 1280x800 (17)."""

from __future__ import annotations

import contextlib
import time

import pytest
from judging_fixtures import (
    SETTLED,
    free_port,
    launch_chromium,
    panel_shown,
    signed_in_panel,
    start_judging_app,
    stop_judging_app,
    stored_grades,
    toy_queries,
    type_keys,
)
from test_judging_restart import CONNECTING, SIZES, one_judge_store, skip_without_chromium, stop

from qcat.judging.pages.panel import markdown_html

playwright = pytest.importorskip("playwright.sync_api", reason="playwright is in the test extra")

# Where the panel's parts are (left, top, width, height), and the bottom of Streamlit's header.
POSITIONS = """() => {
  const root = window.qcatPanel.root, box = (e) => { const r = e.getBoundingClientRect();
    return [Math.round(r.left), Math.round(r.top), Math.round(r.width), Math.round(r.height)]; };
  const parts = {};
  for (const name of ['.session', '.progress', '.open-help', '.messages', '.query', '.groups', '.actions']) parts[name] = box(root.querySelector(name));
  parts.cards = Array.from(root.querySelectorAll('.card')).map(box);
  return {parts, header_bottom: document.querySelector('[data-testid="stHeader"]').getBoundingClientRect().bottom};
}"""
# The message line's text: whether it is cut (wider than its box) or reaches out of the window.
MESSAGE_FITS = """() => {
  const text = window.qcatPanel.root.querySelector('.messages .text'), r = text.getBoundingClientRect();
  return {text: text.innerText, scroll: text.scrollWidth, client: text.clientWidth, right: r.right, width: innerWidth};
}"""


GUIDELINES = "# Our rules\n\nGrade each listing as the shopper who typed the query."


@contextlib.contextmanager
def judge_in_chromium(tmp_path, db, token):
    """The app on a free port and ann signed in to it in Chromium: yields (page, app), where
    ``app["process"]`` is the app's process (a test that restarts the app puts the new one there)."""
    skip_without_chromium()
    app = {"port": free_port()}
    app["process"] = start_judging_app(db, app["port"], tmp_path / "app.log")
    try:
        with playwright.sync_playwright() as p:
            browser = launch_chromium(p)
            try:
                yield signed_in_panel(browser, f"http://127.0.0.1:{app['port']}", token)[1], app
            finally:
                browser.close()
    finally:
        stop(app["process"])


@pytest.mark.slow  # over 3 s: a Streamlit server and Chromium
def test_item_15_keys_typed_over_the_first_visit_guidelines_close_them_and_grade(tmp_path):
    """The digits a judge typed while the first-visit guidelines were open were dropped without a
    sign (keys typed during "Loading…" wait and land): now they close the guidelines and grade."""
    db, token = one_judge_store(tmp_path, toy_queries(4), guidelines=GUIDELINES)
    with judge_in_chromium(tmp_path, db, token) as (page, _):
        shown = panel_shown(page)
        help_box = page.locator(".qcat-panel .help")
        help_box.wait_for()  # the first visit opens the guidelines over the query
        page.keyboard.press("ArrowDown")  # the arrows stay with the guidelines
        assert help_box.is_visible()
        digits = [(2 + i) % 4 for i in range(len(shown["slots"]))]
        type_keys(page, digits)
        assert not help_box.is_visible()
        assert page.evaluate("(id) => window.qcatPanel.drafts.get(id).grades", shown["id"]) == digits
        page.keyboard.press("?")  # open again: Enter over them submits
        help_box.wait_for()
        page.keyboard.press("Enter")
        page.wait_for_function(SETTLED, timeout=20_000)
        assert not help_box.is_visible()
    stored = stored_grades(db, "ann")
    assert list(stored) == [shown["id"]]
    assert {slot: stored[shown["id"]][slot] for slot in map(tuple, shown["slots"])} == \
        dict(zip(map(tuple, shown["slots"]), digits))


def test_item_15_the_first_visit_guidelines_are_the_sessions_markdown_with_raw_html_shown_as_text():
    """What item 15's guidelines box holds (``create-session --guidelines``, sent to the panel as
    HTML): the session's Markdown rendered, tables included, and HTML typed in it shown as text,
    never run in the judge's page."""
    shown = markdown_html(GUIDELINES + "\n\n| Key | Does |\n|---|---|\n| 3 | Excellent |\n\n"
                          "<script>alert(1)</script>\n\nA <b>bold</b> claim")
    assert shown.startswith("<h1>Our rules</h1>\n<p>Grade each listing as the shopper who typed the query.</p>")
    assert "<th>Key</th>" in shown and "<td>Excellent</td>" in shown
    assert "<p>&lt;script&gt;alert(1)&lt;/script&gt;</p>" in shown and "<p>A &lt;b&gt;bold&lt;/b&gt; claim</p>" in shown
    assert "<script" not in shown and "<b>" not in shown


def restarted(process, page, db, port, log):
    """Stop the app, wait until the page says so, start it again and wait for the answer to the
    panel's hello (what it holds, sent once the first run after the restart has drawn it): that run
    has ended then, and Streamlit has taken away what it did not draw again. The new process."""
    sent = page.evaluate("() => window.qcatPanel.sends")
    stop_judging_app(process)
    page.wait_for_selector(CONNECTING, state="attached", timeout=20_000)
    process = start_judging_app(db, port, log)
    page.wait_for_selector(CONNECTING, state="detached", timeout=60_000)
    page.wait_for_function("(sent) => window.qcatPanel.sends > sent && window.qcatPanel.sentTimes.size === 0",
                           arg=sent, timeout=30_000)
    page.wait_for_function(SETTLED, timeout=30_000)
    time.sleep(0.5)
    return process


@pytest.mark.slow  # over 3 s: a Streamlit server and Chromium
def test_item_16_the_page_sits_where_it_was_after_an_app_restart(tmp_path):
    """After an app restart the page sat 16 px higher for good, the progress line and the guidelines
    button under Streamlit's header: the sign-in cookie's script element (drawn in the run after a
    sign-in, not in the first run after a restart or a reload) and the gap after it had gone."""
    db, token = one_judge_store(tmp_path, toy_queries(12))
    with judge_in_chromium(tmp_path, db, token) as (page, app):
        panel_shown(page)
        page.wait_for_function(SETTLED)
        before = {}
        for width, height in SIZES:
            page.set_viewport_size({"width": width, "height": height})
            time.sleep(0.3)
            before[width] = page.evaluate(POSITIONS)
        page.set_viewport_size({"width": 1280, "height": 800})
        app["process"] = restarted(app["process"], page, db, app["port"], tmp_path / "app.log")
        for width, height in SIZES:
            page.set_viewport_size({"width": width, "height": height})
            time.sleep(0.3)
            after = page.evaluate(POSITIONS)
            for name, box in before[width]["parts"].items():
                assert after["parts"][name] == box, (width, name, before[width]["parts"], after["parts"])
            for name in (".session", ".progress", ".open-help"):  # clear of Streamlit's header
                assert after["parts"][name][1] >= after["header_bottom"], (width, name, after)


@pytest.mark.slow  # over 3 s: a Streamlit server and Chromium
def test_item_17_the_restart_line_fits_at_1280x800(tmp_path):
    """"The app is restarting … and go to the …" was cut at 1280 px (830 px of text in an 801 px
    line), with and without the count of queries waiting to be sent."""
    db, token = one_judge_store(tmp_path, toy_queries(12))
    with judge_in_chromium(tmp_path, db, token) as (page, app):
        shown = panel_shown(page)
        page.wait_for_function(SETTLED)
        stop_judging_app(app["process"])
        page.wait_for_selector(CONNECTING, state="attached", timeout=20_000)
        page.wait_for_function("() => window.qcatPanel.root.innerText.includes('The app is restarting')",
                               timeout=10_000)
        lines = [page.evaluate(MESSAGE_FITS)]
        type_keys(page, [*[1] * len(shown["slots"]), "Enter"])  # one query kept, to send
        page.wait_for_function("() => window.qcatPanel.root.innerText.includes('1 query')", timeout=10_000)
        lines.append(page.evaluate(MESSAGE_FITS))
    for line in lines:
        assert line["text"].startswith("The app is restarting"), line
        assert line["scroll"] <= line["client"] and line["right"] <= line["width"], line
