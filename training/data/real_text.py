"""Real-text query sets: text the click simulator never produced.

The demo click log is simulated from the catalog's own titles, so a model can score well on
its split by memorizing title fragments. These sets keep model choices honest:

- ``real-title``: the whole real title of a listing held out from the simulator (no query is
  generated from it, its title is in no training text), labelled with the listing's category;
- ``real-2tok``: the first two tokens of the same titles ("rocketfish mobile");
- ``real-queries``: real logged shopper queries (the Best Buy click sample) whose clicked
  category has a counterpart in the demo taxonomy, labelled with that category.

A seeded hash of the listing id holds ``fraction`` of the listings out and splits them half
into ``validation`` (used for model selection and calibration) and half into ``test``.
Every set is a :class:`ClickTable` (queries normalized and unique; a count per
(query, category): how many listings, or clicks, say so), so every metric that reads a click
table reads these sets too.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from qcat.errors import InputError, shown
from qcat.inputs import COMMENTS_NONE, Column, FileSchema, read_table
from qcat.taxonomy import Taxonomy
from qcat.text.normalize import tokenize
from qcat.training.clicklogs.clicktable import ClickTable
from qcat.training.data.dataset import split_queries
from qcat.training.data.listings import Catalog

TITLE_SETS = ("real-title", "real-2tok")
REAL_SETS = TITLE_SETS + ("real-queries",)
HOLDOUT_SPLITS = ("validation", "test")  # 1 and 2 in :func:`holdout_split`; 0 is the simulator's


def holdout_split(catalog: Catalog, fraction: float, seed: int) -> np.ndarray:
    """Per listing: 0 = given to the simulator, 1 = held out for validation, 2 = held out for test."""
    if not 0 <= fraction < 1:
        raise InputError(f"the held-out share of listings must lie in [0, 1), got {fraction}")
    return split_queries(catalog.listing_id, seed=seed, fractions=(1 - fraction, fraction / 2, fraction / 2))


def table_from_pairs(queries: list[str], categories: list[str], counts: list[float] | None = None) -> ClickTable:
    """A click table from (normalized query, category id[, count]) rows; repeated pairs add up.

    Pairs are sorted the way :class:`ClickTable` promises: by query, clicks descending, category.
    """
    counts = np.ones(len(queries)) if counts is None else np.asarray(counts, dtype=np.float64)
    query_values, pair_query = np.unique(np.asarray(queries, dtype=object), return_inverse=True)
    category_values, pair_category = np.unique(np.asarray(categories, dtype=object), return_inverse=True)
    key, inverse = np.unique(pair_query.astype(np.int64) * max(len(category_values), 1) + pair_category,
                             return_inverse=True)
    clicks = np.bincount(inverse, weights=counts)
    pair_query, pair_category = np.divmod(key, max(len(category_values), 1))
    order = np.lexsort((pair_category, -clicks, pair_query))
    pair_query, pair_category, clicks = pair_query[order], pair_category[order], clicks[order]
    return ClickTable(
        queries=query_values,
        categories=category_values,
        pair_query=pair_query.astype(np.int32),
        pair_category=pair_category.astype(np.int32),
        clicks=clicks,
        impressions=np.full(len(clicks), np.nan),
        query_impressions=np.bincount(pair_query, weights=clicks, minlength=len(query_values)),
    )


def title_set(catalog: Catalog, taxonomy: Taxonomy, split: np.ndarray, name: str, part: str) -> ClickTable:
    """``real-title`` or ``real-2tok`` of the held-out listings in ``part`` (validation or test)."""
    if name not in TITLE_SETS:
        raise InputError(f"unknown title set {name!r}; expected one of {', '.join(TITLE_SETS)}")
    rows = np.flatnonzero(split == 1 + HOLDOUT_SPLITS.index(part))
    queries, categories = [], []
    for row in rows.tolist():
        tokens = tokenize(catalog.title[row])
        if name == "real-2tok":
            tokens = tokens[:2]
        if tokens:
            queries.append(" ".join(tokens))
            categories.append(taxonomy.id_of_path(catalog.category_path[row]))
    return table_from_pairs(queries, categories)


REAL_QUERIES = FileSchema(
    kind="real queries", flag="the corpus's real_queries.csv", delimiter=",", comments=COMMENTS_NONE,
    match_queries=False,
    columns=(Column("query", "query", True, "a real query"),
             Column("category_path", "text", True, "the category it was clicked in, A > B > C"),
             Column("clicks", "number", False, "its clicks (empty: 1)", 0)))


def load_real_queries(path: str | Path, taxonomy: Taxonomy) -> ClickTable:
    """A CSV of real queries (:data:`REAL_QUERIES`) read through the input layer."""
    table = read_table(path, REAL_QUERIES)
    queries, categories, counts = [], [], []
    for row in table.rows:
        node = taxonomy.id_of_path(str(row["category_path"]))
        if node is None:
            raise InputError(f"{table.where(row.line)}: category {shown(row['category_path'])} is not in the taxonomy")
        queries.append(row.query.normalized)
        categories.append(node)
        counts.append(1.0 if row["clicks"] is None else float(row["clicks"]))
    return table_from_pairs(queries, categories, counts)


def map_bestbuy_clicks(sample: str | Path, category_map: str | Path) -> list[dict[str, str]]:
    """Real Best Buy clicks (``user, sku, category, query, ...``) whose Best Buy category the
    map (``bestbuy_id, category_path`` TSV) ties to a demo category: one row per (query, path)
    with its clicks, sorted. Clicks on unmapped categories are left out (the map says why)."""
    mapping = {}
    with open(category_map, newline="", encoding="utf-8") as handle:
        for row in csv.DictReader((line for line in handle if not line.startswith("#")), delimiter="\t"):
            mapping[row["bestbuy_id"]] = row["category_path"]
    clicks: dict[tuple[str, str], int] = {}
    with open(sample, newline="", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            path = mapping.get(row["category"])
            if path is not None:
                key = (row["query"].strip(), path)
                clicks[key] = clicks.get(key, 0) + 1
    return [{"query": q, "category_path": p, "clicks": str(n)} for (q, p), n in sorted(clicks.items())]
