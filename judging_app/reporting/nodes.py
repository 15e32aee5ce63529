"""The node answers of a category session made with ``--precision P`` (issue 52), in its report.

Per model and query set: the share of queries with no node answer, and people's acceptable rate
(graded exact or acceptable) and exact rate of the model's node answers at P, beside the
acceptable rate of its top-1 leaf, each with the report's bootstrap interval
(:func:`qcat.measure.judged.segment_node_figures`, which ``qcat evaluate --gold`` calls too). A
model's node answer is the category its list marks (:data:`qcat.judging.store.models.NODE_ANSWERS`);
its depth is its path's, a leaf unless stored as ``inner-node``. The session's leaf figures leave
the inner nodes' grades out (:func:`leaf_grades`): models answer leaves, so a department graded
acceptable raises no cap on precision@k and marks no department for severe.
"""

from __future__ import annotations

import json

from qcat.evaluation.report import Table, figure_cell, with_interval
from qcat.judging.reporting.results import SessionResults
from qcat.judging.store.models import NODE_ANSWERS
from qcat.measure.judged import MIX_NAMES, node_outcomes, segment_node_figures
from qcat.taxonomy import SEPARATOR


def inner_nodes(results: SessionResults) -> set[tuple[int, str]]:
    """The (query, node) of every inner node shown as a node answer."""
    return {(item.query_id, item.listing_id) for item in results.items if item.answer == "inner-node"}


def leaf_grades(grades: dict[int, dict[str, int]], results: SessionResults) -> dict[int, dict[str, int]]:
    """Per query, the graded categories that are leaves (the inner node answers' grades left out)."""
    inner = inner_nodes(results)
    return {q: {c: g for c, g in graded.items() if (q, c) not in inner} for q, graded in grades.items()}


def node_answers(results: SessionResults) -> dict[str, dict[int, tuple[str, int, bool]]]:
    """Per system, each query's node answer: (node id, depth, leaf)."""
    out: dict[str, dict[int, tuple[str, int, bool]]] = {}
    for item in results.items:
        if item.answer in NODE_ANSWERS:
            out.setdefault(item.system, {})[item.query_id] = (item.listing_id, len(item.category.split(SEPARATOR)),
                                                             item.answer != "inner-node")
    return out


def node_block(results: SessionResults, grades: dict[int, dict[str, int]], systems: list[str], bootstrap: int,
               seed: int) -> dict | None:
    """The report's ``nodes`` block: the precision and, per query set, each model's node figures;
    None for a session made without ``--precision``."""
    settings = json.loads(results.settings or "{}")
    recorded = settings.get("nodes")
    if not recorded:
        return None
    answers = node_answers(results)
    ids = [q.id for q in results.queries]
    segments = [q.segment for q in results.queries]
    per_model = {s: segment_node_figures(node_outcomes([answers.get(s, {}).get(q) for q in ids],
                                                       [grades.get(q, {}) for q in ids]), segments, bootstrap, seed)
                 for s in systems}
    return {"precision": recorded["precision"],
            "segments": [{"segment": name, "models": {s: per_model[s][name] for s in systems}}
                         for name in per_model[systems[0]]]}


def mix_cell(figures: dict) -> str:
    """``2 / 1 / 0 / 3``: the node answers that are departments, aisles, deeper nodes and leaves."""
    return " / ".join(f"{figures['mix'][name]:,}" for name in MIX_NAMES)


def node_table(report: dict, interval_title: str) -> Table | None:
    """Per model and query set: its node answers at the session's precision against people's grades."""
    block = report.get("nodes")
    if not block:
        return None
    session, precision = report["session"], block["precision"]
    top1 = {(s["segment"], system): cells["acceptable"] for s in report["segments"]
            for system, cells in s["models"].items()}
    rows = [(segment["segment"], session["models"][system], f"{cells['queries']:,}",
             f"{cells['answered']:,}", with_interval(cells["no_node"], digits=1),
             figure_cell(cells["acceptable"], digits=1), figure_cell(cells["exact"], digits=1), figure_cell(top1[(segment["segment"], system)], digits=1),
             mix_cell(cells), f"{cells['ungraded']:,} of {cells['answered']:,}")
            for segment in block["segments"] for system, cells in segment["models"].items()]
    return Table(
        f"Node answers at precision {precision:g} per model and query set (%, {interval_title})",
        ("QuerySet", "model", "queries", "with a node", "no node", "node acceptable", "node exact", "top-1 acceptable",
         "departments / aisles / deeper / leaves", "nodes never graded"),
        rows,
        note=(f"Each model's node answer at precision {precision:g}: the deepest taxonomy node its node calibration "
              f"says the query's category lies beneath at least {precision:g} of the time (none where no department "
              "is that sure), shown to judges among the categories, blind. Node acceptable: share of the graded node "
              "answers graded 2 or more (a broader node that fits is acceptable), to hold the claimed precision; node "
              "exact: graded 3; no node: share of queries with no node answer; top-1 acceptable: the model's top-1 "
              "leaf, as in the first table. A node nobody graded is not guessed: it is counted apart, and the figure gives "
              "its bounds with those counted wrong and right."),
    )


def node_header(report: dict) -> str | None:
    """What judges saw beside the top categories, for the report's header."""
    block = report.get("nodes")
    if not block:
        return None
    return (f"With each model's node answer at precision {block['precision']:g} among the categories shown (once "
            "where it is one of them), blind like the rest.")
