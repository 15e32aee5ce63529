"""The figures of a judging benchmark run (bench_judging.py): every grade read back from the store
and compared with what each judge typed, the Enter -> next query times, the protocol driver's
server and driver CPU, answers and round trips, and the organizer's admin-page reloads checked
against a recount of the store."""

from __future__ import annotations

import statistics
from collections import Counter


def stored_grades(url: str) -> dict[tuple[str, int], dict[tuple[str, str], int]]:
    """Every grade in the store: (judge's name, query id) -> (listing, side) -> grade."""
    from sqlalchemy import select

    from qcat.judging.store.connection import open_store
    from qcat.judging.store.models import Judge, Judgment

    store = open_store(url)
    with store.sessions() as session:
        rows = session.execute(select(Judge.name, Judgment.query_id, Judgment.listing_id, Judgment.side, Judgment.grade)
                               .join(Judge, Judge.id == Judgment.judge_id)).all()
    store.dispose()
    stored: dict[tuple[str, int], dict[tuple[str, str], int]] = {}
    for name, query_id, listing, side, grade in rows:
        stored.setdefault((name, query_id), {})[(listing, side)] = grade
    return stored


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(share * (len(ordered) - 1))))]


def tally(store_kind: str, url: str, judges: int, results: list[dict], key_s: float) -> dict:
    stored = stored_grades(url)
    keys = as_typed = 0
    unlike: list[dict] = []  # the (judge, query)s whose stored grades differ from those typed: what went wrong
    for i, result in enumerate(results):  # judge i is judge{i} (prepare)
        for query_id, grades in result["typed"].items():
            found = stored.get((f"judge{i}", query_id), {})
            keys += len(grades)
            alike = sum(found.get(key) == grade for key, grade in grades.items())
            as_typed += alike
            if alike < len(grades):
                unlike.append({"judge": i, "query": query_id, "typed": len(grades), "stored": len(found),
                               "as_typed": alike})
    transitions = [t for result in results for t in result["transitions"]] or [float("nan")]
    return {"store": store_kind, "judges": judges, "queries": sum(len(r["typed"]) for r in results),
            "enter_to_next_p50_s": round(statistics.median(transitions), 4),
            "enter_to_next_p90_s": round(percentile(transitions, 0.9), 4),
            "enter_to_next_max_s": round(max(transitions), 4),
            "transitions": len(transitions), "transitions_over_0_3_s": sum(t > 0.3 for t in transitions),
            "loading_shown": sum(r["loading_shown"] for r in results),
            "slow_at": sorted({i for r in results for i, t in enumerate(r["transitions"]) if t > 0.3}),
            "queries_per_minute_per_judge": round(statistics.mean(len(r["typed"]) / r["seconds"] * 60 for r in results), 1),
            "keys_typed": keys, "grades_stored_as_typed": as_typed, "not_as_typed": unlike[:10],
            "key_interval_ms": round(key_s * 1000)}


def protocol_figures(results: list[dict], usage: dict, protocol: dict) -> dict:
    """The protocol driver's own figures: the server's and the driver's CPU per graded query (one
    whose submit the server answered "saved"), the server's peak memory, the answers by status, the
    panels' messages (each a run of the grading fragment; sign-in to the end), their round trips
    (a message to the answer to it or to a later one; the hello after sign-in not counted), the
    sidebar's auto-reruns, and how long after the minutes the last answers came (``settle_s``)."""
    statuses: dict[str, int] = {}
    for result in results:
        for status, n in result["statuses"].items():
            statuses[status] = statuses.get(status, 0) + n
    graded = statuses.get("saved", 0)
    trips = [t for result in results for t in result["round_trips"]] or [float("nan")]
    per = (lambda seconds: round(seconds / graded, 5) if graded and seconds is not None else None)
    return {"driver": "protocol", "pace_per_minute": protocol["pace"], "minutes": protocol["minutes"],
            "graded_queries": graded, "answers": statuses, "window_s": round(usage["window_s"], 1),
            "settle_s": round(usage["window_s"] - protocol["minutes"] * 60, 1),
            "round_trip_p50_s": round(statistics.median(trips), 3), "round_trip_p90_s": round(percentile(trips, 0.9), 3),
            "round_trip_max_s": round(max(trips), 3),
            "unsettled_judges": sum(not r["settled"] for r in results), "ran_out": sum(r["ran_out"] for r in results),
            "panel_messages": sum(r["panel_messages"] for r in results), "auto_reruns": sum(r["auto_reruns"] for r in results),
            "server_cpu_s": round(usage["server_cpu_s"], 2), "server_cpu_s_per_graded_query": per(usage["server_cpu_s"]),
            "server_peak_memory_mb": usage["server_peak_memory_mb"],
            "store_server_cpu_s_per_graded_query": per(usage["store_server_cpu_s"]),
            "driver_cpu_s": round(usage["driver_cpu_s"], 2), "driver_cpu_s_per_graded_query": per(usage["driver_cpu_s"]),
            "apps": protocol.get("apps", 1), "proxy": bool(protocol.get("proxy")), "killed_at_s": usage["killed_at_s"],
            "reconnects": sum(r["reconnects"] for r in results),
            "reconnect_max_s": round(max((t for r in results for t in r["reconnect_s"]), default=0), 2)}


def admin_figures(url: str, usage: dict) -> dict:
    """The organizer's reloads of the admin page while the judges graded (``admin_page_*``: each
    reload, sent to finished), and whether the page, reloaded once every answer was in, showed what
    a recount of the store's assignments gives: judgments and complete queries (the Sessions table:
    gold questions apart) and each judge's queries judged (the Judges table)."""
    if "admin_page_s" not in usage:
        return {}
    from sqlalchemy import select

    from qcat.judging.store.connection import open_store
    from qcat.judging.store.models import Assignment, Judge, JudgingSession, SessionQuery

    store = open_store(url)
    with store.sessions() as session:
        rows = session.execute(select(Judge.name, Assignment.query_id, SessionQuery.gold, JudgingSession.judges_per_query)
                               .join(Judge, Judge.id == Assignment.judge_id)
                               .join(SessionQuery, SessionQuery.id == Assignment.query_id)
                               .join(JudgingSession, JudgingSession.id == SessionQuery.session_id)
                               .where(Assignment.status == "done")).all()
    store.dispose()
    per_judge = Counter(name for name, *_ in rows)
    per_query = Counter((query, quota) for _, query, gold, quota in rows if not gold)
    done, complete = sum(per_query.values()), sum(n >= quota for (_, quota), n in per_query.items())
    sessions = next((t for t in usage["admin_tables"] if t and "judgments needed" in t[0]), [])
    judges = next((t for t in usage["admin_tables"] if t and "judged" in t[0]), [])
    shown = {row["judge"]: row["judged"] for row in judges}
    pages = usage["admin_page_s"] or [float("nan")]
    return {"admin_reloads": len(usage["admin_page_s"]), "admin_page_p50_s": round(statistics.median(pages), 3),
            "admin_page_p90_s": round(percentile(pages, 0.9), 3), "admin_page_max_s": round(max(pages), 3),
            "admin_judgments_shown": sum(row["judgments"] for row in sessions), "store_judgments": done,
            "admin_figures_right": (sum(row["judgments"] for row in sessions) == done
                                    and sum(row["complete"] for row in sessions) == complete
                                    and all(shown.get(name, 0) == n for name, n in per_judge.items()))}
