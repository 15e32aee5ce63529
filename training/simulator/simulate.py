"""Simulate a year of e-commerce search clicks over a real catalog.

No large public query log with clicks exists, so the demo click log is simulated on top of
the real listings (see DESIGN.md and eBay §4.1). The simulation, in order: queries from
listing titles and brands, their typos and their popularity (:mod:`qcat.training.simulator.simulate_queries`),
then search and clicks (:mod:`qcat.training.simulator.simulate_clicks`), each step with its own random stream
(:mod:`qcat.training.simulator.simulate_config`). This module runs the steps and writes the log.

The log has one row per (raw query, category, month): ``date`` is a day inside the month,
``impressions`` the query's searches that month (the same on each category row of the
query-month) and ``clicks`` the clicks on the category's listings that month.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path

import duckdb
import numpy as np

from qcat.console.progress import task
from qcat.errors import InputError
from qcat.taxonomy import Taxonomy
from qcat.training.data.listings import Catalog
from qcat.training.simulator.simulate_clicks import SearchEngine, click_model, sample_clicks
from qcat.training.simulator.simulate_config import SimulationConfig, random_stream
from qcat.training.simulator.simulate_queries import (
    KINDS,
    add_typos,
    brand_query,
    generate_queries,
    intents_from_generators,
    raw_units,
    zipf_volumes,
)


@dataclass(frozen=True, eq=False)
class QueryIntents:
    """What each generated (normalized) query means; golden data for evaluation.

    ``source_query`` is the query without typos (the spell-corrected form, equal to ``query``
    when ``n_typos`` is 0); ``intent_listing_id`` the listing the query was most likely
    written from and ``intent_category`` its intended category; ``kind`` one of
    :data:`KINDS`; ``searches`` its simulated searches over the year (0: never searched).
    """

    query: np.ndarray
    source_query: np.ndarray
    intent_listing_id: np.ndarray
    intent_category: np.ndarray
    kind: np.ndarray
    n_typos: np.ndarray
    searches: np.ndarray

    def __len__(self) -> int:
        return len(self.query)


@dataclass(frozen=True, eq=False)
class SimulatedLog:
    """A simulated click log: one row per (raw query, category, month)."""

    query: np.ndarray  # object: raw query text as typed
    category: np.ndarray  # object: taxonomy id
    date: np.ndarray  # object: ISO date inside the row's month
    impressions: np.ndarray  # int64: searches of the query that month
    clicks: np.ndarray  # int64 > 0
    intent: QueryIntents = field(repr=False)

    def __len__(self) -> int:
        return len(self.query)

    def columns(self) -> dict[str, np.ndarray]:
        return {"query": self.query, "category": self.category, "date": self.date,
                "impressions": self.impressions, "clicks": self.clicks}


# --------------------------------------------------------------------------- public API


def simulate_clicklog(catalog: Catalog, taxonomy: Taxonomy,
                      config: SimulationConfig = SimulationConfig()) -> SimulatedLog:
    """Simulate a year of search clicks over ``catalog``; deterministic in ``config.seed``."""
    with task("simulating a year of searches and clicks"):
        listing_category = _listing_categories(catalog, taxonomy)
        engine = SearchEngine.build(catalog, config)

        queries = generate_queries(catalog, engine.shopper_titles, engine.title_tokens, engine.weight, config,
                                   random_stream(config, "queries"))
        intent_listing, intent_cat, shares = intents_from_generators(queries, listing_category)
        typos = add_typos(queries.texts, config.typo_rate, random_stream(config, "typos"))

        n_clean = len(queries.texts)
        texts = queries.texts + typos.texts
        source = np.concatenate([np.arange(n_clean), typos.source])
        popularity_rng = random_stream(config, "popularity")
        clean_noise = popularity_rng.lognormal(0.0, config.popularity_noise, n_clean)
        clean_volume = zipf_volumes(queries.score * clean_noise, config)
        typo_noise = popularity_rng.lognormal(0.0, 0.5, len(typos.source))
        typo_volume = clean_volume[typos.source] * config.typo_popularity * typo_noise
        volume = np.concatenate([clean_volume, typo_volume])

        results, matched, n_terms = engine.search(queries.texts, config.results_per_page)
        click_p, outcome_cat = click_model(results, matched, n_terms, listing_category, intent_listing, shares,
                                           len(taxonomy), config, random_stream(config, "noise"))

        units = raw_units(texts, volume, config, random_stream(config, "units"))
        log_rows = sample_clicks(units, source, click_p, outcome_cat, len(taxonomy), config,
                                 random_stream(config, "clicks"))
        searches = np.bincount(units.query, weights=log_rows.unit_searches, minlength=len(texts)).astype(np.int64)

        intent = QueryIntents(
            query=np.asarray(texts, dtype=object),
            source_query=np.asarray(queries.texts, dtype=object)[source],
            intent_listing_id=catalog.listing_id[intent_listing][source],
            intent_category=np.asarray(taxonomy.ids, dtype=object)[intent_cat][source],
            kind=np.asarray(KINDS, dtype=object)[queries.kind][source],
            n_typos=np.concatenate([np.zeros(n_clean, np.int64), np.ones(len(typos.texts), np.int64)]),
            searches=searches,
        )
        return SimulatedLog(
            query=units.raw[log_rows.unit],
            category=np.asarray(taxonomy.ids, dtype=object)[log_rows.category],
            date=log_rows.date,
            impressions=log_rows.impressions,
            clicks=log_rows.clicks,
            intent=intent,
        )


def simulated_search(catalog: Catalog, queries: list[str], config: SimulationConfig = SimulationConfig()) -> np.ndarray:
    """The listings (catalog row indices, -1 where fewer match) that the simulator's search
    engine shows for each (normalized, typo-free) query, best first: what
    :func:`simulate_clicklog` with the same catalog and config clicked on."""
    results, _, _ = SearchEngine.build(catalog, config).search(list(queries), config.results_per_page)
    return results


def write_log(log: SimulatedLog, path: str | Path) -> None:
    """Write the log's five columns as Parquet (zstd), or as CSV if ``path`` ends in .csv."""
    _write_arrays(log.columns(), Path(path))


