"""``qcat evaluate --gold FILE``: each model's top-k scored against people's grades (issue 39).

The file is a graded gold (:mod:`qcat.measure.graded_gold`, what ``qcat judge export --gold``
writes of a category session). Each model answers the file's queries as written (they are
normalized already) with :func:`~qcat.measure.judged.top_k_categories`, and the answers are scored
with :func:`~qcat.measure.judged.query_outcomes` and :func:`~qcat.measure.judged.segment_figures`
(bootstrap :data:`DRAWS` draws, seed :data:`SEED`): the calls, k and draws the judging report
makes, so both give the same figures for the same model. In the report, **strict** is the judged
exact top-1 (grade 3), **lenient** the judged acceptable one (grade 2 or 3).
"""

from __future__ import annotations

from pathlib import Path

from qcat.evaluation.report import with_interval
from qcat.measure.graded_gold import GradedGold
from qcat.measure.judged import query_outcomes, segment_figures, segment_paired, top_k_categories, top_level_of
from qcat.measure.segments import SEGMENTS
from qcat.model import Model
from qcat.taxonomy import Taxonomy

DRAWS, SEED = 1000, 0  # the judging report's bootstrap
DEFAULT_K = 5


def gold_k(gold: GradedGold, given: int | None) -> tuple[int, str]:
    """The k of the answers and of precision@k, and where it came from: ``--gold-k``, else the
    file's ``# top_k``, else :data:`DEFAULT_K`."""
    if given is not None:
        return given, "--gold-k"
    k = gold.top_k(DEFAULT_K)
    return k, ("the file's # top_k" if "top_k" in gold.meta and gold.top_k(0) == k else "the default")


def describe(gold: GradedGold, taxonomy: Taxonomy, given_k: int | None) -> tuple[GradedGold, dict]:
    """The gold checked against ``taxonomy`` (categories as node ids; an error names the file, line
    and category the taxonomy lacks) and the report's ``gold`` block."""
    gold = gold.check_against(taxonomy, "the evaluation's taxonomy")
    k, origin = gold_k(gold, given_k)
    segments = [gold.segments.get(q) for q in gold.queries]
    return gold, {
        "source": gold.source, "sha256": gold.sha256, "queries": len(gold),
        "graded": sum(len(g) for g in gold.grades.values()), "k": k, "k_from": origin,
        "session": gold.meta.get("session"), "draws": DRAWS, "seed": SEED,
        "segments": {name: sum(s == name for s in segments) for name in SEGMENTS
                     if name in segments},
    }


def score_gold(model: Model, gold: GradedGold, taxonomy: Taxonomy, k: int) -> dict:
    """One model on a checked gold: its answers and per-query outcomes (kept for the paired
    comparison, not written to the report) and its figures per segment."""
    queries = gold.queries
    answers = top_k_categories(model, queries, k)
    outcomes = query_outcomes(answers, [gold.grades[q] for q in queries], top_level_of(taxonomy), k)
    return {"outcomes": outcomes, "figures": segment_figures(outcomes, [gold.segments.get(q) for q in queries],
                                                             DRAWS, SEED)}


def compare_gold(baseline: dict, target: dict, gold: GradedGold) -> dict:
    """Wins, ties, losses and paired differences of ``target`` against ``baseline`` per segment."""
    return segment_paired(baseline["outcomes"], target["outcomes"], [gold.segments.get(q) for q in gold.queries],
                          DRAWS, SEED)


def unjudged(judged: dict) -> dict:
    """The share of queries whose top-1 nobody judged, from the ``judged`` figure (1 − it)."""
    return {"value": 1 - judged["value"], "low": 1 - judged["high"], "high": 1 - judged["low"]}


def interval(figure: dict, sign: str = "") -> str:
    """A figure as a fraction with its interval, ``0.4500 [0.3000, 0.6000]`` (``sign="+"`` for a difference)."""
    return with_interval(figure, sign, scale=1.0, digits=4)


def gold_line(name: str, figures: dict, block: dict) -> str:
    """One model's human-judged figures on all the gold's queries, in one line."""
    return (f"{name}: human-judged ({Path(block['source']).name}, {figures['queries']:,} queries, top {block['k']}): "
            f"top-1 strict {interval(figures['exact'])}, lenient {interval(figures['acceptable'])}; severe "
            f"{interval(figures['severe'])}; P@{block['k']} {interval(figures['precision'])}; top-1 unjudged "
            f"{interval(unjudged(figures['judged']))} (95% bootstrap intervals)")


def paired_line(name: str, base: str, paired: dict) -> str:
    """One model against the first on all the gold's queries, in one line."""
    return (f"{name} vs {base}: human-judged top-1 wins {paired['win']}, ties {paired['tie']}, losses "
            f"{paired['loss']}; δ strict {interval(paired['exact'], '+')}, δ lenient "
            f"{interval(paired['acceptable'], '+')}, δ severe {interval(paired['severe'], '+')}, δ precision "
            f"{interval(paired['precision'], '+')}")
