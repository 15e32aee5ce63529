"""Human-judged categories: a query classifier's top-k scored against people's grades (issue 39).

A person grades each category proposed for a query: **3 exact**, **2 acceptable**, **1 related**,
**0 wrong**. Several judges' grades of one category become one grade, :func:`judged_grade` (their
mean rounded half up; an admin's settled grade replaces it). Per query, of the model's answers:

- **acceptable**: its top-1 is graded 2 or more;
- **exact**: its top-1 is graded 3;
- **severe**: its top-1 is graded 0 and sits under another top-level node of the taxonomy than
  every category graded 2 or more for the query (know-what-an-error-is's severe, with people's
  acceptable categories as the truth). A query for which nobody graded any category 2 or more is
  not severe: with no acceptable category known there is no department to miss (as a query
  without a true category is left out of click-based severe); it is still not acceptable;
- **precision@k**: the share of its top k graded 2 or more (a category nobody graded counts as not
  acceptable; fewer than k answers count the missing ones as not acceptable);
- **judged**: its top-1 has a grade at all (a later model may answer a category nobody judged: it
  counts as neither acceptable nor severe, and the share of such queries is reported).

Answers nobody graded are counted (top-1 and in the top k), and each figure carries its bounds with
them counted wrong and counted right (issue 45); precision@k carries the cap the grades put on it
(queries with fewer than k categories graded 2 or more). Wins, ties and losses leave out queries
whose two top-1s differ and one was never graded: those are counted as ``ungraded``.

Each figure is a mean over queries with a percentile bootstrap interval (queries resampled with
replacement, :func:`bootstrap_interval`, which depends on the per-query values and not on their
order, so a file and a store that list the queries differently give the same interval); two
models are compared per query on their top-1 grades (wins, ties, losses) and by the paired
difference of each figure, whose interval resamples the per-query differences. The judging
report and ``qcat evaluate --gold`` both call :func:`query_outcomes` and :func:`figures` (per
segment: :func:`segment_figures` and :func:`segment_paired`, with :func:`top_level_of` the
taxonomy's departments), so they give the same numbers for the same answers.

A model's *node answer* at a precision (issue 52: the deepest node its calibration places the
query beneath) is scored the same way on both sides: :func:`node_outcomes` and
:func:`segment_node_figures` give people's acceptable and exact rates of the graded node answers,
the share of queries with no node, and the nodes nobody graded, counted apart.
"""

from __future__ import annotations

import math
from typing import Callable, Mapping, Sequence

import numpy as np

from qcat.measure.segments import SEGMENTS
from qcat.models.model import Model
from qcat.taxonomy import Taxonomy

EXACT, ACCEPTABLE, RELATED, WRONG = 3, 2, 1, 0
GRADE_NAMES = ("Wrong", "Related", "Acceptable", "Exact")
FIGURES = ("acceptable", "exact", "severe", "precision", "judged")
# Each figure with the answers nobody graded counted the other way (query_outcomes).
BOUNDS = ("acceptable_right", "exact_right", "precision_right", "severe_wrong")
COUNTS = ("ungraded_top1", "ungraded_topk", "answered_topk", "precision_cap")
LEVEL = 0.95
ALL = "all"  # the segment of every query


def judged_grade(grades: Sequence[int], settled: int | None = None) -> int:
    """One grade from several judges': an admin's ``settled`` grade, else the mean rounded half up."""
    if settled is not None:
        return int(settled)
    if not grades:
        raise ValueError("a category needs at least one grade")
    return int(math.floor(sum(grades) / len(grades) + 0.5))


def top_k_categories(model: Model, queries: Sequence[str], k: int, batch: int = 4096) -> list[list[str]]:
    """The model's top ``k`` category ids for each query, best first (fewer where it answers fewer).
    The judging session and ``qcat evaluate --gold`` both take a model's answers from here."""
    out: list[list[str]] = []
    labels = model.labels
    for start in range(0, len(queries), batch):
        predictions = model.predict(list(queries[start:start + batch]), k)
        out += [[labels[i] for i in row if i >= 0] for row in np.asarray(predictions.labels)]
    return out


def top_level_of(taxonomy: Taxonomy) -> Callable[[str], str | None]:
    """The ``top_level`` of :func:`query_outcomes` over ``taxonomy``: a category's top-level node
    (the first element of its path; None for an id the taxonomy lacks)."""
    def top_level(category: str) -> str | None:
        return taxonomy.paths[taxonomy.index(category)][0] if category in taxonomy else None

    return top_level