def write_intents(intents: QueryIntents, path: str | Path) -> None:
    """Write the per-query intents as Parquet (zstd), or as CSV if ``path`` ends in .csv."""
    _write_arrays({f.name: getattr(intents, f.name) for f in fields(intents)}, Path(path))


def catalog_brand_queries(catalog: Catalog) -> list[str]:
    """The normalized brand names the simulator searches as brand-only queries (sorted)."""
    brands = {brand_query(b) for b in catalog.brand.tolist()}
    return sorted(b for b in brands if b)


def _listing_categories(catalog: Catalog, taxonomy: Taxonomy) -> np.ndarray:
    paths, inverse = np.unique(catalog.category_path.astype(str), return_inverse=True)
    ids = []
    for path in paths:
        node = taxonomy.id_of_path(path)
        if node is None:
            raise InputError(f"catalog category {path!r} is not in the taxonomy")
        ids.append(taxonomy.index(node))
    return np.asarray(ids, dtype=np.int64)[inverse]


LOG_SUFFIXES = (".parquet", ".csv")  # what write_log and write_intents write


def _write_arrays(arrays: dict[str, np.ndarray], path: Path) -> None:
    if path.suffix.lower() not in LOG_SUFFIXES:
        raise InputError(f"{path}: cannot tell the format from the name; use one of {', '.join(LOG_SUFFIXES)}")
    path.parent.mkdir(parents=True, exist_ok=True)
    target = str(path).replace("'", "''")
    options = "format csv, header true" if path.suffix.lower() == ".csv" else "format parquet, compression zstd"
    con = duckdb.connect()
    try:
        con.register("arrays", arrays)
        con.execute(f"copy (select * from arrays) to '{target}' ({options})")
    except duckdb.IOException as exc:  # a full disk, a permission: an OSError for the caller to name
        raise OSError(str(exc).splitlines()[0]) from None
    finally:
        con.close()
