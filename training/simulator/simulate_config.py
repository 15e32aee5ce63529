"""The click simulator's knobs (:class:`SimulationConfig`) and its random streams.

Each step of the simulation draws from its own stream, seeded by ``config.seed`` and the
step's name, so that changing one step's draws leaves the others' unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class SimulationConfig:
    """Knobs of :func:`simulate_clicklog`; the defaults make the demo log.

    Size: ``long_queries_per_listing`` (expected long queries written from each listing) sets
    the number of distinct queries, ``total_searches`` the yearly search volume that the
    Zipf law (``zipf_exponent``, ``zipf_offset``) spreads over them.
    """

    seed: int = 0
    start_date: str = "2025-01-01"
    long_queries_per_listing: float = 7.5
    long_query_lengths: tuple[float, ...] = (0.0, 0.0, 0.06, 0.24, 0.30, 0.20, 0.12, 0.08)  # P(length = index)
    min_type_listings: int = 3  # a title-end phrase is a product type if this many listings end with it
    max_category_name_tokens: int = 3
    kind_weights: tuple[float, ...] = (1.0, 0.5, 1.0, 0.5, 0.2)  # per KINDS
    total_searches: float = 12_000_000
    zipf_exponent: float = 0.9
    zipf_offset: float = 30.0
    popularity_noise: float = 0.8  # sigma of the log-normal factor on query popularity
    listing_popularity_spread: float = 1.5  # log-ratio of the most to the least popular listing weight
    typo_rate: float = 0.02  # share of query tokens with a typo
    typo_popularity: float = 0.05  # searches of a typo'd query relative to its source
    cased_variants: int = 3000  # this many top queries are also typed in Title Case
    title_case_share: float = 0.3  # ... by this share of their searches
    results_per_page: int = 10
    search_popularity_weight: float = 1.0  # popularity prior added to BM25 (in BM25 units)
    examination_decay: float = 1.0
    # Click attractiveness: base + token match share + intent category share + intended listing.
    attractiveness: tuple[float, float, float, float] = (0.02, 0.12, 0.4, 0.25)
    max_ctr: float = 0.85  # cap on the expected clicks per search
    click_noise: float = 0.03  # share of clicks on off-intent categories
    noise_categories: int = 4  # off-intent categories a query's noise clicks go to


# Independent random streams per step, so that each step's draws do not depend on the others.
_STREAMS = ("listings", "queries", "typos", "popularity", "noise", "units", "clicks")


def random_stream(config: SimulationConfig, step: str) -> np.random.Generator:
    """The random generator of one step (one of ``_STREAMS``) of the simulation."""
    return np.random.default_rng([config.seed, _STREAMS.index(step)])
