"""The click simulator (qcat.training.simulator.simulate) and the Table-1 statistics (qcat.training.clicklogs.logstats)."""

from __future__ import annotations

import json
from dataclasses import fields, replace
from datetime import date
from pathlib import Path

import numpy as np
import pytest

from qcat.text.normalize import normalize
from qcat.training.clicklogs.clicklog import ingest
from qcat.training.clicklogs.clicktable import ClickTable
from qcat.training.clicklogs.logstats import table1_stats
from qcat.training.data.listings import Catalog, load_catalog
from qcat.training.simulator.simulate import (
    SimulationConfig,
    simulate_clicklog,
    simulated_search,
    write_log,
)

ROOT = Path(__file__).resolve().parents[1]
SMALL = SimulationConfig(total_searches=1_500_000, long_queries_per_listing=3.0, cased_variants=200)


def _catalog_path() -> Path | None:
    """The demo corpus's catalog."""
    meta = ROOT / "demo" / "qcat_demo" / "corpus" / "corpus.json"
    if meta.is_file():
        path = meta.parent / json.loads(meta.read_text(encoding="utf-8")).get("catalog", "")
        if path.is_file():
            return path
    return None


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    path = _catalog_path()
    if path is None:
        pytest.skip("no real catalog available")
    return load_catalog(path)


@pytest.fixture(scope="module")
def small_catalog(catalog: Catalog) -> Catalog:
    """Every 10th listing: all four sources, a few thousand listings."""
    rows = np.arange(0, len(catalog), 10)
    return Catalog(**{f.name: getattr(catalog, f.name)[rows] for f in fields(Catalog)})


@pytest.fixture(scope="module")
def small_log(small_catalog: Catalog):
    return simulate_clicklog(small_catalog, small_catalog.taxonomy(), SMALL)


def _arrays(log) -> dict[str, np.ndarray]:
    out = {f"log.{k}": v for k, v in log.columns().items()}
    out.update({f"intent.{f.name}": getattr(log.intent, f.name) for f in fields(log.intent)})
    return out


# --------------------------------------------------------------------------- logstats


def test_table1_stats_hand_computed() -> None:
    queries = np.array(["lego", "lego star wars", "samsung", "usb cable"], dtype=object)
    table = ClickTable(
        queries=queries,
        categories=np.array(["c1", "c2", "c3"], dtype=object),
        pair_query=np.array([0, 0, 1, 2, 2, 2, 3], dtype=np.int32),
        pair_category=np.array([0, 1, 0, 2, 1, 0, 2], dtype=np.int32),
        clicks=np.array([50, 50, 10, 80, 15, 5, 4], dtype=np.float64),
        impressions=np.array([200, 200, 30, 300, 300, 300, 10], dtype=np.float64),
        query_impressions=np.array([200, 30, 300, 10], dtype=np.float64),
    )
    stats = table1_stats(table, brands=["LEGO", "Samsung", "Apple"])
    assert stats["n_queries"] == 4 and stats["n_pairs"] == 7 and stats["n_categories"] == 3
    assert stats["mean_query_length"] == pytest.approx(7 / 4)
    assert stats["p90_query_length"] == pytest.approx(np.percentile([1, 3, 1, 2], 90))
    assert stats["mean_categories_per_query"] == pytest.approx(7 / 4)
    assert stats["p90_categories_per_query"] == pytest.approx(np.percentile([2, 1, 3, 1], 90))
    # By impressions: samsung starts at 0 (head), lego at 300/540 (torso), lego star wars at
    # 500/540 and usb cable at 530/540 (tail).
    assert (stats["n_head"], stats["n_torso"], stats["n_tail"]) == (1, 1, 2)
    assert stats["head_mean_length"] == 1.0 and stats["torso_mean_length"] == 1.0
    assert stats["tail_mean_length"] == pytest.approx(2.5)
    # samsung: 80 / 15 / 5 of 100 clicks -> only two categories hold >= 10%.
    assert stats["head_share_multi_category"] == 1.0
    assert stats["brand_only_queries"] == 2 and stats["brand_only_multi_category"] == 2
    assert table1_stats(table)["brand_only_queries"] is None


