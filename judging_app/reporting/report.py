"""The judging report (eBay §4.2.3, Table 5): NDCG* of baseline and target per head/torso/tail
query set and the mix, from the mean of the judges' grades, with paired bootstrap intervals,
per-query wins/ties/losses and inter-rater agreement. Markdown, HTML and JSON through
:mod:`qcat.evaluation.report_files`.

A query counts once all its judges are done (``--min-judges`` lowers that). Its NDCG* per side
is the golden harness's :func:`qcat.evaluation.golden.system_metrics.ndcg_star` over that side's
top min(5, returned) listings, each listing's grade being the mean of the judges' grades.

Gold questions (:mod:`qcat.judging.grading.gold`) count in none of that: a table of their own shows each
judge's agreement with the known grades, lowest first (a careless judge comes out on top).
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from collections.abc import Iterable
from datetime import datetime, timezone

import numpy as np

from qcat.errors import InputError
from qcat.evaluation.golden.system_metrics import QueryJudgments, bootstrap_delta, mean_defined, ndcg_star
from qcat.evaluation.html import html_document
from qcat.evaluation.plots import figure_svg, plt
from qcat.evaluation.report import Table, markdown_document, percent
from qcat.judging.grading.gold import gold_summary
from qcat.judging.grading.sessions import SEGMENTS
from qcat.judging.grading.timing import FAST_SHARE, TIMING_RULE, timing_summary
from qcat.judging.reporting.agreement import agreement
from qcat.judging.reporting.results import SessionResults, judges_needed, load_results
from qcat.judging.store.connection import Store

TITLE = "qcat side-by-side judging report"
MIX = "mix"
TIE = 1e-12
SYSTEMS = ("baseline", "target")


def per_query_ndcg(results: SessionResults, query_ids: list[int]) -> dict[str, np.ndarray]:
    """NDCG* of each system on each query, from the mean grade of every shown listing."""
    index = {q: i for i, q in enumerate(query_ids)}
    grades: dict[tuple[int, str, int], list[int]] = defaultdict(list)
    for j in results.judgments:
        if j.query_id in index:
            grades[(j.query_id, j.system, j.position)].append(j.grade)
    out = {}
    listing_at = {(i.query_id, i.system, i.position): i.listing_id for i in results.items}

    def grade_of(query_id: int, system: str, position: int) -> float:
        settled = results.settled.get((query_id, listing_at.get((query_id, system, position))))
        if settled is not None:
            return float(settled)
        given = grades.get((query_id, system, position))
        return float(np.mean(given)) if given else np.nan

    for system in SYSTEMS:
        items = sorted((index[i.query_id], i.position) for i in results.items if i.system == system and i.query_id in index)
        rows = np.array([q for q, _ in items], dtype=np.int64)
        position = np.array([p - 1 for _, p in items], dtype=np.int64)
        grade = np.array([grade_of(query_ids[q], system, p) for q, p in items], dtype=np.float64)
        counts = np.bincount(rows, minlength=len(query_ids)) if len(rows) else np.zeros(len(query_ids), dtype=np.int64)
        judgments = QueryJudgments(np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
                                   np.zeros(len(rows), dtype=np.int64), np.zeros(len(rows), dtype=np.int8), grade)
        out[system] = ndcg_star(judgments, position, counts.astype(np.float64))
    return out


def outcome_counts(baseline: np.ndarray, target: np.ndarray) -> dict[str, int]:
    diff = target - baseline
    return {"win": int((diff > TIE).sum()), "tie": int((np.abs(diff) <= TIE).sum()), "loss": int((diff < -TIE).sum())}


def list_overlap(results: SessionResults) -> dict[str, int]:
    """How many of the session's queries show the same listings in both groups: ``identical_lists``
    (the same listings in the same order) and ``shared_listings`` (at least one listing in both)."""
    lists: dict[tuple[int, str], list[tuple[int, str]]] = defaultdict(list)
    for item in results.items:
        lists[(item.query_id, item.system)].append((item.position, item.listing_id))
    identical = shared = 0
    for query in results.queries:
        baseline, target = (sorted(lists.get((query.id, system), [])) for system in SYSTEMS)
        identical += bool(baseline) and baseline == target
        shared += bool({listing for _, listing in baseline} & {listing for _, listing in target})
    return {"identical_lists": identical, "shared_listings": shared}


def agreement_unit(query_id: int, side: str, listing_id: str, shared: set[tuple[int, str]]) -> tuple:
    """One listing on one side of one query; a listing shown in both groups is one unit (graded once)."""
    return (query_id, "both" if (query_id, listing_id) in shared else side, listing_id)


def agreement_rows(judgments: Iterable[tuple[int, str, str, int]], segment_by_id: dict[int, str],
                   shared: set[tuple[int, str]], judges_per_query: int) -> list[dict]:
    """Inter-rater agreement per segment and the mix over ``judgments`` (query id, listing, side,
    grade); ``shared``: the (query id, listing) pairs shown in both groups (one unit, graded once)."""
    units_by_segment: dict[str, dict[tuple, list[int]]] = {s: defaultdict(list) for s in (*SEGMENTS, MIX)}
    for query_id, listing_id, side, grade in judgments:
        unit = agreement_unit(query_id, side, listing_id, shared)
        if unit[1] == "both" and side == "right":
            continue  # the same grade as on the left
        for segment in (segment_by_id[query_id], MIX):
            units_by_segment[segment][unit].append(grade)
    return [{"segment": segment, **agreement(list(units_by_segment[segment].values()), judges_per_query)}
            for segment in (*SEGMENTS, MIX)]


def build_report(store: Store, key: str | int, bootstrap: int = 1000, seed: int = 0, min_judges: int | None = None) -> dict:
    if bootstrap < 0:
        raise InputError(f"bootstrap draws must be non-negative, got {bootstrap}")
    results = load_results(store, key)
    needed = judges_needed(results, min_judges)
    complete = [q for q in results.queries if q.judges >= needed]
    ids = [q.id for q in complete]
    ndcg = per_query_ndcg(results, ids)
    segment_of = np.array([q.segment for q in complete], dtype=object)
    settings = json.loads(results.settings or "{}")
    identical = {s: int(n) for s, n in (settings.get("identical_skipped") or {}).items()}
    rows = []
    for segment in (*SEGMENTS, MIX):
        mask = np.ones(len(ids), dtype=bool) if segment == MIX else segment_of == segment
        b, t = ndcg["baseline"][mask], ndcg["target"][mask]
        delta, low, high = bootstrap_delta(b, t, bootstrap, seed)
        base_mean = mean_defined(b)
        counts = outcome_counts(b, t)
        tied_unjudged = sum(identical.values()) if segment == MIX else identical.get(segment, 0)
        counts["tie"] += tied_unjudged  # identical top N in both systems: a tie without graders
        rows.append({"segment": segment, "queries": int(mask.sum()), "identical_ties": tied_unjudged,
                     "available": sum(1 for q in results.queries if segment in (MIX, q.segment)),
                     "baseline": base_mean, "target": mean_defined(t), "delta": delta, "low": low, "high": high,
                     "relative": delta / base_mean if base_mean and not math.isnan(base_mean) else float("nan"),
                     **counts})
    sides_of: dict[tuple[int, str], set[str]] = defaultdict(set)
    for item in results.items:
        sides_of[(item.query_id, item.listing_id)].add(item.side)
    shared = {key for key, sides in sides_of.items() if len(sides) == 2}
    agreements = agreement_rows(((j.query_id, j.listing_id, j.side, j.grade) for j in results.judgments),
                                {q.id: q.segment for q in results.queries}, shared, results.judges_per_query)
    by_side = {side: [j.grade for j in results.judgments if j.side == side] for side in ("left", "right")}
    by_system = {system: [j.grade for j in results.judgments if j.system == system] for system in SYSTEMS}
    return {
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "session": {"id": results.id, "name": results.name, "baseline": results.baseline_model,
                    "target": results.target_model, "judges_per_query": results.judges_per_query,
                    "settings": json.loads(results.settings or "{}")},
        "options": {"bootstrap": bootstrap, "seed": seed, "min_judges": needed},
        "coverage": {"queries": len(results.queries), "complete": len(complete),
                     "complete_by_judges": {str(n): k for n, k in sorted(Counter(q.judges for q in complete).items())},
                     "partial": sum(1 for q in results.queries if 0 < q.judges < needed),
                     "unjudged": sum(1 for q in results.queries if q.judges == 0),
                     "judgments": len(results.judgments), "judges": len({j.judge_id for j in results.judgments}),
                     "skips": sum(q.skipped for q in results.queries),
                     "flagged_queries": sum(1 for q in results.queries if q.flagged), **list_overlap(results)},
        "table5": rows,
        "agreement": agreements,
        "gold": gold_summary(store, results.id),
        "timing": timing_summary(store, results.id),
        "settled_listings": len(results.settled),
        "checks": {"mean_grade_by_screen_side": {s: float(np.mean(g)) if g else float("nan") for s, g in by_side.items()},
                   "mean_grade_by_system": {s: float(np.mean(g)) if g else float("nan") for s, g in by_system.items()},
                   "flag_notes": [{"query_id": q, "judge": judge, "note": note} for q, judge, note in results.flag_notes]},
        "per_query": [{"query_id": q.id, "query": q.text, "segment": q.segment, "judges": q.judges,
                       "baseline": float(ndcg["baseline"][i]), "target": float(ndcg["target"][i])}
                      for i, q in enumerate(complete)],
    }


def _interval(row: dict) -> str:
    if row["delta"] is None or math.isnan(row["delta"]):
        return "–"
    if row["low"] is None or math.isnan(row["low"]):
        return f"{100 * row['delta']:+.2f}"
    return f"{100 * row['delta']:+.2f} [{100 * row['low']:+.2f}, {100 * row['high']:+.2f}]"


def _number(value: float | None, digits: int = 3) -> str:
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"


def _relative(value: float | None) -> str:
    return "–" if value is None or math.isnan(value) else f"{100 * value:+.2f}"


def tables(report: dict) -> list[Table]:
    options = report["options"]
    table5 = Table(
        "NDCG* of target vs baseline from human judgments (laid out like eBay's Table 5)",
        ("QuerySet", "queries judged", "NDCG* baseline (%)", "NDCG* target (%)", "δ NDCG* (points) [95% CI]",
         "δ relative (%)", "win", "tie", "loss"),
        [(r["segment"], f"{r['queries']:,} of {r['available']:,}", percent(r["baseline"]), percent(r["target"]),
          _interval(r), _relative(r["relative"]), f"{r['win']:,}", f"{r['tie']:,}", f"{r['loss']:,}")
         for r in report["table5"]],
        note=(f"A query counts once {options['min_judges']} judges have graded it. NDCG* per query and side over the "
              "top min(5, returned) listings, DCG = Σ 2^grade/log2(i+1) with each listing's grade the mean of the "
              "judges' grades (Off-topic 0 … Excellent 3), IDCG all Excellent (eBay §4.2.3). δ = target − baseline "
              f"with a {options['bootstrap']:,}-draw paired bootstrap 95% interval over queries; relative = δ / "
              "baseline. win/tie/loss: queries where the target's NDCG* is higher / equal / lower"
              + (f"; tie includes {sum(r['identical_ties'] for r in report['table5'] if r['segment'] != MIX):,} "
                 f"queries whose top {report['session']['settings'].get('differing_top')} listings were identical in "
                 "both systems, left out of judging (no NDCG* of theirs in the means)"
                 if report['session']['settings'].get('differing_top') is not None else "") + "."
              + (f" {report['settled_listings']:,} listing grades settled by an admin (disagreement queue) replace "
                 "the judges' mean." if report.get('settled_listings') else "")),
    )
    agreement = agreement_table(report["agreement"], report["session"]["judges_per_query"],
                                "one listing on one side of one query; a listing in both groups is one unit")
    gold = report.get("gold") or {"queries": 0, "judges": []}
    checks = report["checks"]
    check_rows = [("mean grade, left group", _number(checks["mean_grade_by_screen_side"]["left"], 3)),
                  ("mean grade, right group", _number(checks["mean_grade_by_screen_side"]["right"], 3)),
                  ("mean grade, baseline", _number(checks["mean_grade_by_system"]["baseline"], 3)),
                  ("mean grade, target", _number(checks["mean_grade_by_system"]["target"], 3)),
                  ("skips", f"{report['coverage']['skips']:,}"),
                  ("flagged queries", f"{report['coverage']['flagged_queries']:,}")]
    checks_table = Table("Checks", ("check", "value"), check_rows,
                         note="Left and right are where the groups were shown (drawn at random per query); a large "
                              "left/right difference would suggest a position bias.", detail=True)
    notes = Table("Flag notes", ("query id", "judge", "note"),
                  [(str(n["query_id"]), n["judge"], n["note"]) for n in checks["flag_notes"][:50]], detail=True)
    return ([table5, agreement] + ([gold_table(gold, "listings")] if gold["queries"] else [])
            + [timing_table(report.get("timing")), checks_table] + ([notes] if checks["flag_notes"] else []))


def agreement_table(rows: list[dict], judges_per_query: int, unit: str) -> Table:
    """Inter-rater agreement per query set (a session report's ``agreement`` rows); ``unit`` says
    what one graded unit is."""
    return Table(
        f"Inter-rater agreement (units: {unit})",
        ("QuerySet", "units (2+ judges)", "Krippendorff's α (ordinal)", f"units ({judges_per_query} judges)",
         "Fleiss' κ", "pairwise agreement (%)"),
        [(a["segment"], f"{a['units']:,}", _number(a["krippendorff_alpha_ordinal"]), f"{a['fleiss_kappa_units']:,}",
          _number(a["fleiss_kappa"]), percent(a["pairwise_agreement"])) for a in rows],
        note="Fleiss' κ uses only the units graded by exactly the session's number of judges; α uses every unit "
             "with two or more grades. Both are undefined (–) when every grade is the same.",
    )


def gold_table(gold: dict, things: str) -> Table:
    """Each judge against the gold questions' known grades (``things``: listings or categories)."""
    return Table(
        "Agreement with gold questions",
        ("judge", "gold queries judged", f"gold {things} graded", "exact agreement (%)", "mean absolute difference",
         "within 1 grade (%)"),
        [(g["judge"], f"{g['queries']:,}", f"{g['listings']:,}", percent(g["exact"]), _number(g["mean_abs_diff"], 2),
          percent(g["within_one"])) for g in gold["judges"]],
        note=f"{gold['queries']:,} gold question{'s' * (gold['queries'] != 1)}: queries with known grades, given to every judge among the others "
             f"and left out of every other number of this report. Each judge's grades of their {things} against the "
             "known ones (a listing in both groups counts once), lowest exact agreement first: a judge far below the "
             "others may be grading carelessly.",
    )


def timing_table(timing: dict | None) -> Table:
    """Seconds per query per judge and per segment, as the grading panel measured them."""
    timing = timing or {"judges": [], "segments": []}
    return Table(
        "Seconds per query (active time the grading panel measured)",
        ("judge", "queries timed", "median seconds per query", "much faster than the others",
         "gold exact agreement (%)"),
        [(t["judge"], f"{t['queries']:,}", _number(t["median_seconds"], 1), "yes" if t["fast"] else "",
          percent(t["gold_exact"]) if t["gold_exact"] is not None else "–") for t in timing["judges"]]
        + [(f"segment {t['segment']}", f"{t['queries']:,}", _number(t["median_seconds"], 1), "", "")
           for t in timing["segments"]],
        note=f"Median over each judge's submitted queries (gold questions included per judge; segments over the "
             f"regular queries). {TIMING_RULE} A judge is flagged when their median is below {FAST_SHARE:.0%} of the median of the "
             "other judges' medians: read it beside their gold agreement before trusting or dropping their grades.",
    )


def judged_by(report: dict) -> str:
    """How many judges the complete queries had: "3 judges", or, when some had more (sent back for
    another judgment), "3 or more judges (15 by 3, 1 by 4)"."""
    needed = report["options"]["min_judges"]
    counts = {int(n): k for n, k in (report["coverage"].get("complete_by_judges") or {}).items()}
    if set(counts) <= {needed}:
        return f"{needed} judge{'s' * (needed != 1)}"
    return f"{needed} or more judges ({', '.join(f'{k:,} by {n}' for n, k in sorted(counts.items()))})"


def header_lines(report: dict) -> list[str]:
    session, coverage = report["session"], report["coverage"]
    settings = session["settings"]
    lines = [f"Session {session['id']} {session['name']!r}: baseline {session['baseline']}, target {session['target']}; "
             f"blind side-by-side, each group's side drawn at random per query.",
             f"{coverage['queries']:,} queries: {coverage['complete']:,} judged by {judged_by(report)}, "
             f"{coverage['partial']:,} by fewer, {coverage['unjudged']:,} by none; {coverage['judgments']:,} "
             f"judgments by {coverage['judges']:,} judges.",
             f"{coverage['identical_lists']:,} of {coverage['queries']:,} queries show identical lists in both groups "
             f"(the same listings in the same order: a tie by construction), {coverage['shared_listings']:,} share at "
             "least one listing; a listing in both groups is graded once and the grade counts for both."]
    gold = report.get("gold") or {"queries": 0, "judges": []}
    if gold["queries"]:
        lines.append(f"{gold['queries']:,} gold question{'s' * (gold['queries'] != 1)} (known grades; every judge gets them, mixed in) are left out "
                     f"of the queries above and of every metric; {len(gold['judges']):,} judges have graded at least "
                     "one: see \"Agreement with gold questions\".")
    else:
        lines.append("No gold questions (qcat judge add-gold adds queries with known grades, to check each judge).")
    if settings.get("differing_top") is not None:
        skipped = sum((settings.get("identical_skipped") or {}).values())
        lines.append(f"{skipped:,} quer{'y' if skipped == 1 else 'ies'} showed the same top {settings['differing_top']} "
                     "listings in both systems and were not given to judges: each counts as a tie in Table 5.")
    if settings.get("source") == "imported":
        lines.append(f"Result lists imported from {', '.join(settings.get('results', []))} "
                     f"({settings.get('rows', 0):,} rows used, {settings.get('bad_rows', 0):,} rows skipped).")
    if settings.get("sampled") and settings.get("source") != "imported":
        lines.append("Query sets by 30/30/40% of impressions in the " + str(settings.get("period", "base")) +
                     " period of " + str(settings.get("corpus", "the corpus")) + ": " +
                     ", ".join(f"{s} {n:,} (asked {settings['requested'].get(s, n):,})" for s, n in settings["sampled"].items()) + ".")
    lines.append(f"Created {report['created']}.")
    return lines


def ndcg_plot(report: dict) -> str:
    rows = report["table5"]
    figure, (left, right) = plt.subplots(1, 2, figsize=(9, 3.2))
    x = np.arange(len(rows))
    for i, system in enumerate(SYSTEMS):
        left.bar(x + (i - 0.5) * 0.38, [100 * _nan(r[system]) for r in rows], 0.38, label=system)
    left.set_xticks(x, [r["segment"] for r in rows])
    left.set_ylabel("NDCG* (%)")
    left.legend(fontsize=8)
    left.grid(axis="y", alpha=0.3)
    delta = np.array([100 * _nan(r["delta"]) for r in rows])
    low = np.array([100 * _nan(r["low"]) for r in rows])
    high = np.array([100 * _nan(r["high"]) for r in rows])
    right.bar(x, delta, 0.6, yerr=np.vstack([np.nan_to_num(delta - low), np.nan_to_num(high - delta)]), capsize=3)
    right.axhline(0, color="grey", linewidth=0.8)
    right.set_xticks(x, [r["segment"] for r in rows])
    right.set_ylabel("δ NDCG* (points), target − baseline")
    right.grid(axis="y", alpha=0.3)
    return figure_svg(figure)


def _nan(value) -> float:
    return float("nan") if value is None else float(value)


def draw_all(report: dict) -> dict[str, tuple[str, str]]:
    return {"NDCG* by query set, and target − baseline with 95% intervals": ("ndcg_by_segment.svg", ndcg_plot(report))}


def render_markdown(report: dict, plot_files: dict[str, str]) -> str:
    return markdown_document(TITLE, header_lines(report), tables(report), plot_files)


def render_html(report: dict, plots: dict[str, tuple[str, str]]) -> str:
    return html_document(TITLE, header_lines(report), tables(report), plots)