def query_outcomes(answers: Sequence[Sequence[str]], graded: Sequence[Mapping[str, int]],
                   top_level: Callable[[str], str | None], k: int) -> dict[str, np.ndarray]:
    """Per query, from the model's ranked ``answers`` and the query's ``graded`` categories
    (category -> grade): ``acceptable``, ``exact``, ``severe``, ``judged`` (0/1) and
    ``precision`` (precision@``k``), and ``top1_grade`` (NaN: no answer, or not graded) and
    ``top1`` (the top category, None for no answer).

    An answer nobody graded counts as not acceptable and not severe; what it could change is kept
    beside: ``acceptable_right``, ``exact_right`` and ``precision_right`` count every ungraded answer
    as right (exact), ``severe_wrong`` counts an ungraded top-1 as wrong (severe when it sits under
    another top-level node than every category graded 2 or more). ``ungraded_top1`` (0/1) and
    ``ungraded_topk`` (a count) are the answers nobody graded, ``answered_topk`` the answers in the
    top k, and ``precision_cap`` the best precision@k the graded categories allow,
    min(k, categories graded 2 or more) / k."""
    if len(answers) != len(graded):
        raise ValueError(f"{len(answers)} answer lists for {len(graded)} graded queries")
    n = len(answers)
    out = {name: np.zeros(n) for name in FIGURES + BOUNDS + COUNTS}
    out["top1_grade"] = np.full(n, np.nan)
    out["top1"] = np.full(n, None, dtype=object)
    for i, (ranked, grades) in enumerate(zip(answers, graded)):
        top_k = list(ranked)[:k]
        ungraded = sum(c not in grades for c in top_k)
        good = sum(grades.get(c, WRONG) >= ACCEPTABLE for c in top_k)
        out["precision"][i] = good / k
        out["precision_right"][i] = (good + ungraded) / k
        out["ungraded_topk"][i] = ungraded
        out["answered_topk"][i] = len(top_k)
        out["precision_cap"][i] = min(k, sum(g >= ACCEPTABLE for g in grades.values())) / k
        if not ranked:
            continue
        top = ranked[0]
        out["top1"][i] = top
        good_tops = {top_level(c) for c, g in grades.items() if g >= ACCEPTABLE}
        other_department = bool(good_tops) and top_level(top) not in good_tops
        if top not in grades:
            out["ungraded_top1"][i] = 1.0
            out["acceptable_right"][i] = out["exact_right"][i] = 1.0
            out["severe_wrong"][i] = other_department
            continue
        grade = grades[top]
        out["judged"][i] = 1.0
        out["top1_grade"][i] = grade
        out["acceptable"][i] = out["acceptable_right"][i] = grade >= ACCEPTABLE
        out["exact"][i] = out["exact_right"][i] = grade == EXACT
        out["severe"][i] = out["severe_wrong"][i] = grade == WRONG and other_department
    return out


def bootstrap_interval(values: np.ndarray, draws: int = 1000, seed: int = 0, level: float = LEVEL,
                       chunk: int = 200) -> tuple[float, float]:
    """The percentile bootstrap interval of the mean of ``values`` (NaN, NaN for no values or no draws)."""
    values = np.sort(np.asarray(values, dtype=np.float64))  # the interval does not depend on the queries' order
    n = len(values)
    if n == 0 or draws <= 0:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    means = np.concatenate([values[rng.integers(0, n, size=(min(chunk, draws - start), n))].mean(axis=1)
                            for start in range(0, draws, chunk)])
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(low), float(high)