# --------------------------------------------------------------------------- simulator


@pytest.mark.slow
def test_simulation_is_deterministic(small_catalog: Catalog, small_log) -> None:
    again = simulate_clicklog(small_catalog, small_catalog.taxonomy(), SMALL)
    first, second = _arrays(small_log), _arrays(again)
    for name, values in first.items():
        assert np.array_equal(values, second[name]), name
    other = simulate_clicklog(small_catalog, small_catalog.taxonomy(), replace(SMALL, seed=1))
    assert len(other) != len(small_log) or not np.array_equal(other.clicks, small_log.clicks)


@pytest.mark.slow
def test_log_rows_are_valid(small_catalog: Catalog, small_log) -> None:
    log = small_log
    taxonomy = small_catalog.taxonomy()
    assert len(log) > 10_000
    assert log.impressions.dtype == np.int64 and log.clicks.dtype == np.int64
    assert (log.clicks > 0).all() and (log.clicks <= log.impressions).all()
    assert all(c in taxonomy for c in np.unique(log.category))
    days = np.array([date.fromisoformat(d) for d in np.unique(log.date)])
    assert days.min() >= date(2025, 1, 1) and days.max() <= date(2025, 12, 31)
    assert len({(d.year, d.month) for d in days}) == 12
    # One row per (query, category, month), and one impressions figure per query-month.
    month = np.array([d[:7] for d in log.date], dtype=object)
    keys = set(zip(log.query.tolist(), log.category.tolist(), month.tolist()))
    assert len(keys) == len(log)
    per_query_month: dict[tuple[str, str], set[int]] = {}
    for q, m, n in zip(log.query.tolist(), month.tolist(), log.impressions.tolist()):
        per_query_month.setdefault((q, m), set()).add(n)
    assert all(len(v) == 1 for v in per_query_month.values())
    # Raw queries normalize to the intent table's queries; some carry casing/punctuation.
    raw = np.unique(log.query)
    normalized = {normalize(q) for q in raw.tolist()}
    assert normalized <= set(log.intent.query.tolist())
    assert any(q != normalize(q) for q in raw.tolist())
    listing_ids = set(small_catalog.listing_id.tolist())
    assert set(log.intent.intent_listing_id.tolist()) <= listing_ids
    assert set(log.intent.kind.tolist()) == {"brand", "category", "type", "brand_type", "long"}


def _off_result_share(catalog: Catalog, log, config: SimulationConfig) -> float:
    """Share of clicks on categories that none of the query's results belongs to."""
    taxonomy = catalog.taxonomy()
    listing_category = np.array([taxonomy.id_of_path(p) for p in catalog.category_path], dtype=object)
    source = dict(zip(log.intent.query.tolist(), log.intent.source_query.tolist()))
    queries = sorted(set(log.intent.source_query.tolist()))
    results = simulated_search(catalog, queries, config)
    shown = {(q, listing_category[d]) for q, row in zip(queries, results.tolist()) for d in row if d >= 0}
    normalized = {q: normalize(q) for q in np.unique(log.query).tolist()}
    off = np.array([(source[normalized[q]], c) not in shown for q, c in zip(log.query.tolist(), log.category.tolist())])
    return float(log.clicks[off].sum() / log.clicks.sum())


@pytest.mark.slow
def test_click_noise_share_is_honoured(small_catalog: Catalog) -> None:
    for noise in (0.0, 0.1):
        config = replace(SMALL, click_noise=noise, typo_rate=0.0)
        log = simulate_clicklog(small_catalog, small_catalog.taxonomy(), config)
        assert _off_result_share(small_catalog, log, config) == pytest.approx(noise, abs=0.01)


