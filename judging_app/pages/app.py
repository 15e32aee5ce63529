"""The judging app (Streamlit): blind side-by-side grading of two search result groups.

Started by ``qcat judge app`` (which sets ``QCAT_DB_URL`` and optionally ``QCAT_JUDGE_SESSION``).
A judge signs in with their token and grades in the grading panel (:mod:`qcat.judging.pages.panel`):
the query and both groups (Group A on the left, Group B on the right; which system is which is
drawn at random per query and never shown), graded on the 4-level scale with the keys, then
submitted, skipped or flagged. The panel draws and grades in the browser and holds the next
queries ready, so the next query shows the moment Enter is pressed; each action reaches the
server as one message, stored by :mod:`qcat.judging.grading.desk` while the judge goes on. A reload
keeps the judge signed in (a session cookie, see :mod:`qcat.judging.store.sign_ins`) and the panel puts
back the grades entered so far. A judge may review and change the queries they submitted ("Your
judgments" in the sidebar). When the store cannot be reached, the panel says so in one line and
keeps the grades, sent again when the store is back. Two windows of one judge are offered queries
of their own (:mod:`qcat.judging.grading.windows`). The session's guidelines (``create-session
--guidelines``) open on a judge's first sign-in and with ``?``. Wrong tokens are rate-limited
(:mod:`qcat.judging.store.sign_in_limits`). An admin token opens the admin page
(:mod:`qcat.judging.pages.admin`).
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
import uuid
from datetime import timedelta

import streamlit as st
from sqlalchemy.exc import SQLAlchemyError
from streamlit import runtime
from streamlit.runtime.scriptrunner import get_script_run_ctx

from qcat.errors import InputError
from qcat.judging.grading import assignment, judgments
from qcat.judging.grading.desk import STORE_DOWN, GradingDesk
from qcat.judging.grading.judges import EMPTY_TOKEN, authenticate_any
from qcat.judging.grading.sessions import find_session, judge_facing_name, session_overview
from qcat.judging.grading.timing import IDLE_CAP_SECONDS
from qcat.judging.grading.windows import WINDOWS
from qcat.judging.pages import standard_guidelines
from qcat.judging.pages.page_scripts import set_sign_in_cookie
from qcat.judging.pages.panel import TEST_DELAY_ENV, grading_panel, markdown_html, sent_outbox
from qcat.judging.store import sign_ins
from qcat.judging.store.connection import URL_ENV, error_detail, open_store, resolve_url
from qcat.judging.store.models import Admin
from qcat.judging.store.sign_in_limits import LIMITER, PROXY_HEADER_ENV, client_address, too_many
from qcat.judging.store.tokens import split_token

SESSION_ENV = "QCAT_JUDGE_SESSION"
RELOAD_LATER = "reload the page in a moment."
SIGN_IN_LATER = "sign in again in a moment."
JUDGMENTS_REFRESH_SECONDS = 15
log = logging.getLogger("qcat.judging.pages.app")
_told_store_down: list[bool] = []  # this page run has shown STORE_DOWN (the script runs afresh each time)



_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$])")


def escape(text: str) -> str:
    """User text shown verbatim, not as Markdown."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", str(text))


def plural(n: int, word: str, words: str) -> str:
    return f"{n:,} {word if n == 1 else words}"


@st.cache_resource(show_spinner=False)
def get_store(url: str):
    return open_store(url)


def store_down(exc: SQLAlchemyError, advice: str = RELOAD_LATER) -> None:
    """A database error: logged in full on the server; the judge gets one plain line per page run,
    never the traceback, the SQL or the store's address (the panel says it in its own line)."""
    log.error("judging store error: %s", error_detail(exc), exc_info=exc)
    if "desk" in st.session_state and advice == RELOAD_LATER:  # the grading panel says it, in its own line
        return
    if not _told_store_down:
        _told_store_down.append(True)
        st.error(f"{STORE_DOWN}; {advice}")


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
            client = client_address(st.context.ip_address, st.context.headers, os.environ.get(PROXY_HEADER_ENV))
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
            LIMITER.succeeded(client, account)
            signed_in(person)
            st.session_state["sign_in_key"] = st.session_state["new_cookie"] = key
            st.rerun()


