"""Issue 48: the grading panel's code is ES modules by concern (panel.js and the panel_*.js it
imports), served as the component's one inline module whose loader links them in the browser."""

from __future__ import annotations

import graphlib
import os
from pathlib import Path

import pytest
from judging_fixtures import CHROMIUM, ROOT, launch_chromium

from qcat.judging.pages.panel import HTML, MODULE_IMPORT, panel_js, panel_modules

PAGES = ROOT / "judging_app" / "pages"


def test_every_panel_module_is_served_each_after_those_it_imports():
    modules = panel_modules()
    assert set(modules) == {p.name for p in PAGES.glob("panel*.js")}  # none left out, none unused
    order = list(modules)
    for name, text in modules.items():
        assert all(order.index(dep) < order.index(name) for dep in MODULE_IMPORT.findall(text)), name
    assert order[-1] == "panel.js"


def test_a_cycle_or_an_import_from_elsewhere_is_refused(tmp_path: Path):
    (tmp_path / "panel.js").write_text("import {a} from './panel_a.js';\nexport default function () {}\n")
    (tmp_path / "panel_a.js").write_text("import {b} from './panel.js';\nexport const a = 1;\n")
    with pytest.raises(graphlib.CycleError):
        panel_modules(tmp_path)
    (tmp_path / "panel_a.js").write_text("import {b} from 'https://example.com/b.js';\nexport const a = 1;\n")
    with pytest.raises(ValueError, match="imports only panel modules beside it"):
        panel_modules(tmp_path)


SCREEN = {"id": 7, "text": "usb &amp; cable", "kind": "results",
          "slots": [{"listing": "L1", "side": "left"}, {"listing": "L2", "side": "right"}],
          "left": [{"position": 1, "title": "A cable", "category": "Cables", "listing": "L1", "slot": 0}],
          "right": [{"position": 1, "title": "A plug", "category": "Plugs", "listing": "L2", "slot": 1}]}
DATA = {"judge": "j1", "mode": "grade", "epoch": "grade:1:1:", "queue": [SCREEN], "hold": 1, "hold_range": [1, 4],
        "idle_cap": 60, "session": "s", "progress": None, "answers": {}, "heard": None, "store_down": None}


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="needs Chromium")
def test_chromium_links_the_modules_and_the_panel_grades_and_sends():
    """The served module in Chromium, as Streamlit runs it (a blob: URL, its default export called
    with the component): the modules link, the query is drawn, keys grade it and Enter sends it."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = launch_chromium(p)
        try:
            page = browser.new_page()
            page.route("http://panel.test/", lambda route: route.fulfill(
                content_type="text/html", body=f"<html><body><div id='host'>{HTML}</div></body></html>"))
            page.goto("http://panel.test/")
            sent = page.evaluate("""async ([js, data]) => {
              const url = URL.createObjectURL(new Blob([js], {type: 'text/javascript'}));
              window.mount = (await import(url)).default;
              window.sent = [];
              window.mount({parentElement: document.getElementById('host'), data,
                            setStateValue: (name, value) => window.sent.push([name, value])});
              return window.sent;
            }""", [panel_js(), DATA])
            assert page.locator(".query").inner_text() == "Query: usb & cable"
            assert [(name, value["holding"], value["actions"]) for name, value in sent] == [("outbox", [7], [])]  # the hello
            for key in ["2", "3", "Enter"]:
                page.keyboard.press(key)
            assert page.locator(".loading").count() == 1  # nothing else held: it waits for the next
            # One message at a time: the submit waits in the outbox for the hello's answer, then goes.
            assert page.evaluate("() => [window.sent.length, window.qcatPanel.outbox.length, window.qcatPanel.sendPending]") \
                == [1, 1, True]
            sent = page.evaluate("""(data) => {
              window.mount({parentElement: document.getElementById('host'), data,
                            setStateValue: (name, value) => window.sent.push([name, value])});
              return window.sent;
            }""", {**DATA, "heard": 1, "queue": []})
            assert len(sent) == 2
            action = sent[-1][1]["actions"][0]
            assert (action["kind"], action["query"], action["text"]) == ("submit", 7, "usb & cable")
            assert action["grades"] == [["L1", "left", 2], ["L2", "right", 3]]
        finally:
            browser.close()
