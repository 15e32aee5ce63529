"""Choices that know when validation cannot decide (DESIGN.md, "Taxonomies overlap").

Every grid that picks a setting compares each candidate with a stated default on the same
validation queries: the difference of their objectives and its paired standard error. A
candidate replaces the default only when it wins by more than :data:`MARGIN_SE` paired
standard errors; otherwise the default is kept and the summary says that validation could not
tell them apart. On a small log, where every setting ties, that keeps the simple default instead
of presenting a coin toss as a choice.

Outcomes are per validation set and per query (e.g. each query's PR@1, 0 or 1), and the
objective is their weighted mean over the sets (:mod:`qcat.training.selection.objective`). The
paired difference of two candidates is ``Σ_s w_s · mean(a_s − b_s)`` with variance
``Σ_s w_s² · var(a_s − b_s) / n_s`` (sets are independent samples of queries).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MARGIN_SE = 2.0

Outcomes = dict[str, np.ndarray]  # validation set -> per-query outcome


def objective_of(outcomes: Outcomes, weights: dict[str, float]) -> float:
    return float(sum(weights[name] * float(np.mean(values)) if len(values) else 0.0
                     for name, values in outcomes.items()))


def paired_difference(a: Outcomes, b: Outcomes, weights: dict[str, float]) -> tuple[float, float]:
    """``objective(a) − objective(b)`` and its paired standard error."""
    difference, variance = 0.0, 0.0
    for name, weight in weights.items():
        d = np.asarray(a[name], dtype=np.float64) - np.asarray(b[name], dtype=np.float64)
        if len(d) == 0:
            continue
        difference += weight * float(d.mean())
        if len(d) > 1:
            variance += weight ** 2 * float(d.var(ddof=1)) / len(d)
    return difference, float(np.sqrt(variance))


def clears(difference: float, se: float, margin: float = MARGIN_SE) -> bool:
    """Whether a paired difference is a gain validation can tell: above 0 and above ``margin`` SEs."""
    return difference > 0 and difference > margin * se


def told_apart_worse(difference: float, se: float, margin: float = MARGIN_SE) -> bool:
    """Whether a paired difference is a loss validation can tell: below 0 by more than ``margin`` SEs."""
    return clears(-difference, se, margin)


def in_paired_se(difference: float, se: float, margin: float = MARGIN_SE) -> str:
    """A paired difference in the words of the test :func:`clears` makes (a gain of more than
    ``margin`` SEs): ``more than 2 paired SE``, ``better by 1.4 paired SE, not more than 2``, ``worse
    by 3.4 paired SE`` or ``the same objective``. Never ``not more than 2`` for a loss of 3.4 SEs (issue
    53 item 13e)."""
    if clears(difference, se, margin):
        return f"more than {margin:g} paired SE"
    if difference == 0:
        return "the same objective"
    if se == 0:
        return "worse on every query alike"  # a gain with no spread clears any margin
    size = f"{abs(difference) / se:.1f} paired SE"
    return f"better by {size}, not more than {margin:g}" if difference > 0 else f"worse by {size}"


@dataclass(frozen=True)
class Decision:
    """The outcome of comparing candidates with a default on validation."""

    chosen: int  # index of the kept candidate
    default: int  # index of the default
    rows: list[dict]  # per candidate: name, objective, difference and paired SE against the default, wins
    decided: bool  # whether a candidate beat the default by more than margin paired SEs
    queries: int  # validation queries the comparison rests on (all sets)
    margin: float = MARGIN_SE
    fixed: bool = False  # the caller fixed the choice: the default is kept whatever validation says

    def summary(self) -> str:
        """One line: what was kept and why."""
        default = self.rows[self.default]
        others = [r for i, r in enumerate(self.rows) if i != self.default]
        if self.fixed:
            line = f"validation ({self.queries:,} queries): kept {default['name']}, fixed by flags (objective " \
                   f"{default['objective']:.4f})"
            if not others:
                return line
            best = max(others, key=lambda r: r["objective"])
            return (line + f"; the best other, {best['name']}, differs by {best['difference']:+.4f} ± "
                    f"{best['paired_se']:.4f} ({in_paired_se(best['difference'], best['paired_se'], self.margin)})")
        if self.decided:
            row = self.rows[self.chosen]
            return (f"validation ({self.queries:,} queries) chose {row['name']}: objective {row['objective']:.4f} against "
                    f"the default {default['name']}'s {default['objective']:.4f}, {row['difference']:+.4f} ± "
                    f"{row['paired_se']:.4f} (more than {self.margin:g} paired SE)")
        if not others:
            return f"validation ({self.queries:,} queries): only the default {default['name']} was tried"
        best = max(others, key=lambda r: r["objective"])
        if told_apart_worse(best["difference"], best["paired_se"], self.margin):  # so every other scores lower
            return (f"validation ({self.queries:,} queries) kept the default {default['name']} (objective "
                    f"{default['objective']:.4f}): every other scores lower; the best other, {best['name']}, differs "
                    f"by {best['difference']:+.4f} ± {best['paired_se']:.4f} "
                    f"({in_paired_se(best['difference'], best['paired_se'], self.margin)})")
        return (f"validation ({self.queries:,} queries) cannot tell these apart: kept the default {default['name']} "
                f"(objective {default['objective']:.4f}); the best other, {best['name']}, differs by "
                f"{best['difference']:+.4f} ± {best['paired_se']:.4f} (a change needs more than {self.margin:g} paired SE)")

    def to_json(self) -> dict:
        """What a manifest records (with the summary line)."""
        return {"default": self.rows[self.default]["name"], "chosen": self.rows[self.chosen]["name"],
                "decided_by_validation": self.decided, "fixed_by_flags": self.fixed, "margin_se": self.margin,
                "validation_queries": self.queries,
                "candidates": self.rows, "summary": self.summary()}

    def annotate(self, table: list[dict]) -> None:
        """Add each candidate's difference from the default, its paired SE and whether it wins to the
        rows of a selection ``table`` (one row per candidate, in order)."""
        for row, verdict in zip(table, self.rows):
            row |= {"difference": verdict["difference"], "paired_se": verdict["paired_se"], "wins": verdict["wins"]}


def decide(names: list[str], outcomes: list[Outcomes], weights: dict[str, float], default: int,
           margin: float = MARGIN_SE) -> Decision:
    """Keep ``names[default]`` unless another candidate's objective beats it by more than
    ``margin`` paired standard errors; of those that do, the one with the best objective (ties:
    the first)."""
    base = outcomes[default]
    rows, best, values = [], None, []
    for i, (name, outcome) in enumerate(zip(names, outcomes)):
        value = objective_of(outcome, weights)
        values.append(value)
        difference, se = (0.0, 0.0) if i == default else paired_difference(outcome, base, weights)
        wins = i != default and clears(difference, se, margin)
        rows.append({"name": name, "objective": round(value, 5), "difference": round(difference, 5),
                     "paired_se": round(se, 5), "wins": bool(wins)})
        if wins and (best is None or value > values[best]):  # unrounded: a tie keeps the first
            best = i
    queries = sum(len(values) for values in base.values())
    return Decision(default if best is None else best, default, rows, best is not None, queries, margin)
