"""The report of a category session (issue 39): how often each model's top category is acceptable
to people, exact, or badly wrong, per head/torso/tail segment, from the judges' grades.

A query counts once all its judges are done (``--min-judges`` lowers that), as in the search
report. Each category's grade is :func:`qcat.measure.judged.judged_grade` of its judges' grades
(their mean rounded half up; an admin's settled grade instead). Per model, over its top-k as
stored when the session was made: top-1 acceptable (grade ≥ 2), exact (3), severe (graded 0 and
under another top-level node than every category graded ≥ 2), precision@k, each with a bootstrap
interval (:func:`qcat.measure.judged.figures`); with two models, wins/ties/losses on the top-1
grade and paired differences (:func:`qcat.measure.judged.paired`). Inter-rater agreement over units
of one category of one query. ``qcat judge export --gold`` writes the same grades, so ``qcat
evaluate --gold`` recomputes the same figures from a model.

A session made with ``--precision P`` also shows each model's node answer at P; the report then
gives people's acceptable rate of those nodes beside the top-1's (:mod:`qcat.judging.reporting.nodes`).

Gold questions count in none of that: a table of their own compares each judge with the known
grades, as in the search report.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from datetime import datetime, timezone

import numpy as np

from qcat.errors import InputError
from qcat.evaluation.gold import segment_overlap
from qcat.evaluation.html import html_document
from qcat.evaluation.plots import figure_svg, plt
from qcat.evaluation.report import (
    Table,
    cap_cell,
    figure_cell,
    markdown_document,
    seen_cell,
    ungraded_cell,
    wins_cell,
    with_interval,
)
from qcat.judging.grading.gold import gold_summary
from qcat.judging.grading.selection.wording import sample_kind, sample_line
from qcat.judging.grading.timing import timing_summary
from qcat.judging.reporting.agreement import agreement
from qcat.judging.reporting.nodes import leaf_grades, node_block, node_header, node_table
from qcat.judging.reporting.report import agreement_table, gold_table, timing_table
from qcat.judging.reporting.results import SessionResults, judged_by_enough, load_results
from qcat.judging.store.connection import Store
from qcat.judging.store.models import TOP_ANSWERS
from qcat.measure.judged import (
    ALL,
    GRADE_NAMES,
    judged_grade,
    query_outcomes,
    segment_figures,
    segment_masks,
    segment_paired,
)

TITLE = "qcat category judging report"
PATH_SEPARATOR = " > "


def top_level(path: str) -> str:
    """The top-level node of a category, from its stored full path."""
    return path.split(PATH_SEPARATOR, 1)[0]


def given_grades(results: SessionResults) -> dict[tuple[int, str], list[int]]:
    """Every judge's grade of each (query, category), in the store's order."""
    given: dict[tuple[int, str], list[int]] = defaultdict(list)
    for j in results.judgments:
        given[(j.query_id, j.listing_id)].append(j.grade)
    return given


def category_grades(results: SessionResults, given: dict[tuple[int, str], list[int]] | None = None,
                    ) -> dict[int, dict[str, int]]:
    """Per query, each judged category's grade (:func:`qcat.measure.judged.judged_grade` of the
    :func:`given_grades`, passed in when the caller has them already)."""
    given = given_grades(results) if given is None else given
    out: dict[int, dict[str, int]] = defaultdict(dict)
    for (query_id, category), grades in given.items():
        out[query_id][category] = judged_grade(grades, results.settled.get((query_id, category)))
    return out


def systems_of(results: SessionResults) -> list[str]:
    return ["baseline", "target"] if results.target_model else ["baseline"]


def ranked_answers(results: SessionResults) -> dict[str, dict[int, list[str]]]:
    """Per system, each query's categories as the model ranked them (its stored top-k, without a
    node answer shown after it)."""
    ranked: dict[str, dict[int, list[tuple[int, str]]]] = defaultdict(lambda: defaultdict(list))
    for item in results.items:
        if item.answer not in TOP_ANSWERS:
            continue
        ranked[item.system][item.query_id].append((item.position, item.listing_id))
    return {system: {q: [c for _, c in sorted(items)] for q, items in by_query.items()}
            for system, by_query in ranked.items()}


def build_category_report(store: Store, key: str | int, bootstrap: int = 1000, seed: int = 0,
                          min_judges: int | None = None) -> dict:
    if bootstrap < 0:
        raise InputError(f"bootstrap draws must be non-negative, got {bootstrap}")
    everything = load_results(store, key)
    if everything.kind != "categories":
        raise InputError(f"judging session {everything.name!r} grades search results, not categories")
    selection = judged_by_enough(everything, min_judges)
    results = selection.results
    settings = json.loads(results.settings or "{}")
    k = int(settings.get("top_k", 3))
    given = given_grades(results)
    grades = category_grades(results, given)
    paths = {item.listing_id: item.category for item in results.items}
    systems = systems_of(results)
    models = {"baseline": results.baseline_model, "target": results.target_model}
    answers = ranked_answers(results)
    ids = [q.id for q in results.queries]
    segments = [q.segment for q in results.queries]
    leaves = leaf_grades(grades, results)  # a department graded acceptable is no leaf a model could answer
    outcomes = {s: query_outcomes([answers.get(s, {}).get(q, []) for q in ids], [leaves.get(q, {}) for q in ids],
                                  lambda c: top_level(paths.get(c, "")), k) for s in systems}
    per_model = {s: segment_figures(outcomes[s], segments, bootstrap, seed) for s in systems}
    seen = recorded_training_queries(settings, systems)
    for s in systems:
        for name, entry in segment_overlap([q.text for q in results.queries], segments, seen[s]).items():
            per_model[s][name]["seen_in_training"] = entry
    pairs = (segment_paired(outcomes["baseline"], outcomes["target"], segments, bootstrap, seed)
             if len(systems) == 2 else {})
    masks = segment_masks(segments)  # all, then each segment some query is in
    by_segment = [{"segment": name, "queries": int(mask.sum()), "models": {s: per_model[s][name] for s in systems},
                   **({"paired": pairs[name]} if pairs else {})} for name, mask in masks.items()]
    segment_of = {q.id: q.segment for q in results.queries}
    units = {name: [g for (q, _), g in given.items() if name in (ALL, segment_of[q])] for name in masks}
    return {
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "session": {"id": results.id, "name": results.name, "kind": "categories", "models": {s: models[s] for s in systems},
                    "judges_per_query": results.judges_per_query, "top_k": k, "settings": settings},
        "options": {"bootstrap": bootstrap, "seed": seed, "min_judges": selection.needed},
        "sample": {"kind": sample_kind(settings), "measures_precision": sample_kind(settings) == "random",
                   "line": sample_line(settings, len(systems))},
        "coverage": {"queries": len(everything.queries), "complete": len(results.queries),
                     "partial": selection.left_out,
                     "unjudged": sum(1 for q in everything.queries if q.judges == 0),
                     "judgments": len(results.judgments), "judges": len({j.judge_id for j in results.judgments}),
                     "judge_names": sorted({j.judge for j in results.judgments}),
                     "categories_graded": sum(len(g) for g in grades.values()),
                     "skips": sum(q.skipped for q in everything.queries),
                     "flagged_queries": sum(1 for q in everything.queries if q.flagged)},
        "segments": by_segment,
        "nodes": node_block(results, grades, systems, bootstrap, seed),
        "agreement": [{"segment": name, **agreement(units[name], results.judges_per_query)}
                      for name in masks],
        "grade_counts": {GRADE_NAMES[g]: n for g, n in sorted(Counter(j.grade for j in results.judgments).items())},
        "gold": gold_summary(store, results.id),
        "timing": timing_summary(store, results.id),
        "settled_categories": len(results.settled),
        "flag_notes": [{"query_id": q, "judge": judge, "note": note} for q, judge, note in everything.flag_notes],
        "per_query": [{"query_id": q.id, "query": q.text, "segment": q.segment, "judges": q.judges,
                       "grades": {c: grades.get(q.id, {}).get(c) for c in sorted(grades.get(q.id, {}))},
                       **{s: answers.get(s, {}).get(q.id, []) for s in systems}} for q in results.queries],
    }


def recorded_training_queries(settings: dict, systems: list[str]) -> dict[str, np.ndarray | None]:
    """Per system, the fingerprints of the session's queries its model saw in training, as
    ``create-session`` recorded them (None: the model records none, or the session predates the record)."""
    from qcat.training.data.provenance import fingerprints

    recorded = settings.get("seen_in_training") or []
    return {s: None if i >= len(recorded) or recorded[i]["seen"] is None else fingerprints(recorded[i]["seen_queries"])
            for i, s in enumerate(systems)}


def interval_title(options: dict) -> str:
    """What the figures' brackets are: a 95% interval of so many draws, or none (``--bootstrap 0``)."""
    return "95% bootstrap interval" if options["bootstrap"] else "no intervals: --bootstrap 0"


