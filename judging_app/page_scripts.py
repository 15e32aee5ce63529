"""The browser-side parts of the judging page: digit hotkeys, the focus ring, grades kept across
a reload, the scroll to the top of a new query, ``?`` for the guidelines, the compact layout and
the sign-in cookie.

The scripts run in the page itself through ``st.html(..., unsafe_allow_javascript=True)`` (the
supported API; ``st.components.v1.html`` is deprecated). The listeners are installed once (a
reload starts afresh); what must happen once per query (the scroll to the top, the focus,
putting back saved grades) is guarded by the page's record of the query it last showed.

Digits are never lost: a digit typed while no listing has the focus (before the focus lands on a
new query, after a reconnect, after a dialog closed) grades the first listing without a grade,
and one typed before the query's listings are on the page waits for them.
"""

from __future__ import annotations

import json

import streamlit as st

from judging_app.sign_ins import COOKIE

# A visible focus ring on the listing whose grade the keys change (Streamlit's own is faint), and
# a compact layout: at 1280x800, 5 + 5 listings with little scrolling, grade options on one line,
# button labels never cut.
FOCUS_RING = """<style>
[data-testid="stForm"] [data-testid="stRadio"]:focus-within {
  outline: 3px solid #1c6dd0; outline-offset: 1px; border-radius: 4px;
}
[data-testid="stForm"] button:focus-visible { outline: 3px solid #1c6dd0; outline-offset: 2px; }
[data-testid="stMainBlockContainer"] { padding-top: 2.2rem; padding-bottom: 1rem; }
[data-testid="stForm"] [data-testid="stVerticalBlock"] { gap: 0.15rem; }
[data-testid="stForm"] [data-testid="stMarkdownContainer"] p { margin-bottom: 0; padding-bottom: 0.45rem; line-height: 1.3; font-size: 0.92rem; }
[data-testid="stForm"] [data-testid="stRadio"] { margin: 0.25rem 0 0.3rem 0; }
[data-testid="stForm"] [data-testid="stRadio"] [role="radiogroup"] { flex-wrap: nowrap; gap: 0.6rem; }
[data-testid="stForm"] [data-testid="stRadio"] label { white-space: nowrap; margin-right: 0; }
[data-testid="stForm"] [data-testid="stRadio"] label p { font-size: 0.85rem; padding-bottom: 0; }
[data-testid="stForm"] h3 { padding: 0.1rem 0 0.7rem 0; font-size: 1.15rem; }
[data-testid="stForm"] [data-testid="stFormSubmitButton"] button { white-space: nowrap; width: auto; }
[data-testid="stForm"] [data-testid="stFormSubmitButton"] button p { white-space: nowrap; }
.qcat-thumb { float: left; width: 52px; height: 52px; object-fit: contain; margin: 0.1rem 0.5rem 0 0; }
.qcat-card { display: flow-root; margin: 0 !important; padding-bottom: 0.45rem; }
[data-testid="stForm"] .qcat-card p { margin: 0 !important; padding-bottom: 0 !important; }
[data-testid="stForm"] [data-testid="stCaptionContainer"] { margin: 0.1rem 0 0.45rem 0; }
[data-testid="stForm"] h3 { margin-bottom: 0.3rem; }
</style>"""

