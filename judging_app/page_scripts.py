"""The browser-side parts of the judging page: digit hotkeys, the focus ring, grades kept across
a reload, the scroll to the top of a new query, and the sign-in cookie.

Streamlit renders each script in a zero-height component frame of the page's own origin, so the
script reaches the page through ``window.parent``. The listeners are installed into the page
itself, once (a reload starts afresh); what must happen once per query (the scroll to the top,
the focus, putting back saved grades) is guarded by the page's record of the query it last
showed.
"""

from __future__ import annotations

import json

import streamlit as st
import streamlit.components.v1 as components

from judging_app.sign_ins import COOKIE

# A visible focus ring on the listing whose grade the keys change (Streamlit's own is faint).
FOCUS_RING = """<style>
[data-testid="stForm"] [data-testid="stRadio"]:focus-within {
  outline: 3px solid #1c6dd0; outline-offset: 6px; border-radius: 4px;
}
[data-testid="stForm"] button:focus-visible { outline: 3px solid #1c6dd0; outline-offset: 2px; }
</style>"""

# Runs in the page itself (a component frame is replaced on later runs, and a listener of a frame
# that is gone is never called again): one listener for the keys 0-3 (the grade of the focused
# listing; then the focus moves to the next listing, and after the last one to the first button,
# Submit) and, while a new query is graded, one that saves the grades entered so far in the tab's
# sessionStorage, from which a reloaded page puts them back. ``qcatShow`` is called on every run
# with the query shown.
PAGE_CODE = """
(() => {
const doc = document, DRAFT = 'qcat-draft-', OPTION = '[data-testid="stRadioOption"]';
const groups = () => Array.from(doc.querySelectorAll('[data-testid="stForm"] [data-testid="stRadio"]'));
const noteField = () => doc.querySelector('[data-testid="stForm"] [data-testid="stTextInput"] input');
const firstButton = () => doc.querySelector('[data-testid="stForm"] [data-testid="stFormSubmitButton"] button');
function focusGroup(group, scroll = true) {
  const input = group.querySelector('input:checked') || group.querySelector('input');
  if (input) input.focus({preventScroll: !scroll});
}
function saveDraft() {
  const shown = window.qcatQuery;
  if (!shown || !shown.draft || window.qcatRestoring) return;
  const note = noteField();
  const draft = {grades: groups().map(g => Array.from(g.querySelectorAll('input')).findIndex(i => i.checked)),
                 note: note ? note.value : ''};
  sessionStorage.setItem(DRAFT + shown.id, JSON.stringify(draft));
}
function restoreDraft(draft, then, tries = 50) {
  // Puts the saved grades back into the listings that have none (a grade the judge has chosen
  // meanwhile stays), retrying while Streamlit is still rendering the form; then ``then()``.
  window.qcatRestoring = true;
  const all = groups();
  all.forEach((group, i) => {
    const grade = draft.grades[i], options = group.querySelectorAll(OPTION);
    if (grade >= 0 && options[grade] && !group.querySelector('input:checked')) options[grade].click();
  });
  const note = noteField();
  if (note && draft.note && !note.value) {
    Object.getOwnPropertyDescriptor(HTMLInputElement.prototype, 'value').set.call(note, draft.note);
    note.dispatchEvent(new Event('input', {bubbles: true}));
  }
  const complete = all.length >= draft.grades.length && draft.grades.every(
    (grade, i) => grade < 0 || all[i].querySelectorAll('input')[grade].checked) && (!draft.note || (note && note.value));
  if (!complete && tries > 0) { setTimeout(() => restoreDraft(draft, then, tries - 1), 100); return; }
  window.qcatRestoring = false;
  then();
}
function whenRendered(action, tries = 100) {
  // Streamlit renders the form in pieces: act once the number of listings stops changing.
  let last = -1, steady = 0;
  const timer = setInterval(() => {
    const n = groups().length;
    steady = (n > 0 && n === last) ? steady + 1 : 0;
    last = n;
    if (steady >= 3 || --tries <= 0) { clearInterval(timer); action(); }
  }, 100);
}
doc.addEventListener('keydown', (event) => {
  if (!/^[0-3]$/.test(event.key) || event.ctrlKey || event.metaKey || event.altKey) return;
  const all = groups();
  const index = all.findIndex(g => g.contains(doc.activeElement));
  if (index < 0) return;  // digits typed anywhere else (the note field) are text
  event.preventDefault();
  all[index].querySelectorAll(OPTION)[Number(event.key)].click();
  // The focus moves on at once, so that the next digit, however fast, grades the next listing.
  if (index + 1 < all.length) focusGroup(all[index + 1]);
  else if (firstButton()) firstButton().focus();
  setTimeout(saveDraft, 0);
}, true);
doc.addEventListener('change', saveDraft, true);
doc.addEventListener('input', saveDraft, true);
window.qcatShow = (config) => {
  window.qcatQuery = config;
  if (window.qcatShownFor === config.key) return;  // the same query again: the judge keeps their place
  window.qcatShownFor = config.key;
  for (let node = doc.querySelector('[data-testid="stMainBlockContainer"]'); node; node = node.parentElement) {
    if (node.scrollTop) node.scrollTop = 0;
  }
  window.scrollTo(0, 0);
  for (let i = sessionStorage.length - 1; i >= 0; i--) {
    const key = sessionStorage.key(i);
    if (key && key.startsWith(DRAFT) && key !== DRAFT + config.id) sessionStorage.removeItem(key);
  }
  const focusFirstOpen = () => {
    const all = groups();
    const open = all.find(g => !g.querySelector('input:checked')) || all[0];
    if (open) focusGroup(open, false);  // the page stays at the top
  };
  const saved = config.draft ? sessionStorage.getItem(DRAFT + config.id) : null;
  whenRendered(() => saved ? restoreDraft(JSON.parse(saved), focusFirstOpen) : focusFirstOpen());
};
})();
"""

# The component frame installs PAGE_CODE into the page once, then tells it the query shown.
GRADING_SCRIPT = """<script>
const doc = window.parent.document;
if (!doc.getElementById('qcat-grading')) {
  const code = doc.createElement('script');
  code.id = 'qcat-grading';
  code.textContent = __PAGE_CODE__;
  doc.head.appendChild(code);
}
window.parent.qcatShow(__CONFIG__);
</script>"""


def grading_page(query_id: int, keep_draft: bool) -> None:
    """The focus ring, the hotkeys, the scroll to the top and the first listing's focus for the
    query shown, and (``keep_draft``: a query being graded, not one being reviewed) its grades
    kept across a reload."""
    st.markdown(FOCUS_RING, unsafe_allow_html=True)
    config = {"id": int(query_id), "key": f"{'grade' if keep_draft else 'review'}-{int(query_id)}",
              "draft": bool(keep_draft)}
    script = GRADING_SCRIPT.replace("__PAGE_CODE__", json.dumps(PAGE_CODE)).replace("__CONFIG__", json.dumps(config))
    components.html(script, height=0)


def set_sign_in_cookie(key: str | None) -> None:
    """Give the browser the sign-in key in a session cookie (gone when the browser closes); None
    deletes it. Only the page's own origin can read it; it never appears in a URL."""
    value = f"{COOKIE}={key}; path=/; SameSite=Strict" if key else f"{COOKIE}=; path=/; SameSite=Strict; max-age=0"
    components.html(f"<script>window.parent.document.cookie = {json.dumps(value)};</script>", height=0)