def figures(outcomes: Mapping[str, np.ndarray], draws: int = 1000, seed: int = 0) -> dict[str, dict]:
    """Each figure's mean over queries and its bootstrap interval: ``{figure: {value, low, high}}``,
    and ``queries``. Acceptable, exact, severe and precision also carry ``as_wrong`` and
    ``as_right``: the figure with every answer nobody graded counted wrong, and counted right (one of
    the two is the figure itself); precision carries ``cap`` (the mean of
    :func:`query_outcomes`' ``precision_cap``) and ``capped`` (queries with fewer categories graded
    2 or more than k). ``ungraded`` counts the answers nobody graded: ``top1`` of ``answers_top1``
    top-1 answers, ``topk`` of ``answers_topk`` answers in the top k."""
    out: dict[str, dict] = {}
    n = len(outcomes["acceptable"])

    def mean(name: str) -> float:
        return float(np.mean(outcomes[name])) if n else float("nan")

    for name in FIGURES:
        values = np.asarray(outcomes[name], dtype=np.float64)
        low, high = bootstrap_interval(values, draws, seed)
        out[name] = {"value": mean(name), "low": low, "high": high}
    for name in ("acceptable", "exact", "precision"):
        out[name] |= {"as_wrong": mean(name), "as_right": mean(name + "_right")}
    out["severe"] |= {"as_wrong": mean("severe_wrong"), "as_right": mean("severe")}
    out["precision"] |= {"cap": mean("precision_cap"),
                         "capped": int((np.asarray(outcomes["precision_cap"]) < 1).sum())}
    out["ungraded"] = {"top1": int(np.sum(outcomes["ungraded_top1"])),
                       "answers_top1": int(sum(top is not None for top in outcomes["top1"])),
                       "topk": int(np.sum(outcomes["ungraded_topk"])),
                       "answers_topk": int(np.sum(outcomes["answered_topk"]))}
    out["queries"] = int(n)
    return out


def paired(baseline: Mapping[str, np.ndarray], target: Mapping[str, np.ndarray], draws: int = 1000,
           seed: int = 0) -> dict:
    """Two models on the same queries: ``win``/``tie``/``loss`` of the target by its top-1 grade,
    and each figure's paired difference (target - baseline) with its bootstrap interval. The same
    top-1 (or no answer from either) is a tie; a missing top-1 ranks below grade 0; a query where
    the two top-1s differ and one of them was never graded is no evidence either way: it is counted
    as ``ungraded``, not as a win, tie or loss."""
    b_top, t_top = np.asarray(baseline["top1"], dtype=object), np.asarray(target["top1"], dtype=object)
    b = np.nan_to_num(np.asarray(baseline["top1_grade"], dtype=np.float64), nan=-1.0)
    t = np.nan_to_num(np.asarray(target["top1_grade"], dtype=np.float64), nan=-1.0)
    same = np.array([x == y for x, y in zip(b_top, t_top)], dtype=bool)
    unknown = ~same & ((np.asarray(baseline["ungraded_top1"]) > 0) | (np.asarray(target["ungraded_top1"]) > 0))
    known = ~same & ~unknown
    out: dict = {"win": int((known & (t > b)).sum()), "tie": int((same | known & (t == b)).sum()),
                 "loss": int((known & (t < b)).sum()), "ungraded": int(unknown.sum())}
    for name in FIGURES:
        diff = np.asarray(target[name], dtype=np.float64) - np.asarray(baseline[name], dtype=np.float64)
        low, high = bootstrap_interval(diff, draws, seed)
        out[name] = {"value": float(diff.mean()) if len(diff) else float("nan"), "low": low, "high": high}
    return out


def subset(outcomes: Mapping[str, np.ndarray], mask: np.ndarray) -> dict[str, np.ndarray]:
    """The per-query ``outcomes`` of the queries where ``mask`` is true."""
    return {name: np.asarray(values)[mask] for name, values in outcomes.items()}


def segment_masks(segments: Sequence[str | None]) -> dict[str, np.ndarray]:
    """``all`` and each segment that some query is in (head, torso, tail first, in that order; a
    query without one is only in ``all``): which queries it holds."""
    labels = np.array([segment or "" for segment in segments], dtype=object)
    named = [s for s in SEGMENTS if (labels == s).any()]
    named += sorted(set(labels) - set(named) - {""})
    return {ALL: np.ones(len(labels), dtype=bool)} | {s: labels == s for s in named}


def segment_figures(outcomes: Mapping[str, np.ndarray], segments: Sequence[str | None], draws: int = 1000,
                    seed: int = 0) -> dict[str, dict]:
    """:func:`figures` for all queries and per segment (``segments``: each query's, or None)."""
    return {name: figures(subset(outcomes, mask), draws, seed) for name, mask in segment_masks(segments).items()}


def segment_paired(baseline: Mapping[str, np.ndarray], target: Mapping[str, np.ndarray],
                   segments: Sequence[str | None], draws: int = 1000, seed: int = 0) -> dict[str, dict]:
    """:func:`paired` for all queries and per segment."""
    return {name: paired(subset(baseline, mask), subset(target, mask), draws, seed)
            for name, mask in segment_masks(segments).items()}


