"""The judging app (Streamlit): blind side-by-side grading of two search result groups.

Started by ``qcat judge app`` (which sets ``QCAT_DB_URL`` and optionally ``QCAT_JUDGE_SESSION``).
A judge signs in with their token, gets the next query that still needs them, and grades every
listing of both groups (Group A on the left, Group B on the right; which system is which is
drawn at random per query and never shown) on the 4-level scale, then submits, skips or flags.
Grades are saved only on submit; a reload keeps the judge signed in (a session cookie, see
:mod:`judging_app.sign_ins`) and puts back the open query with the grades entered so far
(:mod:`judging_app.page_scripts`). A judge may review and change the queries they submitted
("Your judgments" in the sidebar). When the store cannot be reached, the judge is told so in one
line (the error is logged here), and the query on screen stays, with the grades entered, until a
retry reaches the store (the line is drawn by the buttons too, where the judge is looking). Late
grades that are no longer needed move the judge on, recording nothing. The session's guidelines
(``create-session --guidelines``) open in a dialog on a judge's first sign-in and sit, with the
grade scale and the keys, under "Guidelines and keys (?)" in the sidebar (``?`` opens it).
Listing cards show the listing's picture and link when the result lists carry them. Wrong tokens
are rate-limited (:mod:`judging_app.sign_in_limits`). An admin token opens the admin page
(:mod:`judging_app.admin_page`).
"""

from __future__ import annotations

import html
import inspect
import json
import logging
import os
import re
from datetime import timedelta

import streamlit as st
from sqlalchemy.exc import SQLAlchemyError

from judging_app import assignment, judgments, sign_ins
from judging_app.admin_page import admin_page
from judging_app.judges import EMPTY_TOKEN, authenticate_any
from judging_app.sign_in_limits import LIMITER, too_many
from judging_app.tokens import split_token
from judging_app.models import GRADE_NAMES, Admin
from judging_app.page_scripts import grading_page, install_hotkeys, set_sign_in_cookie
from judging_app.imports import safe_url
from judging_app.sessions import find_session, session_overview
from judging_app.store import URL_ENV, error_detail, open_store, resolve_url
from qcat.errors import InputError

SESSION_ENV = "QCAT_JUDGE_SESSION"
GROUPS = {"left": "Group A", "right": "Group B"}
STORE_DOWN = "The judging store cannot be reached right now"
KEEP_GRADES = "your grades are kept here: press the button again in a moment."
SIGN_IN_LATER = "sign in again in a moment."
log = logging.getLogger("judging_app.app")
_told_store_down: list[bool] = []  # this page run has shown STORE_DOWN (the script runs afresh each time)

GUIDELINE = """
**Judge each listing against the query**, as a shopper who typed it would. Each group is one
search engine's top results; judge every listing on its own. A listing that appears in both
groups is graded once, in Group A: its grade counts for both groups.

| grade | meaning |
|---|---|
| **3 Excellent** | exactly what the query asks for (right product, brand, model, size…) |
| **2 Good** | the right kind of product, but not exactly the one asked for (other model, size, colour) |
| **1 Acceptable** | related: an accessory, a part or a close substitute a shopper might still want |
| **0 Off-topic** | unrelated to the query |

Unsure between two grades? Take the lower one. **Skip** a query you cannot judge (you will not
see it again); **flag** it with a note when something is wrong with it (offensive, not a product
search, unintelligible).

**Keyboard:** the first listing without a grade has the focus (a blue ring). Press **0–3** to
grade it: the focus moves on to the next listing, and after the last one to **Submit grades**,
where Enter submits. Tab / Shift+Tab also move from listing to listing and the arrow keys change
a grade; Ctrl+Enter submits while no field has the focus. A digit typed while no listing has the
focus grades the first listing without a grade. **?** opens this help.
"""
HELP_BUTTON = "Guidelines and keys (?)"

_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$])")


