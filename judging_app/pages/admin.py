"""The app's admin page (an admin token signs in to it; ``qcat judge add-admin`` makes one):
sessions' progress per segment, the agreement so far, judges with their counts and last
activity, the claims in flight, and the actions an organizer needs during a session: release
claims, reset a judge's token, deactivate or reactivate a judge; and the disagreement queue
(:mod:`qcat.judging.grading.disagreements`): send a query back for another judgment, or settle it."""

from __future__ import annotations

import logging
import math
import re

import streamlit as st
from sqlalchemy.exc import SQLAlchemyError

from qcat.errors import InputError
from qcat.judging.grading import disagreements
from qcat.judging.grading.assignment import release
from qcat.judging.grading.judges import reset_token, set_active
from qcat.judging.grading.sessions import session_overview
from qcat.judging.reporting import admin_figures as admin
from qcat.judging.store.connection import error_detail
from qcat.judging.store.models import CATEGORY_GRADE_NAMES, GRADE_NAMES

log = logging.getLogger("qcat.judging.pages.admin")


def admin_page(store) -> None:
    st.title("qcat judging: admin")
    if message := st.session_state.pop("admin_flash", None):
        st.success(message)
    if token := st.session_state.pop("new_token", None):
        name, value = token
        st.warning(f"The new token of {name}, shown only now: give it to them. Their old token no longer works.")
        st.code(value, language=None)
    try:
        sessions_section(store)
        disagreements_section(store)
        judges_section(store)
        claims_section(store)
    except SQLAlchemyError as exc:
        log.error("judging store error: %s", error_detail(exc), exc_info=exc)
        st.error("The judging store cannot be reached right now; reload the page in a moment.")
    except InputError as exc:
        st.error(str(exc))
    if st.button("Refresh", key="admin_refresh"):
        st.rerun()


# Long names are cut with an ellipsis at a fixed width (the full text on hover), so the other
# columns stay on screen.
NAME_COLUMNS = {name: st.column_config.TextColumn(name, width="medium")
                for name in ("session", "judges see", "query", "judge")}


def sessions_section(store) -> None:
    st.header("Sessions", anchor=False)
    progress = admin.session_progress(store)
    if not progress:
        st.info("No judging session yet: `qcat judge create-session` makes one.")
        return
    st.dataframe(progress, hide_index=True, width="stretch", column_config=NAME_COLUMNS)
    sessions = session_overview(store)
    chosen = st.selectbox("Agreement so far (Krippendorff's alpha, ordinal) in session", [s["id"] for s in sessions],
                          format_func={s["id"]: _short(s["name"]) for s in sessions}.get, key="admin_alpha_session")
    rows = admin.live_agreement(store, chosen)
    st.dataframe([{"segment": row["segment"], "units graded by 2+ judges": row["units"],
                   "alpha": _shown(row["krippendorff_alpha_ordinal"]),
                   "pairwise agreement": _shown(row["pairwise_agreement"])} for row in rows],
                 hide_index=True, width="stretch")


def _short(name: str, limit: int = 60) -> str:
    return name if len(name) <= limit else name[:limit - 1] + "…"


def _shown(value: float) -> str:
    return "n/a" if value is None or math.isnan(value) else f"{value:.3f}"


def judges_section(store) -> None:
    st.header("Judges", anchor=False)
    judges = admin.judge_activity(store)
    if not judges:
        st.info("No judge yet: `qcat judge add-judge NAME` adds one.")
        return
    st.dataframe([{k: v for k, v in row.items() if k != "id"} for row in judges], hide_index=True,
                 width="stretch")
    by_id = {row["id"]: row for row in judges}
    chosen = st.selectbox("Judge", list(by_id), format_func=lambda i: by_id[i]["judge"], key="admin_judge")
    judge = by_id[chosen]
    columns = st.columns(3)
    if columns[0].button("Release their claims", key="admin_release_judge"):
        released = release(store, judge_id=chosen)
        done(f"Released {len(released)} claim(s) of {judge['judge']}.")
    if columns[1].button("Reset their token", key="admin_reset_token"):
        st.session_state["admin_confirm"] = ("reset", chosen)
    if judge["active"]:
        if columns[2].button("Deactivate", key="admin_deactivate"):
            st.session_state["admin_confirm"] = ("deactivate", chosen)
    elif columns[2].button("Reactivate", key="admin_reactivate"):
        set_active(store, chosen, True)
        done(f"Reactivated {judge['judge']}.")
    confirm_judge_action(store, by_id)


CONFIRM = {"reset": ("Reset the token of {name}? Their old token stops working and their browsers are signed out.",
                     "Yes, reset the token"),
           "deactivate": ("Deactivate {name}? They are signed out and cannot sign in; their open claims are "
                          "released; their judgments stay.", "Yes, deactivate")}


