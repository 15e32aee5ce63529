"""Simulated golden data for the demo corpus, derived from the simulator's ground truth.

Every demo query was generated from an *intent*: one listing and its category
(``intents.parquet``). Golden queries are sampled from the latest log's head, torso and
tail (see :mod:`qcat.evaluation.golden.query_sets`); the listings judged for a query are a
pool, as TREC pools runs: the top ``pool_depth`` BM25 results over the whole catalog, the
first ``category_depth`` listings of the intent category among the top ``candidates``,
and the intent listing itself. A simulated judge grades each pooled listing:

- Excellent (3): the intent listing, or a listing of the intent category whose title holds
  every word of the query;
- Good (2): another listing of the intent category;
- Acceptable (1): a listing of a sibling category, or of the intent listing's brand;
- Off-topic (0): anything else.

Relevance is 1 for Good and Excellent. Every row is marked ``simulated``.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import numpy as np

from qcat.errors import InputError
from qcat.evaluation.golden.golden_set import RELEVANT_GRADE, GoldenSet, ImportReport, from_rows
from qcat.evaluation.golden.inventory import build_inventory
from qcat.evaluation.golden.query_sets import Demand, sample_query_sets
from qcat.evaluation.golden.search import MiniSearch, SearchConfig
from qcat.measure.segments import SEGMENTS
from qcat.taxonomy import Taxonomy
from qcat.text.normalize import normalize, tokenize
from qcat.training.data.corpus import Corpus
from qcat.training.data.listings import Catalog

SIMULATED_JUDGE = "simulator"


@dataclass(frozen=True)
class DemoGoldenConfig:
    per_segment: int = 10_000
    pool_depth: int = 10
    category_depth: int = 5
    candidates: int = 100
    seed: int = 0


def load_intents(corpus: Corpus) -> dict[str, tuple[str, str]]:
    """Normalized query -> (intent listing id, intent category id); the most searched intent
    wins where several raw queries normalize alike."""
    if "intents" not in corpus.meta:
        raise InputError(f"corpus {corpus.directory} has no simulator intents: golden data can only be simulated "
                         "for a simulated corpus (import real judgments with --golden instead)")
    rows = duckdb.execute(
        "select query, intent_listing_id, intent_category from read_parquet(?) order by searches desc, query",
        [str(corpus.path("intents"))],
    ).fetchall()
    intents: dict[str, tuple[str, str]] = {}
    for query, listing, category in rows:
        intents.setdefault(normalize(query), (listing, category))
    intents.pop("", None)
    return intents


def generate_demo_golden(corpus: Corpus, demand: Demand, config: DemoGoldenConfig = DemoGoldenConfig(),
                         catalog: Catalog | None = None, taxonomy: Taxonomy | None = None) -> GoldenSet:
    """Simulated judgments; pass the corpus's ``catalog`` and ``taxonomy`` if already loaded."""
    intents = load_intents(corpus)
    sets = sample_query_sets(np.array(list(intents), dtype=object), demand, config.per_segment, config.seed)
    queries = [q for segment in SEGMENTS for q in sets.queries[segment].tolist()]  # the latest log's queries
    catalog = catalog if catalog is not None else corpus.catalog()
    taxonomy = taxonomy if taxonomy is not None else corpus.taxonomy()
    everything = build_inventory(catalog, taxonomy, catalog.listing_id, sample_fraction=0.0)
    search = MiniSearch(everything, SearchConfig(top_n=config.pool_depth, candidates=config.candidates))
    token_lists = [tokenize(q) for q in queries]
    candidates = search.retrieve(token_lists)
    row_of = {listing: i for i, listing in enumerate(everything.listing_id)}
    brand_of = {lid: b.strip().lower() for lid, b in zip(catalog.listing_id, catalog.brand)}
    parent_of = {c: taxonomy.parent(c) for c in set(everything.category.tolist())}
    rows = []
    for i, query in enumerate(queries):
        intent_listing, intent_category = intents[query]
        docs = candidates.docs[i][candidates.docs[i] >= 0]
        in_category = docs[everything.category[docs] == intent_category][: config.category_depth]
        pool = list(dict.fromkeys([*docs[: config.pool_depth].tolist(), *in_category.tolist(),
                                   *([row_of[intent_listing]] if intent_listing in row_of else [])]))
        words = set(token_lists[i])
        intent_brand = brand_of.get(intent_listing, "")
        for doc in pool:
            listing, category = everything.listing_id[doc], everything.category[doc]
            if listing == intent_listing or (category == intent_category and words <= set(everything.tokens[doc])):
                grade = 3
            elif category == intent_category:
                grade = 2
            elif parent_of.get(category) == parent_of.get(intent_category) or (intent_brand and brand_of[listing] == intent_brand):
                grade = 1
            else:
                grade = 0
            rows.append((query, listing, int(grade >= RELEVANT_GRADE), grade, SIMULATED_JUDGE, True))
    report = ImportReport(f"simulated from {corpus.directory}", rows_read=len(rows))
    return from_rows(rows, report)