def escape(text: str) -> str:
    """User text shown verbatim, not as Markdown."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", str(text))


def plural(n: int, word: str, words: str) -> str:
    return f"{n:,} {word if n == 1 else words}"


def grade_label(grade: int) -> str:
    return f"{grade} {GRADE_NAMES[grade]}"


@st.cache_resource(show_spinner=False)
def get_store(url: str):
    return open_store(url)


def store_down(exc: SQLAlchemyError, advice: str = KEEP_GRADES, here: bool = False) -> None:
    """A database error: logged in full on the server; the judge gets one plain line per page run,
    never the traceback, the SQL or the store's address. ``here``: the judge just pressed a button:
    the line is drawn where it is called (by the button) even when the top of the page has it
    already, and a toast says it too."""
    log.error("judging store error: %s", error_detail(exc), exc_info=exc)
    if here:
        st.error(f"{STORE_DOWN}; {advice}")
        st.toast(f"Not saved: {STORE_DOWN.lower()}.", icon="⚠️")
    if not _told_store_down:
        _told_store_down.append(True)
        if not here:
            st.error(f"{STORE_DOWN}; {advice}")


def submit_button(label: str, **kwargs) -> bool:
    if "shortcut" not in inspect.signature(st.form_submit_button).parameters:
        kwargs.pop("shortcut", None)
    return st.form_submit_button(label, **kwargs)


SIGNED_IN = ("judge_id", "admin_id")


def signed_in(person) -> None:
    """Remember who signed in, in this Streamlit session (the cookie keeps it across a reload)."""
    role = "admin_id" if isinstance(person, Admin) else "judge_id"
    st.session_state[role], st.session_state["judge_name"] = person.id, person.name


def sign_in_from_cookie(store) -> None:
    """A reloaded page: sign in again from the browser's sign-in cookie, if it holds a live key."""
    key = st.context.cookies.get(sign_ins.COOKIE)
    if not isinstance(key, str) or not key or st.session_state.get("signed_out_key") == key:
        return
    person = sign_ins.recall(store, key, sign_ins.lifetime_from_env())
    if person is not None:
        signed_in(person)
        st.session_state["sign_in_key"] = key


def sign_in(store) -> None:
    st.title("qcat side-by-side judging")
    st.write("Sign in with the token you were given.")
    with st.form("sign_in"):
        token = st.text_input("Your judge token", type="password", key="token")
        if st.form_submit_button("Sign in", type="primary"):
            client = st.context.ip_address
            shaped = split_token(token or "")
            account = shaped[0] if shaped else None
            if wait := LIMITER.wait_seconds(client, account):  # refused before any scrypt is run
                st.error(too_many(wait))
                return
            try:
                person = authenticate_any(store, token)
                key = sign_ins.remember(store, person)
            except InputError as exc:
                if str(exc) != EMPTY_TOKEN:
                    LIMITER.failed(client, account)
                st.error(str(exc))
                return
            except SQLAlchemyError as exc:
                store_down(exc, SIGN_IN_LATER)
                return
            LIMITER.succeeded(account)
            signed_in(person)
            st.session_state["sign_in_key"] = st.session_state["new_cookie"] = key
            st.rerun()


def sign_out(store) -> None:
    key = st.session_state.get("sign_in_key")
    try:
        sign_ins.forget(store, key)
    except SQLAlchemyError as exc:
        store_down(exc, "you are signed out in this window only.")
    for name in (*SIGNED_IN, "judge_name", "flash", "screen", "session_id", "reviewing", "sign_in_key"):
        st.session_state.pop(name, None)
    st.session_state["signed_out_key"] = key  # this session's cookie snapshot still holds it
    st.session_state["new_cookie"] = None
    st.rerun()


def choose_session(store) -> int | None:
    """The session being judged; the one chosen last while the store cannot be reached."""
    try:
        st.session_state["session_id"] = pick_session(store)
    except SQLAlchemyError as exc:
        store_down(exc)
    return st.session_state.get("session_id")


