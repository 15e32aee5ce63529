"""``qcat evaluate --gold FILE``: each model's top-k scored against people's grades (issue 39).

The file is a graded gold (:mod:`qcat.measure.graded_gold`, what ``qcat judge export --gold``
writes of a category session). Each model answers the file's queries as written (they are
normalized already) with :func:`~qcat.measure.judged.top_k_categories`, and the answers are scored
with :func:`~qcat.measure.judged.query_outcomes` and :func:`~qcat.measure.judged.segment_figures`
(bootstrap :data:`DRAWS` draws, seed :data:`SEED`): the calls, k and draws the judging report
makes, so both give the same figures for the same model. In the report, **strict** is the judged
exact top-1 (grade 3), **lenient** the judged acceptable one (grade 2 or 3).

A model with a node calibration also has its node answers at a precision P scored
(:func:`score_gold_nodes`, issue 52): P is ``--precision``, else the file's ``# precision`` (the P
its session showed judges, ``create-session --precision``); people's acceptable rate of the nodes
graded, the share of queries with no node, and the nodes nobody graded counted apart, never guessed.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from qcat.evaluation.report import bounds, unjudged, with_interval
from qcat.measure.graded_gold import GradedGold
from qcat.measure.judged import (
    figures,
    paired,
    query_outcomes,
    segment_figures,
    segment_masks,
    segment_paired,
    subset,
    top_k_categories,
    top_level_of,
)
from qcat.measure.segments import SEGMENTS
from qcat.models.model import Model
from qcat.taxonomy import Taxonomy
from qcat.training.data.provenance import format_overlap, overlap

DRAWS, SEED = 1000, 0  # the judging report's bootstrap
DEFAULT_K = 5


def gold_k(gold: GradedGold, given: int | None) -> tuple[int, str]:
    """The k of the answers and of precision@k, and where it came from: ``--gold-k``, else the
    file's ``# top_k``, else :data:`DEFAULT_K`."""
    if given is not None:
        return given, "--gold-k"
    k = gold.top_k(DEFAULT_K)
    return k, ("the file's # top_k" if "top_k" in gold.meta and gold.top_k(0) == k else "the default")


def sample_warning(gold: GradedGold) -> str | None:
    """A warning for a graded gold file whose session chose its queries (``# sample: uncertain`` or
    ``disagree``, ``qcat judge create-session --select``): its figures are not the models' precision."""
    kind = gold.meta.get("sample")
    if kind in (None, "random"):
        return None
    return (f"warning: {gold.flag} {gold.source} is not a random sample (# sample: {kind}, create-session --select "
            f"{kind}): its queries were chosen where the models are unsure or disagree, so its human-judged figures are "
            "not the models' precision (only a random sample, --select random, measures that)")


def describe(gold: GradedGold, taxonomy: Taxonomy, given_k: int | None) -> tuple[GradedGold, dict]:
    """The gold checked against ``taxonomy`` (categories as node ids; an error names the file, line
    and category the taxonomy lacks) and the report's ``gold`` block."""
    gold = gold.check_against(taxonomy, "the evaluation's taxonomy")
    k, origin = gold_k(gold, given_k)
    segments = [gold.segments.get(q) for q in gold.queries]
    return gold, {
        "source": gold.source, "sha256": gold.sha256, "queries": len(gold),
        "graded": sum(len(g) for g in gold.grades.values()), "k": k, "k_from": origin,
        "session": gold.meta.get("session"), "sample": gold.meta.get("sample"), "draws": DRAWS, "seed": SEED,
        "seen_in_training": {},
        "segments": {name: sum(s == name for s in segments) for name in SEGMENTS
                     if name in segments},
    }


