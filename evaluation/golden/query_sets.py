"""Head/torso/tail query sets of the harness (eBay §4.2.2): the golden queries joined with
the demand of the latest search log, segmented by impressions (30/30/40% of all the log's
impressions) and sampled, up to ``per_segment`` queries from each segment.

The segments are a property of the whole log's demand: a golden query is head when the
log's head holds it, however many golden queries there are. Golden queries the log never
saw have no demand: they form a fourth set, ``no demand`` (sampled the same way).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from qcat.measure.segments import SEGMENTS, segment_by_impressions
from qcat.training.data.corpus import Corpus

NO_DEMAND = "no demand"
SETS = (*SEGMENTS, NO_DEMAND)


@dataclass(frozen=True)
class Demand:
    queries: np.ndarray  # object, normalized, unique
    impressions: np.ndarray  # float64
    source: str


def log_demand(corpus: Corpus, period: str = "base") -> Demand:
    """Every query's impressions in one period of the corpus log (no click threshold)."""
    table = corpus.ingest(period, min_clicks=1).table
    return Demand(table.queries, table.query_impressions, f"{corpus.directory} ({period} period)")


@dataclass(frozen=True)
class QuerySets:
    queries: dict[str, np.ndarray]  # set (SETS) -> sampled golden queries (object)
    available: dict[str, int]  # set -> golden queries in it before sampling

    def to_json(self) -> dict:
        return {"sampled": {s: int(len(q)) for s, q in self.queries.items()}, "available": self.available}


def sample_query_sets(golden_queries: np.ndarray, demand: Demand, per_segment: int = 10_000, seed: int = 0) -> QuerySets:
    segment_of = dict(zip(demand.queries.tolist(), segment_by_impressions(demand.impressions).tolist()))
    unique = np.unique(np.asarray(golden_queries, dtype=object))
    segment = np.array([segment_of.get(q, -1) for q in unique], dtype=np.int64)
    rng = np.random.default_rng(seed)
    queries, available = {}, {}
    for s, name in enumerate(SETS):
        members = unique[segment == (s if name != NO_DEMAND else -1)]
        available[name] = int(len(members))
        if len(members) > per_segment:
            members = np.sort(rng.choice(members, size=per_segment, replace=False))
        queries[name] = members
    return QuerySets(queries, available)