def pick_session(store) -> int | None:
    wanted = os.environ.get(SESSION_ENV)
    with store.sessions() as session:
        if wanted:
            return find_session(session, wanted).id
    with store.sessions() as session:
        judge_id = st.session_state.get("judge_id")
        sessions = [s for s in session_overview(store) if assignment.may_judge(session, judge_id, s["id"])]
    if not sessions:
        st.info("There is no judging session for you yet: an organizer creates one with `qcat judge create-session` "
                "(and names its judges with `qcat judge members`).")
        return None
    if len(sessions) == 1:
        return sessions[0]["id"]
    labels = {s["id"]: f"{s['display_name']} ({plural(s['queries'], 'query', 'queries')})" for s in sessions}
    return st.sidebar.selectbox("Judging session", list(labels), format_func=labels.get, key="session_choice")


def sidebar(store, judge_id: int, session_id: int) -> None:
    try:
        progress = assignment.progress(store, judge_id, session_id)
    except SQLAlchemyError as exc:
        store_down(exc)
        progress = None
    with st.sidebar:
        st.markdown(f"Signed in as **{escape(st.session_state['judge_name'])}**")
        if st.button("Sign out", key="sign_out"):
            sign_out(store)
        if progress is not None:
            show_progress(progress)
        your_judgments(store, judge_id, session_id)
        with st.expander(HELP_BUTTON, expanded=False):  # opened in the browser, no rerun: `?` toggles it
            if guidelines := session_guidelines(store, session_id):
                st.markdown(guidelines)
                st.divider()
            st.markdown(GUIDELINE)


def session_guidelines(store, session_id: int) -> str | None:
    """The session's own Markdown guidelines (``create-session --guidelines``), or None."""
    try:
        with store.sessions() as session:
            record = find_session(session, session_id)
            return json.loads(record.settings or "{}").get("guidelines") or None
    except SQLAlchemyError as exc:
        store_down(exc)
        return None


@st.dialog("Guidelines and keys", width="large")
def guidelines_dialog(guidelines: str | None) -> None:
    if guidelines:
        st.markdown(guidelines)
        st.divider()
    st.markdown(GUIDELINE)
    if st.button("Start judging", type="primary", key="help_close"):
        st.rerun()


def first_sign_in_guidelines(store, judge_id: int, session_id: int) -> None:
    """Open the session's guidelines once, for a judge who has had no query of the session yet."""
    seen = st.session_state.setdefault("guidelines_seen", set())
    if session_id in seen:
        return
    seen.add(session_id)
    guidelines = session_guidelines(store, session_id)
    if guidelines is None:
        return
    try:
        progress = assignment.progress(store, judge_id, session_id)
    except SQLAlchemyError as exc:
        store_down(exc)
        return
    if progress["given"] == 0:
        guidelines_dialog(guidelines)


def your_judgments(store, judge_id: int, session_id: int) -> None:
    """The queries this judge submitted, to review and change."""
    try:
        submitted = judgments.submitted_queries(store, judge_id, session_id)
    except SQLAlchemyError as exc:
        store_down(exc)
        return
    if not submitted:
        return
    with st.expander(f"Your judgments ({len(submitted):,})", expanded=False):
        labels = {s.query_id: s.text + (f" (changed {plural(s.edits, 'time', 'times')})" if s.edits else "")
                  for s in submitted}
        chosen = st.selectbox("A query you submitted", list(labels), format_func=labels.get, key="review_choice")
        if st.button("Review or change", key="review"):
            st.session_state["reviewing"] = chosen
            st.rerun()


def show_progress(progress: dict) -> None:
    with st.sidebar:
        st.subheader("Progress")
        st.markdown(f"You: **{plural(progress['judged'], 'query', 'queries')}** judged, {progress['skipped']:,} skipped")
        needed = max(progress["judgments_needed"], 1)
        st.progress(min(progress["judgments_done"] / needed, 1.0),
                    text=f"Session: {progress['judgments_done']:,} of {progress['judgments_needed']:,} query judgments, "
                         f"{progress['complete_queries']:,} of {progress['queries']:,} queries complete")