@pytest.mark.slow
def test_typo_rate_is_honoured(small_log) -> None:
    intent = small_log.intent
    tokens = sum(q.count(" ") + 1 for q in intent.query.tolist())
    assert intent.n_typos.sum() / tokens == pytest.approx(SMALL.typo_rate, rel=0.25)
    typo = intent.n_typos > 0
    for query, source in zip(intent.query[typo].tolist(), intent.source_query[typo].tolist()):
        changed = [(a, b) for a, b in zip(query.split(), source.split()) if a != b]
        assert len(changed) == 1 and query.count(" ") == source.count(" ")
        wrong, right = changed[0]
        assert _is_single_typo(wrong, right), (wrong, right)
    # Typo'd queries are separate and rarer than the queries they misspell.
    searches = dict(zip(intent.query.tolist(), intent.searches.tolist()))
    ratios = [searches[q] / max(1, searches[s]) for q, s in zip(intent.query[typo], intent.source_query[typo])]
    assert np.median(ratios) < 0.2


def _is_single_typo(wrong: str, right: str) -> bool:
    """A swap of neighbouring letters, a dropped letter or a doubled letter."""
    if len(wrong) == len(right):
        diff = [i for i, (a, b) in enumerate(zip(wrong, right)) if a != b]
        i, j = diff if len(diff) == 2 else (0, 0)
        return len(diff) == 2 and j == i + 1 and wrong[i] == right[j] and wrong[j] == right[i]
    short, long_ = sorted((wrong, right), key=len)
    return len(long_) == len(short) + 1 and any(long_[:i] + long_[i + 1:] == short for i in range(len(long_)))


@pytest.mark.slow
def test_write_log_csv_ingests_cleanly(small_catalog: Catalog, small_log, tmp_path: Path) -> None:
    path = tmp_path / "log.csv"
    write_log(small_log, path)
    result = ingest(path, small_catalog.taxonomy(), min_clicks=3)
    assert result.report.rows_read == len(small_log) and not result.report.skipped
    assert result.report.pairs_kept > 0


@pytest.mark.slow
def test_default_simulation_reproduces_the_shipped_demo_log(catalog: Catalog, tmp_path: Path) -> None:
    """`qcat data build-demo` is reproducible: the default simulation of the shipped catalog, under
    the query normalizer corpus.json records, gives the shipped log row for row (its Table 1
    statistics are checked in tests/test_demo_corpus.py). The shipped log was simulated under
    normalizer 1, before issue 53's folding split hyphenated title tokens and dropped accents, so
    today's simulator draws other queries from the same titles: then the corpus must say so, and the
    simulation must still be deterministic (two runs on a sample of the catalog, row for row)."""
    import duckdb

    from qcat.text.normalize import NORMALIZER
    from qcat.training.data.corpus import Corpus

    corpus = Corpus.open()
    simulated = corpus.holdout_split(catalog) == 0  # the real-text listings never reach the simulator
    if corpus.meta.get("normalizer", 1) != NORMALIZER:
        assert corpus.meta.get("normalizer") == 1  # recorded, not assumed
        sample = catalog.subset(simulated & (np.arange(len(simulated)) % 20 == 0))
        first, second = (simulate_clicklog(sample, catalog.taxonomy(), SMALL) for _ in range(2))
        assert len(first) > 1000
        assert all(np.array_equal(getattr(first, column), getattr(second, column))
                   for column in ("query", "category", "date", "impressions", "clicks"))
        return
    log = simulate_clicklog(catalog.subset(simulated), catalog.taxonomy(), SimulationConfig())
    path = tmp_path / "log.parquet"
    write_log(log, path)
    assert path.stat().st_size < 10_000_000
    shipped = ROOT / "demo" / "qcat_demo" / "corpus" / "clicklog.parquet"
    con = duckdb.connect()
    differing = con.execute(
        "select count(*) from ((select * from read_parquet(?) except all select * from read_parquet(?))"
        " union all (select * from read_parquet(?) except all select * from read_parquet(?)))",
        [str(path), str(shipped), str(shipped), str(path)],
    ).fetchone()[0]
    assert differing == 0
    assert con.execute("select count(*) from read_parquet(?)", [str(shipped)]).fetchone()[0] == len(log)