def confirm_judge_action(store, by_id: dict) -> None:
    """Reset token and Deactivate act only after a second, explicit click."""
    pending = st.session_state.get("admin_confirm")
    if pending is None or pending[1] not in by_id:
        return
    action, judge_id = pending
    name = by_id[judge_id]["judge"]
    question, yes = CONFIRM[action]
    st.warning(question.format(name=name))
    columns = st.columns(2)
    if columns[0].button(yes, type="primary", key="admin_confirm_yes"):
        st.session_state.pop("admin_confirm", None)
        if action == "reset":
            st.session_state["new_token"] = (name, reset_token(store, judge_id))
            done(f"Reset the token of {name}; their browsers are signed out.")
        released = set_active(store, judge_id, False)
        done(f"Deactivated {name}: signed out, {len(released)} claim(s) released; their judgments stay.")
    if columns[1].button("Cancel", key="admin_confirm_cancel"):
        st.session_state.pop("admin_confirm", None)
        st.rerun()


def claims_section(store) -> None:
    st.header("Claims in flight", anchor=False)
    claims = admin.claims_in_flight(store)
    if not claims:
        st.caption("No open claim.")
        return
    st.dataframe([{k: v for k, v in row.items() if k != "judge_id"} for row in claims], hide_index=True,
                 width="stretch", column_config=NAME_COLUMNS)
    labels = {row["query_id"]: f"{row['query']} ({row['judge']}, {row['session']})" for row in claims}
    chosen = st.selectbox("Claimed query", list(labels), format_func=labels.get, key="admin_claim")
    if st.button("Release the claims on this query", key="admin_release_query"):
        released = release(store, query_id=chosen)
        done(f"Released {len(released)} claim(s) on “{labels[chosen]}”.")


def done(message: str) -> None:
    st.session_state["admin_flash"] = message
    st.rerun()


def disagreements_section(store) -> None:
    st.header("Disagreements", anchor=False)
    sessions = session_overview(store)
    if not sessions:
        return
    session_id = st.session_state.get("admin_alpha_session") or sessions[0]["id"]
    kind = next((s["kind"] for s in sessions if s["id"] == session_id), "results")
    names = CATEGORY_GRADE_NAMES if kind == "categories" else GRADE_NAMES
    item_word = "category" if kind == "categories" else "listing"  # what a category session's judges grade
    items = disagreements.queue(store, session_id)
    if not items:
        st.caption(f"No query of this session has judges {disagreements.SPREAD} or more grades apart on a {item_word} "
                   f"(or every such {item_word} is settled).")
        return
    st.caption(f"Queries where judges differ by {disagreements.SPREAD} or more grades on a {item_word}, largest first. "
               "Send one back for another judgment, or settle it: your grade replaces the judges' mean in the "
               "report. Both are kept in the history.")
    by_id = {item.query_id: item for item in items}
    st.dataframe([{"query": item.text, "segment": item.segment, "judges": item.judges,
                   f"disputed {'categories' if kind == 'categories' else 'listings'}": len(item.listings),
                   "largest spread": max(d.spread for d in item.listings),
                   "sent back": item.sent_back} for item in items], hide_index=True, width="stretch")
    chosen = st.selectbox("Disputed query", list(by_id), format_func=lambda i: by_id[i].text, key="admin_dispute")
    item = by_id[chosen]
    settled = {}
    for disputed in item.listings:
        grades = ", ".join(f"{judge}: {grade}" for judge, grade in sorted(disputed.grades.items()))
        st.markdown(f"**{_md(disputed.title) or '(no title)'}** · {_md(disputed.listing_id)} · judges {_md(grades)}")
        settled[disputed.listing_id] = st.radio(
            f"Settled grade of {disputed.listing_id}", options=[0, 1, 2, 3], index=None, horizontal=True,
            format_func=lambda g: f"{g} {names[g]}", key=f"admin_settle_{chosen}_{disputed.listing_id}",
            label_visibility="collapsed")
    note = st.text_input("Note (kept in the history)", key=f"admin_dispute_note_{chosen}")
    columns = st.columns(2)
    if columns[0].button("Settle with these grades", type="primary", key="admin_settle"):
        given = {listing: grade for listing, grade in settled.items() if grade is not None}
        if not given:
            st.warning(f"Choose a grade for at least one disputed {item_word}, then press Settle again.")
        else:
            disagreements.settle(store, st.session_state.get("admin_id"), chosen, given, note, session_id)
            done(f"Settled “{item.text}”: {len(given)} {item_word} grade(s) set; the report uses them.")
    if columns[1].button("Send back for another judgment", key="admin_send_back"):
        disagreements.send_back(store, st.session_state.get("admin_id"), chosen, note, session_id)
        done(f"Sent “{item.text}” back: one more judge will grade it.")
    history = disagreements.history(store, chosen)
    if history:
        st.dataframe(history, hide_index=True, width="stretch")


def _md(text: str) -> str:
    """User text shown verbatim, not as Markdown."""
    return re.sub(r"([\\`*_{}\[\]()#+\-.!|<>~$])", r"\\\1", str(text))
