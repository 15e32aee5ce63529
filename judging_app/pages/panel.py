"""The grading panel: one Streamlit custom component (Components v2, inline HTML/CSS/JS, no
iframe) that draws the query and both blind groups, owns the keyboard, and sends the server one
message per action (:mod:`qcat.judging.grading.desk` answers it). Its code is in ``panel.css`` and
in ES modules beside this module: ``panel.js``, the entry, and the ``panel_*.js`` it imports (state,
the outbox, the message line, drawing, the desk of held queries, the keys), served together as the
component's one inline module (:func:`panel_js`).

Keys: 0-3 grade the listing in focus and move on; Up/Down (Tab/Shift+Tab) move; Left/Right change
the grade in focus; Backspace takes back the last grade; Enter submits (or saves a review); S skips;
F flags (the note field: Enter there flags and skips, Esc goes back); R sends again what the store
could not take; ? opens the guidelines (? or Esc closes them; any other key but the arrows and Tab
closes them and acts); Esc leaves a review.
"""

from __future__ import annotations

import graphlib
import json
import re
from importlib.resources import files

import streamlit as st
from markdown_it import MarkdownIt

KEY = "grading_panel"
# Tests only (tests/test_judging_typeahead.py): seconds every message of the panel waits before the
# app answers it (not the first screen after sign-in), as on a slow server. Unset, nothing waits.
TEST_DELAY_ENV = "QCAT_TEST_PANEL_DELAY"
HTML = """<div class="qcat-panel">
  <div class="top"><span class="session"></span><span class="progress"></span>
    <button type="button" class="open-help" tabindex="-1">Guidelines and keys (?)</button></div>
  <div class="messages" aria-live="polite"></div>
  <div class="body"></div>
  <div class="actions" hidden>
    <button type="button" class="submit" tabindex="-1">Submit grades (Enter)</button>
    <button type="button" class="skip grade-only" tabindex="-1">Skip query (S)</button>
    <input class="note grade-only" type="text" maxlength="2000" placeholder="Flag note (F): what is wrong with the query?">
    <button type="button" class="flag grade-only" tabindex="-1">Flag &amp; skip</button>
    <span class="count"></span>
  </div>
  <div class="help" role="document" hidden>
    <button type="button" class="close-help" tabindex="-1" style="float: right">Close (Esc)</button>
    <div class="help-text"></div>
  </div>
</div>"""

_here = files("qcat.judging.pages")
# How a panel module imports another: one statement per module, names in braces, from a file beside it.
MODULE_IMPORT = re.compile(r"^import \{[^}]*\} from '\./(panel\w*\.js)';$", re.MULTILINE)
# The component takes one inline module, which the browser runs from a blob: URL, where a relative
# import resolves to nothing. So this loader makes each panel module a blob: URL of its own, those it
# imports first, points their imports at those URLs, and exports the entry's default (the mount).
LOADER = """// The grading panel's modules (qcat/judging/pages/panel*.js), each after those it imports.
const sources = %s;
const urls = {};
for (const [name, text] of Object.entries(sources)) {
  const linked = text.replace(new RegExp(%s, 'gm'), (line, file) => line.replace(`'./${file}'`, `'${urls[file]}'`));
  urls[name] = URL.createObjectURL(new Blob([`${linked}\\n//# sourceURL=qcat-panel/${name}`], {type: 'text/javascript'}));
}
export default (await import(urls['panel.js'])).default;
"""


def panel_modules(folder=_here) -> dict[str, str]:
    """The panel's modules (file name -> text): ``panel.js`` in ``folder`` and the modules it
    imports, each after those it imports. An import that is not of a module beside it, or a cycle,
    is refused."""
    texts: dict[str, str] = {}
    graph: dict[str, set[str]] = {}
    pending = ["panel.js"]
    while pending:
        name = pending.pop()
        if name in texts:
            continue
        texts[name] = text = (folder / name).read_text(encoding="utf-8")
        graph[name] = set(MODULE_IMPORT.findall(text))
        if len(re.findall(r"^import\b", text, re.MULTILINE)) != len(graph[name]):
            raise ValueError(f"{name}: a panel module imports only panel modules beside it, as {MODULE_IMPORT.pattern}")
        pending.extend(graph[name])
    return {name: texts[name] for name in graphlib.TopologicalSorter(graph).static_order()}  # CycleError on a cycle


def panel_js() -> str:
    """The component's one module: the panel's modules and the loader that links them in the browser."""
    return LOADER % (json.dumps(panel_modules(), ensure_ascii=False), json.dumps(MODULE_IMPORT.pattern))


_component = st.components.v2.component(
    "qcat_grading_panel", html=HTML, css=(_here / "panel.css").read_text(encoding="utf-8"), js=panel_js())
_markdown = MarkdownIt("commonmark", {"html": False}).enable("table")


def markdown_html(text: str) -> str:
    """Guidelines (Markdown) as HTML for the panel; raw HTML in them is shown as text, not run."""
    return _markdown.render(text)


# The page around the panel: less empty space above it, so that 5 + 5 listings fit at 1280x800, its top
# line just below Streamlit's header (3.75rem high); and no "Connection error" box over the panel while
# the app restarts: the panel's message line says it. A script-only st.html (the sign-in cookie, drawn
# in the run after a sign-in, not after a reload or an app restart) takes no room: its element and the
# gap after it had moved the panel 16 px between the two.
PAGE_STYLE = ("<style>[data-testid='stMainBlockContainer'] { padding-top: 3.75rem; padding-bottom: 0; }\n"
              "[data-testid='stElementContainer']:has(> [data-testid='stHtml'] > script:only-child) { display: none; }\n"
              "body:has([data-testid='stConnectionStatus']) [data-testid='stDialog'] { display: none; }</style>")


def grading_panel(data: dict) -> None:
    """Mount the panel with ``data`` (what :func:`qcat.judging.pages.app.grading` sends it); what the
    panel sends back is read at the start of the next run, :func:`sent_outbox`."""
    st.html(PAGE_STYLE)
    _component(key=KEY, data=data, default={"outbox": {"actions": [], "holding": []}}, on_outbox_change=lambda: None)


def sent_outbox() -> dict:
    """The panel's last message as it stands at the start of this run, before the panel is mounted:
    ``actions`` (its outbox), ``holding`` (the queries it holds, the one on screen first), ``want``
    (how many it wants to hold, from the judge's pace; None: the default) and ``send`` (the
    message's number, echoed back so that the panel can time the round trip; None before the
    panel has sent anything)."""
    state = st.session_state.get(KEY)
    outbox = state.get("outbox") if hasattr(state, "get") else None
    if not isinstance(outbox, dict):
        outbox = {}

    def whole(value):
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    return {"actions": outbox.get("actions") if isinstance(outbox.get("actions"), list) else [],
            "holding": outbox.get("holding") if isinstance(outbox.get("holding"), list) else [],
            "want": whole(outbox.get("want")), "send": whole(outbox.get("send"))}