def tables(report: dict) -> list[Table]:
    session, options = report["session"], report["options"]
    k = session["top_k"]
    rows = []
    for segment in report["segments"]:
        for system, cells in segment["models"].items():
            rows.append((segment["segment"], session["models"][system], f"{segment['queries']:,}",
                         seen_cell(cells.get("seen_in_training")),
                         *(figure_cell(cells[name], digits=1) for name in ("acceptable", "exact", "severe", "precision")),
                         cap_cell(cells["precision"], cells["queries"], digits=1), with_interval(cells["judged"], digits=1),
                         ungraded_cell(cells["ungraded"])))
    main = Table(
        f"Human-judged top-1 per model and query set (%, {interval_title(options)})",
        ("QuerySet", "model", "queries", "seen in training", "top-1 acceptable", "top-1 exact", "severe",
         f"precision@{k}", f"precision@{k} at most", "top-1 graded", f"never graded (top-1 / top-{k} answers)"),
        rows,
        note=(f"A query counts once {options['min_judges']} judges have graded its categories. A category's grade is "
              "the judges' mean rounded half up (3 exact, 2 acceptable, 1 related, 0 wrong)"
              + (f"; {report['settled_categories']:,} settled by an admin" if report.get("settled_categories") else "")
              + ". Acceptable: top-1 graded 2 or more; exact: 3; severe: top-1 graded 0 and under another top-level "
              f"category than every category graded 2 or more; precision@{k}: share of the model's top {k} graded 2 "
              f"or more; at most: the best precision@{k} the graded categories allow (queries with fewer than {k} "
              "categories graded 2 or more are capped). Seen in training: the queries the model trained or was tuned "
              "on, as recorded when the session was made. An answer nobody graded counts as neither acceptable nor "
              "severe; where there are such answers a figure gives its bounds with them counted wrong and right. "
              + (f"Intervals: {options['bootstrap']:,} bootstrap draws over queries." if options["bootstrap"] else
                 "No intervals (--bootstrap 0).")),
    )
    out = [main]
    if (nodes := node_table(report, interval_title(options))) is not None:
        out.append(nodes)
    if any("paired" in s for s in report["segments"]):
        first, second = session["models"]["baseline"], session["models"]["target"]  # as --model gave them
        out.append(Table(
            f"{second} vs {first}, per query (points, {interval_title(options).replace('95%', '95% paired')})",
            ("QuerySet", "win / tie / loss / ungraded", "δ acceptable", "δ exact", "δ severe", f"δ precision@{k}"),
            [(s["segment"], wins_cell(s["paired"]),
              *(with_interval(s["paired"][name], "+", digits=1)
                for name in ("acceptable", "exact", "severe", "precision")))
             for s in report["segments"]],
            note=f"win/tie/loss: queries where {second}'s top-1 category is graded higher / the same / lower than "
                 f"{first}'s (the same category is a tie; a missing top-1 below 0); ungraded: the two top-1s differ "
                 f"and one was never graded (no evidence either way). δ = {second} − {first}.",
        ))
    out.append(agreement_table(report["agreement"], session["judges_per_query"], "one category of one query"))
    gold = report.get("gold") or {"queries": 0, "judges": []}
    if gold["queries"]:
        out.append(gold_table(gold, "categories"))
    out.append(timing_table(report.get("timing")))
    counts = report["grade_counts"]
    out.append(Table("Grades given", ("grade", "judgments"), [(name, f"{counts.get(name, 0):,}") for name in GRADE_NAMES]
                     + [("skips", f"{report['coverage']['skips']:,}"),
                        ("flagged queries", f"{report['coverage']['flagged_queries']:,}")], detail=True))
    if report["flag_notes"]:
        out.append(Table("Flag notes", ("query id", "judge", "note"),
                         [(str(n["query_id"]), n["judge"], n["note"]) for n in report["flag_notes"][:50]], detail=True))
    return out