# Runs in the page itself (a component frame is replaced on later runs, and a listener of a frame
# that is gone is never called again): one listener for the keys 0-3 (the grade of the focused
# listing; then the focus moves to the next listing, and after the last one to the first button,
# Submit) and, while a new query is graded, one that saves the grades entered so far in the tab's
# sessionStorage, from which a reloaded page puts them back. ``qcatShow`` is called on every run
# with the query shown.
PAGE_CODE = """
(() => {
const doc = document, PENDING_MS = 5000, DRAFT = 'qcat-draft-', OPTION = '[data-testid="stRadioOption"]';
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
const typing = (node) => node && (node.isContentEditable || /^(TEXTAREA|SELECT)$/.test(node.tagName) ||
  (node.tagName === 'INPUT' && node.type !== 'radio'));
const inDialog = (node) => node && node.closest && node.closest('[role="dialog"]');
window.qcatPending = window.qcatPending || [];
function gradeWith(digit) {
  // The focused listing gets the grade, else the first listing without one (no focus yet).
  const all = groups();
  let index = all.findIndex(g => g.contains(doc.activeElement));
  if (index < 0) index = all.findIndex(g => !g.querySelector('input:checked'));
  if (index < 0) return false;
  all[index].querySelectorAll(OPTION)[digit].click();
  // The focus moves on at once, so that the next digit, however fast, grades the next listing.
  if (index + 1 < all.length) focusGroup(all[index + 1]);
  else if (firstButton()) firstButton().focus();
  setTimeout(saveDraft, 0);
  return true;
}
doc.addEventListener('keydown', (event) => {
  if (event.ctrlKey || event.metaKey || event.altKey) return;
  const active = doc.activeElement;
  if (event.key === '?' && !typing(active) && !inDialog(active)) {
    const help = Array.from(doc.querySelectorAll('[data-testid="stExpander"] summary'))
      .find(s => s.innerText.includes('Guidelines and keys'));
    if (help) {
      event.preventDefault();
      const details = help.closest('details');
      if (details && !details.open) help.click();
      help.scrollIntoView({block: 'start'});
    }
    return;
  }
  if (!/^[0-3]$/.test(event.key) || typing(active) || inDialog(active)) return;  // text fields keep their digits
  if (doc.querySelector('[role="dialog"]')) return;
  const all = groups();
  if (!all.length || !window.qcatQuery) {  // the query is not on the page yet: the digit waits for it
    event.preventDefault();
    window.qcatPending.push({digit: Number(event.key), at: Date.now()});
    return;
  }
  event.preventDefault();
  gradeWith(Number(event.key));
}, true);
doc.addEventListener('change', saveDraft, true);
doc.addEventListener('input', saveDraft, true);
function replayPending() {
  const fresh = window.qcatPending.filter(p => Date.now() - p.at < PENDING_MS);  // older ones were not meant for it
  window.qcatPending = [];
  fresh.forEach(p => gradeWith(p.digit));
}
window.qcatShow = (config) => {
  window.qcatQuery = config;
  if (window.qcatShownFor === config.key) {  // the same query again: the judge keeps their place
    whenRendered(replayPending);  // digits typed while the page was being redrawn
    return;
  }
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
    const active = doc.activeElement;
    if (open && !(typing(active) && !window.qcatRestored) && !inDialog(active)) {
      focusGroup(open, false);  // the page stays at the top
    }
    replayPending();
  };
  const saved = config.draft ? sessionStorage.getItem(DRAFT + config.id) : null;
  window.qcatRestored = false;
  whenRendered(() => saved ? restoreDraft(JSON.parse(saved), () => { window.qcatRestored = true; focusFirstOpen(); })
                           : focusFirstOpen());
};
})();
"""

# Installs PAGE_CODE into the page once (``__THEN__``: what to run after, on every run).
INSTALL_SCRIPT = """<script>
(() => {
if (!document.getElementById('qcat-grading')) {
  const code = document.createElement('script');
  code.id = 'qcat-grading';
  code.textContent = __PAGE_CODE__;
  document.head.appendChild(code);
}
__THEN__
})();
</script>"""
# The same, then tells the page the query shown.
GRADING_SCRIPT = INSTALL_SCRIPT.replace("__THEN__", "window.qcatShow(__CONFIG__);")


def install_hotkeys() -> None:
    """Install the page's listeners ahead of the first query (on the sign-in page), so that digits
    typed while the first query is coming wait for it."""
    st.html(INSTALL_SCRIPT.replace("__PAGE_CODE__", json.dumps(PAGE_CODE)).replace("__THEN__", ""),
            unsafe_allow_javascript=True)


def grading_page(query_id: int, keep_draft: bool) -> None:
    """The focus ring, the hotkeys, the scroll to the top and the first listing's focus for the
    query shown, and (``keep_draft``: a query being graded, not one being reviewed) its grades
    kept across a reload."""
    st.markdown(FOCUS_RING, unsafe_allow_html=True)
    config = {"id": int(query_id), "key": f"{'grade' if keep_draft else 'review'}-{int(query_id)}",
              "draft": bool(keep_draft)}
    script = GRADING_SCRIPT.replace("__PAGE_CODE__", json.dumps(PAGE_CODE)).replace("__CONFIG__", json.dumps(config))
    st.html(script, unsafe_allow_javascript=True)


def set_sign_in_cookie(key: str | None) -> None:
    """Give the browser the sign-in key in a session cookie (gone when the browser closes); None
    deletes it. Only the page's own origin can read it; it never appears in a URL."""
    value = f"{COOKIE}={key}; path=/; SameSite=Strict" if key else f"{COOKIE}=; path=/; SameSite=Strict; max-age=0"
    st.html(f"<script>document.cookie = {json.dumps(value)};</script>", unsafe_allow_javascript=True)