def sign_out(store) -> None:
    """Sign out; the judge's open claims (the query on screen and those the panel held ready) go
    back to the other judges at once instead of after the claim timeout."""
    key = st.session_state.get("sign_in_key")
    try:
        sign_ins.forget(store, key)
        if "judge_id" in st.session_state:
            assignment.release(store, judge_id=st.session_state["judge_id"])
    except SQLAlchemyError as exc:
        store_down(exc, "you are signed out in this window only.")
    if "judge_id" in st.session_state:
        WINDOWS.forget(st.session_state["judge_id"], this_window())
    for name in (*SIGNED_IN, "judge_name", "desk", "panel_queue", "session_id", "reviewing", "sign_in_key"):
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
    with st.sidebar:
        st.markdown(f"Signed in as **{escape(st.session_state['judge_name'])}**")
        if st.button("Sign out", key="sign_out"):
            sign_out(store)
        your_judgments(store, judge_id, session_id)
        st.caption("Keys: **0–3** grade · **↑/↓** move · **←/→** change · **Backspace** undo · **Enter** submit · "
                   "**S** skip · **F** flag · **R** retry · **?** guidelines")


@st.fragment(run_every=timedelta(seconds=JUDGMENTS_REFRESH_SECONDS))
def your_judgments(store, judge_id: int, session_id: int) -> None:
    """The queries this judge submitted, to review and change (the panel submits without
    rerunning the page: the list refreshes itself every few seconds)."""
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
            st.rerun(scope="app")


def claim_timeout() -> timedelta:
    minutes = os.environ.get(assignment.CLAIM_TIMEOUT_ENV, "")
    try:
        return timedelta(minutes=float(minutes)) if float(minutes) > 0 else assignment.CLAIM_TIMEOUT
    except ValueError:
        return assignment.CLAIM_TIMEOUT


def grading_desk(store, judge_id: int, session_id: int) -> GradingDesk:
    """This page's desk for the judge and session (it remembers the answers the panel has not
    yet let go of, so that an action sent twice is stored once)."""
    desk = st.session_state.get("desk")
    if desk is None or (desk.judge_id, desk.session_id) != (judge_id, session_id):
        desk = st.session_state["desk"] = GradingDesk(store, judge_id, session_id, claim_timeout(), log=log)
    desk.store = store
    return desk


def session_about(store, session_id: int) -> dict:
    """What the panel says of the session: its display name (never the systems compared) and its
    guidelines (``create-session --guidelines``) as HTML, read once per page and session: they do
    not change while judges grade."""
    cached = st.session_state.setdefault("session_about", {})
    if session_id not in cached:
        try:
            with store.sessions() as session:
                record = find_session(session, session_id)
                name = judge_facing_name(record.id, record.display_name)
                guidelines = json.loads(record.settings or "{}").get("guidelines") or None
                standard = standard_guidelines(record.kind)
        except SQLAlchemyError as exc:  # asked again next time
            store_down(exc)
            return {"name": "", "open_first": False, "guidelines_html": markdown_html(standard_guidelines("results"))}
        # A category session's judges need qcat's own guidelines (what Exact, Acceptable, Related and
        # Wrong mean) as much as a session's own: both open on a judge's first visit.
        cached[session_id] = {"name": name, "open_first": bool(guidelines) or record.kind == "categories",
                              "guidelines_html": markdown_html((guidelines + "\n\n---\n\n" if guidelines else "")
                                                               + standard)}
    return cached[session_id]


def this_window() -> str:
    """The key of this browser window (tab): its Streamlit session's id, then a key of the page's own
    (a reload is a new page)."""
    if "window" not in st.session_state:
        ctx = get_script_run_ctx()
        st.session_state["window"] = f"{ctx.session_id if ctx is not None else ''}/{uuid.uuid4().hex}"
    return st.session_state["window"]