def score_gold(model: Model, gold: GradedGold, taxonomy: Taxonomy, k: int, seen: np.ndarray | None) -> dict:
    """One model on a checked gold: its answers and per-query outcomes (kept for the paired
    comparison, not written to the report) and its figures per segment, each with how many of the
    segment's queries the model saw in training (``seen``: its bundle's fingerprints, None when it
    records none)."""
    queries = gold.queries
    segments = [gold.segments.get(q) for q in queries]
    answers = top_k_categories(model, queries, k)
    outcomes = query_outcomes(answers, [gold.grades[q] for q in queries], top_level_of(taxonomy), k)
    per_segment = segment_figures(outcomes, segments, DRAWS, SEED)
    for name, entry in segment_overlap(queries, segments, seen).items():
        per_segment[name]["seen_in_training"] = entry
    return {"outcomes": outcomes, "figures": per_segment}


def segment_overlap(queries, segments, seen: np.ndarray | None) -> dict[str, dict]:
    """:func:`qcat.training.data.provenance.overlap` of the queries of all and of each segment
    (:func:`qcat.measure.judged.segment_masks`): how many a model saw in training. ``qcat evaluate
    --gold`` and the category session's report both count with it."""
    queries = np.asarray(list(queries), dtype=object)
    return {name: overlap(queries[mask], seen) for name, mask in segment_masks(segments).items()}


def compare_gold(baseline: dict, target: dict, gold: GradedGold) -> dict:
    """Wins, ties, losses and paired differences of ``target`` against ``baseline`` per segment."""
    return segment_paired(baseline["outcomes"], target["outcomes"], [gold.segments.get(q) for q in gold.queries],
                          DRAWS, SEED)


UNSEEN = "all, on unseen queries"


def add_unseen_gold(models: list[dict], judged_of: list[dict], unseen: np.ndarray) -> None:
    """Beside ``all``, each model's figures on the gold's queries no model saw in training (``unseen``,
    a mask over them) and, after the first model, its paired differences from the first on them."""
    def after_all(block: dict, value: dict) -> dict:
        return {"all": block["all"], UNSEEN: value} | {key: v for key, v in block.items() if key != "all"}

    base = subset(judged_of[0]["outcomes"], unseen)
    for i, (entry, judged) in enumerate(zip(models, judged_of)):
        mine = subset(judged["outcomes"], unseen)
        entry["gold"] = after_all(entry["gold"], figures(mine, DRAWS, SEED) | {
            "seen_in_training": {"queries": int(unseen.sum()), "seen": 0, "share": 0.0}})
        if i:
            entry["gold_paired"] = after_all(entry["gold_paired"], paired(base, mine, DRAWS, SEED))


def interval(figure: dict, sign: str = "") -> str:
    """A figure as a fraction with its interval, ``0.4500 [0.3000, 0.6000]`` (``sign="+"`` for a difference)."""
    return with_interval(figure, sign, scale=1.0, digits=4)


def seen_text(entry: dict | None) -> str:
    """"N of M queries seen in training (x%)", or that the model records none."""
    return "seen in training unknown (not recorded)" if entry is None else format_overlap(entry)


def cap_text(precision: dict, queries: int, k: int, digits: int = 4, scale: float = 1.0) -> str:
    """`` (at most C: N of M queries have fewer than k acceptable categories)`` when P@k is capped."""
    if not precision.get("capped"):
        return ""
    return (f" (at most {scale * precision['cap']:.{digits}f}: {precision['capped']:,} of {queries:,} queries have "
            f"fewer than {k} categories graded acceptable)")


def ungraded_text(ungraded: dict, k: int) -> str:
    """How many top answers nobody graded: ``never graded: 2 of 50 top-1, 9 of 150 top-3 answers``."""
    return (f"never graded: {ungraded['top1']:,} of {ungraded['answers_top1']:,} top-1, {ungraded['topk']:,} of "
            f"{ungraded['answers_topk']:,} top-{k} answers")