def price_text(price: float) -> str:
    """A catalog price as shown (the catalog names no currency): 49.88, 1,299.00."""
    return f"{price:,.2f}"


def listing_card(item) -> str:
    facts = [f"Brand: {escape(item.brand)}" if item.brand else "",
             f"Price: {escape(price_text(item.price))}" if item.price is not None else ""]
    facts_line = " · ".join(fact for fact in facts if fact)
    return (f"**{item.position}. {escape(item.title) or '(no title)'}**  \n" +
            (f"{facts_line}  \n" if facts_line else "") +
            f":gray[{escape(item.category)} · {escape(item.listing_id)}]")


def listing_card_html(item) -> str | None:
    """The card with the listing's picture and a link to its page (lists that carry them), as
    HTML: every text escaped, only http(s) and inline-image URLs; the link opens a new tab and
    takes no Tab stop (Tab goes from grade to grade). None when the listing has neither."""
    image = safe_url(getattr(item, "image_url", None) or "", images=True)
    link = safe_url(getattr(item, "link", None) or "", images=False)
    if image is None and link is None:
        return None
    facts = [f"Brand: {html.escape(item.brand)}" if item.brand else "",
             f"Price: {html.escape(price_text(item.price))}" if item.price is not None else ""]
    title = html.escape(item.title) or "(no title)"
    if link is not None:
        title = (f'<a href="{html.escape(link, quote=True)}" target="_blank" rel="noopener noreferrer" '
                 f'tabindex="-1">{title}</a>')
    picture = (f'<img class="qcat-thumb" src="{html.escape(image, quote=True)}" alt="" loading="lazy">'
               if image is not None else "")
    facts_line = " · ".join(fact for fact in facts if fact)
    return (f'<div class="qcat-card">{picture}<p><strong>{item.position}. {title}</strong>'
            + (f"<br>{facts_line}" if facts_line else "")
            + f'<br><span style="color: gray">{html.escape(item.category)} · {html.escape(item.listing_id)}</span>'
            + "</p></div>")


def claim_timeout() -> timedelta:
    minutes = os.environ.get(assignment.CLAIM_TIMEOUT_ENV, "")
    try:
        return timedelta(minutes=float(minutes)) if float(minutes) > 0 else assignment.CLAIM_TIMEOUT
    except ValueError:
        return assignment.CLAIM_TIMEOUT


def query_on_screen(store, judge_id: int, session_id: int) -> assignment.QueryScreen | None:
    """The query to show: the store's next query for this judge, or, while the store cannot be
    reached, the query already on screen (so its grade widgets, and the grades entered, stay)."""
    # The query on screen stays this judge's even when its claim was released meanwhile, so that
    # grades submitted after a long pause reach judgments.submit (which keeps them while needed).
    showing = st.session_state.get("screen")
    try:
        screen = assignment.next_query(store, judge_id, session_id, claim_timeout(),
                                       showing=showing.query_id if showing else None)
    except SQLAlchemyError as exc:
        store_down(exc)
        return showing
    st.session_state["screen"] = screen
    if showing is not None and (screen is None or screen.query_id != showing.query_id):
        tell_if_finished_elsewhere(store, judge_id, showing)
    return screen


def tell_if_finished_elsewhere(store, judge_id: int, showing: assignment.QueryScreen) -> None:
    """The query this page showed was submitted or skipped in another window (this page clears
    its screen after its own submit or skip): its form here was not used, and the judge is told."""
    try:
        status = assignment.finished(store, judge_id, showing.query_id)
    except SQLAlchemyError as exc:
        store_down(exc)
        return
    if status is not None:
        st.warning(f"“{escape(showing.text)}” was already {'graded' if status == 'done' else 'skipped'} "
                   "in another window: nothing was changed. Here is your next query.")