def header_lines(report: dict) -> list[str]:
    session, coverage = report["session"], report["coverage"]
    settings = session["settings"]
    names = list(session["models"].values())  # each model by its path, as --model gave it
    models = " and ".join(names)
    shown = (f"the union of both models' top {session['top_k']} for each query, in an order of their own, never "
             "which model proposed which" if len(names) == 2 else
             f"the model's top {session['top_k']} for each query, in an order of their own")
    source = (f"sampled traffic {settings['traffic']}" if settings.get("traffic") else
              f"the click log {settings['log']}" if settings.get("log") else
              f"the {settings.get('period', 'base')} period of {settings.get('corpus', 'the corpus')}'s click log")
    lines = [f"Session {session['id']} {session['name']!r}: categories of {models}; judges saw {shown}.",
             f"{coverage['queries']:,} queries from {source} ("
             + ", ".join(f"{s} {n:,}" for s, n in (settings.get("sampled") or {}).items()) + f"): {coverage['complete']:,} "
             f"judged by {report['options']['min_judges']} or more judges, {coverage['partial']:,} by fewer, "
             f"{coverage['unjudged']:,} by none; {coverage['judgments']:,} grades of {coverage['categories_graded']:,} "
             f"categories by {coverage['judges']:,} judges ({', '.join(coverage['judge_names'])})."]
    if (nodes := node_header(report)) is not None:
        lines.append(nodes)
    lines.append(report["sample"]["line"])
    lines.append(training_line(report))
    if not (report.get("gold") or {}).get("queries"):
        lines.append("No gold questions (qcat judge add-gold adds queries with known grades, to check each judge).")
    lines.append(f"Created {report['created']}.")
    return lines


