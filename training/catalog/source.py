"""The catalog as a training source: listings and their short forms as weighted training pairs.

Each usable listing (:mod:`qcat.training.catalog.ingest`) gives a (title, category) pair of weight
``title_weight`` and, for each short form of its title (:mod:`qcat.training.catalog.short_forms`, the rules
chosen), a pair of weight ``short_weight``; the same pair from several listings adds up. A
weight counts as clicks: NB counts it like clicks (so its noise threshold applies), and XReg's
relevance is a pair's share of its query's searches, where a query only the catalog names
counts :data:`CATALOG_SEARCHES` searches (a title of weight 10 is as certain as a query whose
every search clicks its category; of weight 1, a tenth of that).

Catalog pairs only ever train: they join the click log's training split (``with_log``), or
make the whole training split on their own (``cold_start``: the listings are split by a
seeded hash of their title into train / validation / test, and the validation and test
titles are the catalog's own split). A pair whose text is a query of a validation or test
set (the log's held-out split, a real-text set, or for the demo corpus any short form of a
held-out listing) is left out and counted, so no evaluation text reaches training.

The weights and rules are chosen on the validation objective (:func:`choose`), the way every
other model choice is (:mod:`qcat.training.selection.objective`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable

import numpy as np

from qcat.errors import InputError
from qcat.training.catalog.ingest import Listings
from qcat.training.catalog.short_forms import RULES, check_rules, short_forms
from qcat.training.clicklogs.clicktable import ClickTable
from qcat.training.data.dataset import MIN_SEARCHES, Dataset, merge_pairs, split_queries

CATALOG_SEARCHES = MIN_SEARCHES  # merge_pairs (qcat.training.data.dataset) counts a query new to the log so
TITLE_WEIGHTS = (1.0, 3.0, 10.0)
SHORT_WEIGHTS = (1.0, 3.0)  # after 0 (no short forms), which stage 1 tries with the title weights


@dataclass(frozen=True)
class CatalogSettings:
    title_weight: float = 3.0
    short_weight: float = 1.0
    rules: tuple[str, ...] = RULES

    def __post_init__(self) -> None:
        if not (np.isfinite(self.title_weight) and self.title_weight > 0):
            raise InputError(f"--title-weight {self.title_weight}: must be a positive number")
        if not (np.isfinite(self.short_weight) and self.short_weight >= 0):
            raise InputError(f"--short-weight {self.short_weight}: must be a non-negative number")
        object.__setattr__(self, "rules", check_rules(self.rules))

    def as_dict(self) -> dict:
        return {"title_weight": self.title_weight, "short_weight": self.short_weight if self.rules else 0.0,
                "rules": list(self.rules) if self.short_weight > 0 else []}


@dataclass
class CatalogPairs:
    """The listings a source trains on, their short forms by rule (computed once), the texts
    never to train on, and the counts of what each step left out."""

    listings: Listings
    forms: dict[str, list[list[str]]]
    exclude: frozenset[str] = frozenset()
    left_out: dict = field(default_factory=dict)

    @classmethod
    def build(cls, listings: Listings, exclude=frozenset(), left_out: dict | None = None) -> "CatalogPairs":
        return cls(listings, short_forms(listings.title, listings.brand, listings.category), frozenset(exclude),
                   dict(left_out or {}))

    def pairs(self, settings: CatalogSettings, also_exclude=frozenset()) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict]:
        """(queries, categories, weights) of ``settings`` and the counts of pairs left out."""
        queries = list(self.listings.title)
        categories = list(self.listings.category)
        weights = [settings.title_weight] * len(queries)
        if settings.short_weight > 0:
            for rule in settings.rules:
                for forms, category in zip(self.forms[rule], self.listings.category):
                    queries.extend(forms)
                    categories.extend([category] * len(forms))
                    weights.extend([settings.short_weight] * len(forms))
        queries = np.asarray(queries, dtype=object)
        excluded = self.exclude | frozenset(also_exclude)
        drop = np.fromiter((q in excluded for q in queries), dtype=bool, count=len(queries))
        counts = {"title_pairs": len(self.listings), "pairs": int(len(queries)), "pairs_left_out": int(drop.sum()),
                  "pairs_used": int((~drop).sum())}
        return (queries[~drop], np.asarray(categories, dtype=object)[~drop], np.asarray(weights, dtype=np.float64)[~drop],
                counts)


def _empty_table() -> ClickTable:
    empty = np.zeros(0)
    return ClickTable(np.zeros(0, dtype=object), np.zeros(0, dtype=object), empty.astype(np.int32),
                      empty.astype(np.int32), empty, empty, empty)


def with_log(dataset: Dataset, source: CatalogPairs, settings: CatalogSettings) -> tuple[Dataset, dict]:
    """The log's dataset with the catalog's pairs added to its training split; pairs whose text
    is one of the log's validation or test queries are left out (counted)."""
    held_out = frozenset(dataset.table.queries[dataset.split != 0].tolist())
    queries, categories, weights, counts = source.pairs(settings, held_out)
    table = merge_pairs(dataset.table, queries, categories, weights)
    position = np.searchsorted(table.queries, dataset.table.queries)
    split = np.zeros(len(table.queries), dtype=np.int8)
    split[position] = dataset.split
    return Dataset(dataset.taxonomy, table, split, dataset.seed), counts