def gold_line(name: str, figures: dict, block: dict) -> str:
    """One model's human-judged figures on all the gold's queries, in one line: each with its
    interval and, where answers nobody graded could move it, its bounds; how many of the queries the
    model trained on, and how many of its answers nobody graded."""
    k = block["k"]
    return (f"{name}: human-judged ({Path(block['source']).name}, {figures['queries']:,} queries, top {k}; "
            f"{seen_text(figures.get('seen_in_training'))}): "
            f"top-1 strict {interval(figures['exact'])}{bounds(figures['exact'])}, lenient "
            f"{interval(figures['acceptable'])}{bounds(figures['acceptable'])}; severe "
            f"{interval(figures['severe'])}{bounds(figures['severe'])}; P@{k} {interval(figures['precision'])}"
            f"{bounds(figures['precision'])}{cap_text(figures['precision'], figures['queries'], k)}; top-1 unjudged "
            f"{interval(unjudged(figures['judged']))}; {ungraded_text(figures['ungraded'], k)} "
            "(95% bootstrap intervals)")


def paired_line(name: str, base: str, paired: dict) -> str:
    """One model against the first on all the gold's queries, in one line."""
    return (f"{name} vs {base}: human-judged top-1 wins {paired['win']}, ties {paired['tie']}, losses "
            f"{paired['loss']}, {paired['ungraded']} with a different top-1 nobody graded (no evidence either way); "
            f"δ strict {interval(paired['exact'], '+')}, δ lenient "
            f"{interval(paired['acceptable'], '+')}, δ severe {interval(paired['severe'], '+')}, δ precision "
            f"{interval(paired['precision'], '+')}")


# Node answers (issue 52): a model's node answer at a precision P, scored against the file's grades.
def gold_precision(gold: GradedGold, given: float | None) -> tuple[float | None, str]:
    """The precision of the node answers to score, and where it came from: ``--precision``, else the
    file's ``# precision`` (the P its session showed judges), else None (no node figures)."""
    if given is not None:
        return given, "--precision"
    return gold.precision(), "the file's # precision"


def score_gold_nodes(directory: str | Path, gold: GradedGold, precision: float) -> dict | None:
    """A model's node answers at ``precision`` on the gold's queries (the bundle in ``directory``
    without its judged overrides, as a session takes them), against every node graded for them:
    leaves and, in a file of node answers, inner nodes (a path resolved against the model's
    taxonomy). Per segment, :func:`qcat.measure.judged.segment_node_figures` with the category
    report's draws; a node the file does not grade is counted as ungraded, never guessed. None for
    a model without a node calibration."""
    from qcat.classifier import Classifier
    from qcat.measure.judged import node_outcomes, segment_node_figures

    classifier = Classifier.load(directory, overrides=False)
    if classifier.nodes is None:
        return None
    taxonomy, queries = classifier.taxonomy, gold.queries
    answers = [None if p < 0 else (taxonomy.ids[p], len(taxonomy.paths[p]), taxonomy.is_leaf(taxonomy.ids[p]))
               for p in classifier.node_chains(queries).answers(precision).tolist()]
    # the file as read (every node graded), or a checked gold's leaves and, apart, its inner nodes
    graded = [{(c if c in taxonomy else taxonomy.resolve(c) or c): g for c, g in gold.grades[q].items()}
              | gold.nodes.get(q, {}) for q in queries]
    return segment_node_figures(node_outcomes(answers, graded), [gold.segments.get(q) for q in queries], DRAWS, SEED)


def node_line(name: str, figures: dict | None, top1: dict, precision: float, source: str) -> str:
    """One model's node answers on all the gold's queries, in one line, beside its top-1's lenient figure."""
    if figures is None:
        return f"{name}: no node answers at precision {precision:g} (its bundle has no node calibration)"
    mix = ", ".join(f"{n:,} {kind}" for kind, n in figures["mix"].items())
    return (f"{name}: node answers at precision {precision:g} ({Path(source).name}, {figures['queries']:,} queries): "
            f"acceptable {interval(figures['acceptable'])}{bounds(figures['acceptable'])}, exact "
            f"{interval(figures['exact'])}{bounds(figures['exact'])} of {figures['graded']:,} graded node answers; "
            f"no node {interval(figures['no_node'])}; nodes: {mix}; never graded: {figures['ungraded']:,} of "
            f"{figures['answered']:,} node answers; top-1 lenient {interval(top1)} (95% bootstrap intervals)")