def training_line(report: dict) -> str:
    """Whether the session's queries could hold the models' training queries, and how many do."""
    settings = report["session"]["settings"]
    overall = next(s for s in report["segments"] if s["segment"] == ALL)["models"]
    names = report["session"]["models"]  # each model by its --model path
    seen = "; ".join(f"{names[system]}: {seen_cell(cells.get('seen_in_training'))}" for system, cells in overall.items())
    if settings.get("training_queries") == "left out":
        left = sum((settings.get("training_left_out") or {}).values())
        how = (f"Drawn outside the models' training queries ({left:,} such queries of the log left out; "
               "create-session --include-training-queries keeps them)")
    elif settings.get("training_queries") == "included":
        how = ("Sampled traffic, taken as given" if settings.get("traffic") else
               "Drawn with the models' training queries (--include-training-queries)")
    else:
        how = "A session made before qcat recorded training queries"
    return f"{how}. Judged queries seen in training (of those counted): {seen}."


def figure_plot(report: dict) -> str:
    """Top-1 acceptable, exact and severe per model and query set, with their intervals."""
    segments = report["segments"]
    systems = list(report["session"]["models"])
    figure, axes = plt.subplots(1, 3, figsize=(10, 3.2))
    x = np.arange(len(segments))
    width = 0.8 / len(systems)
    for axis, name in zip(axes, ("acceptable", "exact", "severe")):
        for i, system in enumerate(systems):
            cells = [s["models"][system][name] for s in segments]
            value = np.array([100 * _nan(c["value"]) for c in cells])
            low = np.array([100 * _nan(c["low"]) for c in cells])
            high = np.array([100 * _nan(c["high"]) for c in cells])
            # no bars without draws; a percentile interval need not hold its mean: never a negative bar
            bars = (np.vstack([np.maximum(np.nan_to_num(value - low), 0), np.maximum(np.nan_to_num(high - value), 0)])
                    if report["options"]["bootstrap"] else None)
            axis.bar(x + (i - (len(systems) - 1) / 2) * width, value, width, label=report["session"]["models"][system],
                     yerr=bars, capsize=3)
        axis.set_xticks(x, [s["segment"] for s in segments])
        axis.set_title(f"top-1 {name} (%)", fontsize=10)
        axis.grid(axis="y", alpha=0.3)
    axes[0].legend(fontsize=8)
    return figure_svg(figure)


def _nan(value) -> float:
    return float("nan") if value is None else float(value)


def draw_all(report: dict) -> dict[str, tuple[str, str]]:
    title = "Top-1 acceptable, exact and severe by query set" + (
        ", with 95% intervals" if report["options"]["bootstrap"] else " (no intervals: --bootstrap 0)")
    return {title: ("top1_by_segment.svg", figure_plot(report))}


def render_markdown(report: dict, plot_files: dict[str, str]) -> str:
    return markdown_document(TITLE, header_lines(report), tables(report), plot_files)


def render_html(report: dict, plots: dict[str, tuple[str, str]]) -> str:
    return html_document(TITLE, header_lines(report), tables(report), plots)