def grade_controls(screen: assignment.QueryScreen, prefix: str,
                   grades: dict[tuple[str, str], int] | None = None) -> dict[tuple[str, str], str]:
    """Both groups' listing cards, each with its grade control (preset to ``grades`` when
    reviewing); returns the widget key of each (listing, side) graded."""
    keys: dict[tuple[str, str], str] = {}
    columns = st.columns(2, gap="large")
    shared = screen.shared()
    left_position = {item.listing_id: item.position for item in screen.left}
    for (side, group), column in zip((("left", screen.left), ("right", screen.right)), columns):
        with column:
            st.subheader(GROUPS[side], anchor=False)  # no heading link: Tab goes from grade to grade
            if not group:
                st.caption("This search returned nothing.")
            for item in group:
                card = listing_card_html(item)
                if card is not None:
                    st.markdown(card, unsafe_allow_html=True)
                else:
                    st.markdown(listing_card(item))
                if side == "right" and item.listing_id in shared:
                    st.caption(f"Same listing as {GROUPS['left']} result {left_position[item.listing_id]}: "
                               "graded there, the grade counts for both groups.")
                    continue
                key = f"{prefix}_{screen.query_id}_{side}_{item.position}"
                keys[(item.listing_id, side)] = key
                given = (grades or {}).get((item.listing_id, side))
                st.radio(f"Grade for {GROUPS[side]} result {item.position}", options=[0, 1, 2, 3],
                         format_func=grade_label, index=given, horizontal=True, key=key,
                         label_visibility="collapsed")
    return keys


def grades_entered(keys: dict[tuple[str, str], str]) -> dict[tuple[str, str], int] | None:
    """The grades of the form, or None (the judge is told) while some listing has none."""
    grades = {pair: st.session_state.get(key) for pair, key in keys.items()}
    missing = sum(1 for grade in grades.values() if grade is None)
    if missing:
        st.warning(f"Grade every listing first: {missing} of {len(grades)} are not graded yet.")
        return None
    return grades


def stored(action, text: str = ""):
    """Run a store action of the judge's: ``(True, its result)``, or ``(False, None)`` once the judge
    has been told why not (a refused input; the store unreachable: said by the buttons, where the
    judge is looking). A query already finished in another window reruns the page, whose next run
    shows the next query and says why; late grades no longer needed (the query was judged by
    others meanwhile) move the judge on to the next query, recording nothing."""
    try:
        return True, action()
    except assignment.AlreadyFinished:
        st.rerun()
    except judgments.NotNeeded:
        st.session_state["flash_info"] = (f"While “{escape(text)}” waited, other judges graded it: your grades for it are not "
                                          "needed and nothing was recorded. Here is your next query.")
        st.session_state["screen"] = None
        st.rerun()
    except InputError as exc:
        st.error(str(exc))
    except SQLAlchemyError as exc:
        store_down(exc, here=True)
    return False, None


def reviewing(store, judge_id: int, query_id: int) -> None:
    """A query this judge submitted, with their grades: changed grades are saved as new versions."""
    try:
        with store.sessions() as session:
            screen = assignment.screen(session, query_id)
        grades = judgments.my_grades(store, judge_id, query_id)
    except SQLAlchemyError as exc:
        store_down(exc)
        return
    st.markdown(f"## Query: {escape(screen.text)}")
    st.info("You submitted this query already: change any grade, then save. Every version is kept; "
            "the results use the latest.")
    with st.form(f"review_{query_id}", border=True):
        keys = grade_controls(screen, "review", grades)
        with st.container(horizontal=True, gap="medium"):
            save = submit_button("Save changes", type="primary", shortcut="Ctrl+Enter")
            back = submit_button("Back to grading")
    if back:
        st.session_state.pop("reviewing", None)
        st.rerun()
    if save and (changed := grades_entered(keys)) is not None:
        done, result = stored(lambda: judgments.submit(store, judge_id, query_id, changed), screen.text)
        if not done:
            return
        st.session_state["flash"] = (f"Changed {plural(result.listings_updated, 'grade', 'grades')} of “{screen.text}”."
                                     if result.updated else f"No grade of “{screen.text}” changed.")
        st.session_state.pop("reviewing", None)
        st.rerun()