def window_open(window: str) -> bool:
    """Whether the window's Streamlit session is still connected. Without a Streamlit server
    (``streamlit.testing``' AppTest, whose stand-in runtime answers no such question) no window is
    known to be open: none holds anything."""
    return runtime.exists() and runtime.get_instance().is_active_session(window.rsplit("/", 1)[0]) is True


def window_queue(desk: GradingDesk, outbox: dict) -> list[dict]:
    """The desk's queue for this window, never a query another open window of the judge holds. What
    the window holds is recorded only from a message of its panel: a run before any (a page load,
    the reconnect after an app restart) knows nothing of what an open panel holds, and the panel,
    told so by ``heard`` being None, says what it holds at once."""
    window = this_window()
    with WINDOWS.picking(desk.judge_id, desk.session_id):
        elsewhere = WINDOWS.held_elsewhere(desk.judge_id, desk.session_id, window, window_open)
        queue = desk.queue(outbox["holding"], outbox["want"], elsewhere)
        if outbox["send"] is not None:
            WINDOWS.hold(desk.judge_id, desk.session_id, window, [shown["id"] for shown in queue])
    return queue


@st.fragment
def grading(store, judge_id: int, session_id: int) -> None:
    """The grading panel. A message from the panel reruns this fragment alone: its actions are
    stored, and it is sent its next queries back."""
    desk = grading_desk(store, judge_id, session_id)
    outbox = sent_outbox()
    if outbox["send"] is not None and os.environ.get(TEST_DELAY_ENV):
        time.sleep(float(os.environ[TEST_DELAY_ENV]))
    answers = desk.take(outbox["actions"])
    reviewing = st.session_state.get("reviewing")
    if any(answer["status"] in ("changed", "back") and answer["query_id"] == reviewing
           for answer in desk.new_answers):
        st.session_state.pop("reviewing", None)
        reviewing = None
    down = None
    try:
        queue = desk.review(reviewing) if reviewing is not None else window_queue(desk, outbox)
        progress = desk.progress()
        st.session_state["panel_queue"] = (reviewing, queue)
    except InputError as exc:  # deactivated, not a member, a session gone: said, never a traceback
        st.error(str(exc))
        return
    except SQLAlchemyError as exc:
        log.error("judging store error: %s", error_detail(exc), exc_info=exc)
        held_for, queue = st.session_state.get("panel_queue", (None, []))
        queue = queue if held_for == reviewing else []
        progress, down = None, f"{STORE_DOWN}: you can go on with the queries on screen; what you submit is kept here."
    about = session_about(store, session_id)
    first_time = session_id not in st.session_state.setdefault("guidelines_seen", set())
    st.session_state["guidelines_seen"].add(session_id)
    grading_panel({
        "mode": "review" if reviewing is not None else ("grade" if queue or down else "done"),
        "epoch": f"{'review' if reviewing is not None else 'grade'}:{session_id}:{judge_id}:{reviewing or ''}",
        "judge": judge_id, "session": about["name"], "queue": queue,
        "answers": answers, "heard": outbox["send"], "hold": desk.hold(outbox["want"]),
        "hold_range": desk.hold_range(), "progress": progress, "store_down": down, "idle_cap": IDLE_CAP_SECONDS,
        "guidelines_html": about["guidelines_html"],
        "open_guidelines": about["open_first"] and first_time and progress is not None and progress["judged"] == 0
                           and progress["skipped"] == 0,
    })


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
        return
    if "admin_id" in st.session_state:
        with st.sidebar:
            st.markdown(f"Signed in as **{escape(st.session_state['judge_name'])}** (admin)")
            if st.button("Sign out", key="sign_out"):
                sign_out(store)
        # Imported when an admin signs in: its reports (numpy, scipy, matplotlib) would cost every
        # app start and a judge's first page over a second.
        from qcat.judging.pages.admin import admin_page

        admin_page(store)
        return
    try:
        session_id = choose_session(store)
        if session_id is None:
            return
        judge_id = st.session_state["judge_id"]
        sidebar(store, judge_id, session_id)
        grading(store, judge_id, session_id)
    except InputError as exc:
        st.error(str(exc))
    except SQLAlchemyError as exc:
        store_down(exc)


main()
