"""The app's admin page (an admin token signs in to it; ``qcat judge add-admin`` makes one):
sessions' progress per segment, the agreement so far, judges with their counts and last
activity, the claims in flight, and the actions an organizer needs during a session: release
claims, reset a judge's token, deactivate or reactivate a judge."""

from __future__ import annotations

import logging
import math

import streamlit as st
from sqlalchemy.exc import SQLAlchemyError

from judging_app import admin
from judging_app.assignment import release
from judging_app.judges import reset_token, set_active
from judging_app.sessions import session_overview
from judging_app.store import error_detail
from qcat.errors import InputError

log = logging.getLogger("judging_app.admin_page")


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
        judges_section(store)
        claims_section(store)
    except SQLAlchemyError as exc:
        log.error("judging store error: %s", error_detail(exc), exc_info=exc)
        st.error("The judging store cannot be reached right now; reload the page in a moment.")
    except InputError as exc:
        st.error(str(exc))
    if st.button("Refresh", key="admin_refresh"):
        st.rerun()


def sessions_section(store) -> None:
    st.header("Sessions", anchor=False)
    progress = admin.session_progress(store)
    if not progress:
        st.info("No judging session yet: `qcat judge create-session` makes one.")
        return
    st.dataframe(progress, hide_index=True, use_container_width=True)
    sessions = session_overview(store)
    chosen = st.selectbox("Agreement so far (Krippendorff's alpha, ordinal) in session", [s["id"] for s in sessions],
                          format_func={s["id"]: s["name"] for s in sessions}.get, key="admin_alpha_session")
    rows = admin.live_agreement(store, chosen)
    st.dataframe([{"segment": row["segment"], "units graded by 2+ judges": row["units"],
                   "alpha": _shown(row["krippendorff_alpha_ordinal"]),
                   "pairwise agreement": _shown(row["pairwise_agreement"])} for row in rows],
                 hide_index=True, use_container_width=True)


def _shown(value: float) -> str:
    return "n/a" if value is None or math.isnan(value) else f"{value:.3f}"


def judges_section(store) -> None:
    st.header("Judges", anchor=False)
    judges = admin.judge_activity(store)
    if not judges:
        st.info("No judge yet: `qcat judge add-judge NAME` adds one.")
        return
    st.dataframe([{k: v for k, v in row.items() if k != "id"} for row in judges], hide_index=True,
                 use_container_width=True)
    by_id = {row["id"]: row for row in judges}
    chosen = st.selectbox("Judge", list(by_id), format_func=lambda i: by_id[i]["judge"], key="admin_judge")
    judge = by_id[chosen]
    columns = st.columns(3)
    if columns[0].button("Release their claims", key="admin_release_judge"):
        released = release(store, judge_id=chosen)
        done(f"Released {len(released)} claim(s) of {judge['judge']}.")
    if columns[1].button("Reset their token", key="admin_reset_token"):
        st.session_state["new_token"] = (judge["judge"], reset_token(store, chosen))
        done(f"Reset the token of {judge['judge']}; their browsers are signed out.")
    if judge["active"]:
        if columns[2].button("Deactivate", key="admin_deactivate"):
            released = set_active(store, chosen, False)
            done(f"Deactivated {judge['judge']}: signed out, {len(released)} claim(s) released; their judgments stay.")
    elif columns[2].button("Reactivate", key="admin_reactivate"):
        set_active(store, chosen, True)
        done(f"Reactivated {judge['judge']}.")


def claims_section(store) -> None:
    st.header("Claims in flight", anchor=False)
    claims = admin.claims_in_flight(store)
    if not claims:
        st.caption("No open claim.")
        return
    st.dataframe([{k: v for k, v in row.items() if k != "judge_id"} for row in claims], hide_index=True,
                 use_container_width=True)
    labels = {row["query_id"]: f"{row['query']} ({row['judge']}, {row['session']})" for row in claims}
    chosen = st.selectbox("Claimed query", list(labels), format_func=labels.get, key="admin_claim")
    if st.button("Release the claims on this query", key="admin_release_query"):
        released = release(store, query_id=chosen)
        done(f"Released {len(released)} claim(s) on “{labels[chosen]}”.")


def done(message: str) -> None:
    st.session_state["admin_flash"] = message
    st.rerun()