def grading(store, judge_id: int, session_id: int) -> None:
    screen = query_on_screen(store, judge_id, session_id)
    if screen is None:
        if not _told_store_down:
            st.success("All done: no query in this session needs your judgment any more. Thank you!")
        return
    st.markdown(f"## Query: {escape(screen.text)}")
    with st.form(f"grade_{screen.query_id}", border=True):
        keys = grade_controls(screen, "grade")
        note = st.text_input("Flag note (optional): what is wrong with this query?", key=f"note_{screen.query_id}",
                             placeholder="e.g. offensive, not a product search, unintelligible")
        with st.container(horizontal=True, gap="medium"):  # each button as wide as its label
            submitted = submit_button("Submit grades", type="primary", shortcut="Ctrl+Enter")
            skipped = submit_button("Skip query")
            flagged = submit_button("Flag & skip")
    if submitted:
        grades = grades_entered(keys)
        if grades is None:
            return
        if not stored(lambda: judgments.submit(store, judge_id, screen.query_id, grades, flag_note=note or None,
                                               resubmit=False), screen.text)[0]:
            return
        st.session_state["flash"] = f"Saved your {len(grades)} grades for “{screen.text}”."
        st.session_state["screen"] = None  # finished here, not in another window
        st.rerun()
    if skipped or flagged:
        if flagged and not note.strip():
            st.warning("Write in the note field what is wrong with the query, then press Flag & skip again.")
            return
        if not stored(lambda: assignment.skip(store, judge_id, screen.query_id, flag_note=note or None),
                      screen.text)[0]:
            return
        st.session_state["flash"] = f"{'Flagged and skipped' if flagged else 'Skipped'} “{screen.text}”."
        st.session_state["screen"] = None  # finished here, not in another window
        st.rerun()


def main() -> None:
    st.set_page_config(page_title="qcat judging", page_icon="⚖️", layout="wide")
    try:
        store = get_store(resolve_url(os.environ.get(URL_ENV)))
    except InputError as exc:  # `qcat judge app` checked the store at start: it has gone away since
        log.error("cannot open the judging store: %s", exc)
        st.error(f"{STORE_DOWN}; reload the page in a moment.")
        st.stop()
    if "new_cookie" in st.session_state:
        set_sign_in_cookie(st.session_state.pop("new_cookie"))
    if not any(role in st.session_state for role in SIGNED_IN):
        try:
            sign_in_from_cookie(store)
        except SQLAlchemyError as exc:
            store_down(exc, SIGN_IN_LATER)
    if not any(role in st.session_state for role in SIGNED_IN):
        sign_in(store)
        install_hotkeys()
        return
    if "admin_id" in st.session_state:
        with st.sidebar:
            st.markdown(f"Signed in as **{escape(st.session_state['judge_name'])}** (admin)")
            if st.button("Sign out", key="sign_out"):
                sign_out(store)
        admin_page(store)
        return
    try:
        session_id = choose_session(store)
        if session_id is None:
            return
        if flash := st.session_state.pop("flash", None):
            st.success(flash)
        if flash := st.session_state.pop("flash_info", None):
            st.info(flash)
        judge_id = st.session_state["judge_id"]
        first_sign_in_guidelines(store, judge_id, session_id)
        sidebar(store, judge_id, session_id)
        if (query_id := st.session_state.get("reviewing")) is not None:
            reviewing(store, judge_id, query_id)
            grading_page(query_id, keep_draft=False)
            return
        grading(store, judge_id, session_id)
        if (screen := st.session_state.get("screen")) is not None:
            grading_page(screen.query_id, keep_draft=True)
    except InputError as exc:
        st.error(str(exc))
    except SQLAlchemyError as exc:
        store_down(exc)


main()