def cold_start_split(listings: Listings, seed: int) -> np.ndarray:
    """Per listing: 0 train, 1 validation, 2 test, by a seeded hash of its title (one title, one split)."""
    return split_queries(listings.title, seed=seed)


def cold_start(listings: Listings, seed: int, exclude=frozenset(), left_out: dict | None = None
               ) -> tuple["CatalogPairs", ClickTable]:
    """The training listings' pairs (:class:`CatalogPairs`) and the catalog's own validation and
    test titles, for a dataset of the catalog alone (:func:`cold_start_dataset`)."""
    split = cold_start_split(listings, seed)
    excluded = np.fromiter((t in exclude for t in listings.title), dtype=bool, count=len(listings))
    held = listings.subset((split != 0) & ~excluded)  # a held-out text is no validation title either
    held_table = merge_pairs(_empty_table(), held.title, held.category, np.ones(len(held)))
    source = CatalogPairs.build(listings.subset(split == 0), frozenset(exclude) | frozenset(held.title.tolist()),
                                left_out)
    return source, held_table


def cold_start_dataset(source: CatalogPairs, held_table: ClickTable, taxonomy, seed: int,
                       settings: CatalogSettings) -> tuple[Dataset, dict]:
    queries, categories, weights, counts = source.pairs(settings)
    table = merge_pairs(held_table, queries, categories, weights)
    split = np.zeros(len(table.queries), dtype=np.int8)
    held = np.searchsorted(table.queries, held_table.queries)
    split[held] = split_queries(held_table.queries, seed=seed)
    return Dataset(taxonomy, table, split, seed), counts


def candidates(fixed: dict) -> tuple[list[float], list[float], tuple[str, ...]]:
    """The title weights, short weights and starting rules to try (a setting given on the
    command line is not varied)."""
    titles = [fixed["title_weight"]] if fixed.get("title_weight") is not None else list(TITLE_WEIGHTS)
    shorts = [fixed["short_weight"]] if fixed.get("short_weight") is not None else [0.0, *SHORT_WEIGHTS]
    rules = fixed["rules"] if fixed.get("rules") is not None else RULES
    return titles, shorts, rules


def choose(fit: Callable[[CatalogSettings], tuple[object, float]], fixed: dict, progress=None
           ) -> tuple[object, CatalogSettings, list[dict]]:
    """The model, settings and table of the best validation objective, in three stages: the
    title weight (without short forms), then the short weight at that title weight (every rule),
    then, unless ``--short-forms`` fixed them, each rule dropped in turn from the best setting's
    rules and kept out when the objective does not fall (ties: the first tried, then fewer rules)."""
    table: list[dict] = []

    def run(settings: CatalogSettings):
        model, score = fit(settings)
        row = settings.as_dict() | {"objective": round(score, 5)}
        table.append(row)
        if progress:
            progress(row)
        return model, score

    titles, shorts, rules = candidates(fixed)
    best = None

    def consider(settings: CatalogSettings, ties_win: bool = False) -> None:
        nonlocal best
        model, score = run(settings)
        if best is None or score > best[2] + 1e-12 or (ties_win and score >= best[2] - 1e-12):
            best = (model, settings, score)

    for title in titles:  # stage 1: the title weight, with the first short weight
        consider(CatalogSettings(title, shorts[0], rules if shorts[0] > 0 else ()))
    for short in shorts[1:]:  # stage 2: the short weight, at the best title weight
        consider(CatalogSettings(best[1].title_weight, short, rules if short > 0 else ()))
    if fixed.get("rules") is None and best[1].short_weight > 0:
        for rule in RULES:
            current = best[1]
            if rule not in current.rules or len(current.rules) == 1:
                continue
            consider(replace(current, rules=tuple(r for r in current.rules if r != rule)), ties_win=True)
    return best[0], best[1], table
