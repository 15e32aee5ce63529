"""The click simulator's search engine and clicks.

4. **Search**: BM25 over the titles plus a small listing-popularity prior returns the top
   ``results_per_page`` listings.
5. **Clicks** (at most one per search, so clicks never exceed impressions): a result at rank
   ``r`` (0-based) is examined with probability ``1 / (1 + r) ** examination_decay`` and
   clicked with an attractiveness that grows with the share of the query's tokens in its
   title, with its category's share of the query's intent and with being the listing the
   query was written from. A further ``click_noise`` share of the clicks land on
   categories absent from the results (off-intent noise, which min_clicks mostly removes).

Searches per month are Poisson around a seasonal profile; clicks are summed into one row
per (typed query, category, month).
"""

from __future__ import annotations

import calendar
from dataclasses import dataclass
from datetime import date, timedelta

import numpy as np

from qcat.errors import InputError
from qcat.text.normalize import tokenize
from qcat.training.data.listings import Catalog
from qcat.training.simulator.search_index import SearchIndex, build_index, search
from qcat.training.simulator.simulate_config import SimulationConfig, random_stream
from qcat.training.simulator.simulate_queries import IntentShares, Units

# Seasonal demand by calendar month (e-commerce peaks before Christmas).
_SEASON = np.array([0.95, 0.9, 0.95, 0.95, 1.0, 0.95, 0.95, 1.0, 0.95, 1.05, 1.2, 1.4])