# Node answers (issue 52): the deepest taxonomy node a model says a query's category lies beneath at
# a stated precision (qcat.models.calibration.nodes), graded by people like any category: a broader
# node that fits is acceptable. The category report and `qcat evaluate --gold` both score them here.
MIX_NAMES = ("departments", "aisles", "deeper nodes", "leaves")
NODE_FIGURES = ("acceptable", "exact")


def mix_name(depth: int, leaf: bool) -> str:
    """What a node answer is, for counting: a leaf, else a department (depth 1), an aisle (2) or a deeper node."""
    return "leaves" if leaf else MIX_NAMES[min(max(depth, 1), 3) - 1]


def node_outcomes(nodes: Sequence[tuple[str, int, bool] | None],
                  graded: Sequence[Mapping[str, int]]) -> dict[str, np.ndarray]:
    """Per query, from a model's node answer (``(node id, depth, leaf)``, None for none) and the
    query's graded nodes (leaves and inner nodes, node id -> grade): ``answered``, ``graded`` (its
    node has a grade), ``acceptable`` (graded 2 or more) and ``exact`` (3), 0/1 each, and ``mix``
    (:func:`mix_name`, "" for no node). A node nobody graded is not guessed: it is answered, not graded."""
    if len(nodes) != len(graded):
        raise ValueError(f"{len(nodes)} node answers for {len(graded)} graded queries")
    n = len(nodes)
    out = {name: np.zeros(n) for name in ("answered", "graded") + NODE_FIGURES}
    out["mix"] = np.full(n, "", dtype=object)
    for i, (node, grades) in enumerate(zip(nodes, graded)):
        if node is None:
            continue
        node_id, depth, leaf = node
        out["answered"][i] = 1.0
        out["mix"][i] = mix_name(depth, leaf)
        if node_id in grades:
            out["graded"][i] = 1.0
            out["acceptable"][i] = grades[node_id] >= ACCEPTABLE
            out["exact"][i] = grades[node_id] == EXACT
    return out


def node_figures(outcomes: Mapping[str, np.ndarray], draws: int = 1000, seed: int = 0) -> dict[str, dict]:
    """``no_node``: the share of queries without a node answer, its interval over all queries;
    ``acceptable`` and ``exact``: the share of the graded node answers graded 2 or more (3), their
    intervals over the queries whose node was graded (:func:`bootstrap_interval`, as every figure),
    with ``as_wrong`` and ``as_right``: over every node answer, those nobody graded counted wrong
    and right; the counts ``queries``, ``answered``, ``graded``, ``ungraded`` and ``mix`` (per
    :data:`MIX_NAMES`)."""
    answered = np.asarray(outcomes["answered"], dtype=np.float64)
    graded = np.asarray(outcomes["graded"], dtype=bool)
    n, n_answered, n_graded = len(answered), int(answered.sum()), int(graded.sum())
    low, high = bootstrap_interval(1 - answered, draws, seed)
    out: dict = {"no_node": {"value": float(np.mean(1 - answered)) if n else float("nan"), "low": low, "high": high}}
    for name in NODE_FIGURES:
        values = np.asarray(outcomes[name], dtype=np.float64)
        hits = float(values[graded].sum())
        low, high = bootstrap_interval(values[graded], draws, seed)
        out[name] = {"value": hits / n_graded if n_graded else float("nan"), "low": low, "high": high,
                     "as_wrong": hits / n_answered if n_answered else float("nan"),
                     "as_right": (hits + n_answered - n_graded) / n_answered if n_answered else float("nan")}
    mix = list(outcomes["mix"])
    out |= {"queries": n, "answered": n_answered, "graded": n_graded, "ungraded": n_answered - n_graded,
            "mix": {name: int(sum(m == name for m in mix)) for name in MIX_NAMES}}
    return out


def segment_node_figures(outcomes: Mapping[str, np.ndarray], segments: Sequence[str | None], draws: int = 1000,
                         seed: int = 0) -> dict[str, dict]:
    """:func:`node_figures` for all queries and per segment."""
    return {name: node_figures(subset(outcomes, mask), draws, seed) for name, mask in segment_masks(segments).items()}