@dataclass(frozen=True)
class SearchEngine:
    """The simulated site search: shopper-typed titles, listing demand and a BM25 index."""

    shopper_titles: list[str]
    title_tokens: list[list[str]]
    weight: np.ndarray  # relative demand per listing
    index: SearchIndex

    @classmethod
    def build(cls, catalog: Catalog, config: SimulationConfig) -> SearchEngine:
        shopper_titles = catalog.title.tolist()  # qcat.text.normalize drops what shoppers never type (™, ®)
        title_tokens = [tokenize(t) for t in shopper_titles]
        weight = _listing_weights(catalog, config, random_stream(config, "listings"))
        index = build_index(title_tokens, _popularity_percentile(weight) * config.search_popularity_weight)
        return cls(shopper_titles, title_tokens, weight, index)

    def search(self, queries: list[str], k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return search(self.index, [q.split() for q in queries], k)


def _popularity_percentile(values: np.ndarray) -> np.ndarray:
    from scipy.stats import rankdata  # here, not at the top: scipy.stats takes a second to import

    return (rankdata(values, method="average") - 0.5) / len(values)


def _listing_weights(catalog: Catalog, config: SimulationConfig, rng: np.random.Generator) -> np.ndarray:
    """Relative demand per listing: the listing's popularity percentile within its source
    (random where the source has none), spread log-linearly, times log-normal noise."""
    percentile = rng.uniform(size=len(catalog))
    for source in np.unique(catalog.source.astype(str)):
        rows = np.flatnonzero((catalog.source == source) & np.isfinite(catalog.popularity))
        if len(rows) > 1:
            percentile[rows] = _popularity_percentile(catalog.popularity[rows])
    noise = rng.normal(0.0, 0.5, len(catalog))
    return np.exp(config.listing_popularity_spread * (percentile - 0.5) + noise)


def click_model(results: np.ndarray, matched: np.ndarray, n_terms: np.ndarray, listing_category: np.ndarray,
                intent_listing: np.ndarray, shares: IntentShares, n_categories: int, config: SimulationConfig,
                 rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Per clean query, the probability that a search ends in a click on each outcome.

    Outcomes are the ``k`` result slots followed by ``noise_categories`` off-intent
    categories; returns ``p`` (Q, k + n) and the outcomes' categories (Q, k + n), -1 for
    empty slots.
    """
    n_queries, k = results.shape
    present = results >= 0
    result_cat = np.where(present, listing_category[np.maximum(results, 0)], -1)
    query = np.repeat(np.arange(n_queries), k).reshape(n_queries, k)
    base, w_match, w_intent, w_exact = config.attractiveness
    match = matched / np.maximum(n_terms, 1)[:, None]
    intent = shares.lookup(query, np.maximum(result_cat, 0))
    exact = results == intent_listing[:, None]
    attractiveness = base + w_match * match + w_intent * intent + w_exact * exact
    examination = 1.0 / (1.0 + np.arange(k)) ** config.examination_decay
    p = np.where(present, examination * attractiveness, 0.0)
    total = p.sum(axis=1, keepdims=True)
    p *= np.minimum(1.0, config.max_ctr / np.maximum(total, 1e-12))

    noise_cat = _noise_categories(result_cat, listing_category, n_categories, config.noise_categories, rng)
    noise_weight = np.where(noise_cat >= 0, 1.0 / (1.0 + np.arange(config.noise_categories)), 0.0)
    noise_weight /= np.maximum(noise_weight.sum(axis=1, keepdims=True), 1e-12)
    noise_total = p.sum(axis=1, keepdims=True) * config.click_noise / (1.0 - config.click_noise)
    p_all = np.concatenate([p, noise_total * noise_weight], axis=1)
    # Keep room for "no click" so the multinomial is valid; scaling keeps the noise share.
    p_all *= np.minimum(1.0, 0.95 / np.maximum(p_all.sum(axis=1, keepdims=True), 1e-12))
    return p_all, np.concatenate([result_cat, noise_cat], axis=1)


def _noise_categories(result_cat: np.ndarray, listing_category: np.ndarray, n_categories: int, n_noise: int,
                      rng: np.random.Generator) -> np.ndarray:
    """Per query, ``n_noise`` distinct categories (by sqrt of their listing count) absent
    from its results; -1 where too few could be drawn."""
    counts = np.bincount(listing_category, minlength=n_categories).astype(np.float64)
    p = np.sqrt(counts)
    draws = rng.choice(n_categories, size=(len(result_cat), 3 * n_noise), p=p / p.sum())
    bad = (draws[:, :, None] == result_cat[:, None, :]).any(axis=2)
    # Drop repeats of an earlier draw too.
    bad |= np.triu((draws[:, :, None] == draws[:, None, :]), k=1).any(axis=1)
    slot = np.cumsum(~bad, axis=1) - 1
    out = np.full((len(result_cat), n_noise), -1, dtype=np.int64)
    rows, cols = np.nonzero(~bad & (slot < n_noise))
    out[rows, slot[rows, cols]] = draws[rows, cols]
    return out


@dataclass(frozen=True)
class Rows:
    """The log rows, with units and categories as indices (the caller turns them into texts)."""

    unit: np.ndarray
    category: np.ndarray
    date: np.ndarray
    impressions: np.ndarray
    clicks: np.ndarray
    unit_searches: np.ndarray  # yearly searches per unit


def _month_starts(start: str) -> list[date]:
    try:
        first = date.fromisoformat(start)
    except ValueError:
        raise InputError(f"simulation start_date {start!r} is not an ISO date (YYYY-MM-DD)") from None
    starts = []
    for m in range(13):
        year, month = first.year + (first.month - 1 + m) // 12, (first.month - 1 + m) % 12 + 1
        starts.append(date(year, month, min(first.day, calendar.monthrange(year, month)[1])))
    return starts


def sample_clicks(units: Units, source: np.ndarray, click_p: np.ndarray, outcome_cat: np.ndarray,
                  n_categories: int, config: SimulationConfig, rng: np.random.Generator) -> Rows:
    """Searches per unit and month (Poisson around a seasonal profile), then clicks per
    outcome (multinomial: at most one click per search), summed per category."""
    starts = _month_starts(config.start_date)
    season = _SEASON[[s.month - 1 for s in starts[:12]]]
    profile = season * rng.gamma(4.0, 0.25, size=(len(units.volume), 12))
    profile /= profile.sum(axis=1, keepdims=True)
    searches = rng.poisson(units.volume[:, None] * profile)

    unit, month = np.nonzero(searches)
    n = searches[unit, month]
    query = source[units.query[unit]]
    p = click_p[query]
    pvals = np.concatenate([p, 1.0 - p.sum(axis=1, keepdims=True)], axis=1)
    clicks = rng.multinomial(n, pvals)[:, :-1]

    row, slot = np.nonzero(clicks)
    key = row.astype(np.int64) * n_categories + outcome_cat[query[row], slot]
    key, inverse = np.unique(key, return_inverse=True)
    row_clicks = np.bincount(inverse, weights=clicks[row, slot]).astype(np.int64)
    row, category = np.divmod(key, n_categories)

    # One day per unit-month, shared by its category rows.
    first = starts[0]
    offsets = np.array([(s - first).days for s in starts])
    day = offsets[month] + (rng.uniform(size=len(month)) * (offsets[month + 1] - offsets[month])).astype(np.int64)
    iso = np.asarray([(first + timedelta(days=d)).isoformat() for d in range(offsets[-1])], dtype=object)
    return Rows(
        unit=unit[row],
        category=category,
        date=iso[day[row]],
        impressions=n[row].astype(np.int64),
        clicks=row_clicks,
        unit_searches=searches.sum(axis=1).astype(np.float64),
    )

