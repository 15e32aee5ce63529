"""QCAT_INGEST_CACHE (training/clicklogs/ingest_cache.py): a corpus's log read back from the cache
is the log ingested again, to the last example and Other leaf; an entry is keyed by everything the
result depends on, checked against its hashes, and never used when the variable is unset."""

from __future__ import annotations

import numpy as np
import pytest

from qcat.taxonomy import from_paths
from qcat.training.clicklogs.clicklog import ingest
from qcat.training.clicklogs.ingest_cache import ENVIRONMENT, cached_ingest
from qcat.training.data.corpus import LogCorpus

TAXONOMY = from_paths(["Toys > Trains", "Toys > Dolls", "Home > Beds"])
TRAINS, TOYS = TAXONOMY.id_of_path("Toys > Trains"), TAXONOMY.id_of_path("Toys")
# Every kind of row the report counts: an internal node (an Other leaf is added under Toys), an
# unknown category, an empty query, bad clicks, a duplicate row and a day's conflicting impressions.
LOG = ("query,category,date,clicks,impressions\n"
       "Wooden Train,Toys > Trains,2025-01-02,3,10\n"
       "wooden train,Toys > Trains,2025-01-02,3,10\n"
       "wooden train,Toys > Trains,2025-01-02,3,10\n"
       "toy box,Toys,2025-01-03,4,9\n"
       "toy box,Home > Beds,2025-01-03,1,12\n"
       "bunk bed,Garden > Sheds,2025-01-03,2,5\n"
       "!!!,Home > Beds,2025-01-03,2,5\n"
       "bunk bed,Home > Beds,2025-01-04,x,5\n"
       "bunk bed,Home > Beds,2025-01-04,5,8\n")


def assert_same(fresh, kept) -> None:
    for name in ("queries", "categories", "pair_query", "pair_category", "clicks", "impressions", "query_impressions"):
        a, b = getattr(fresh.table, name), getattr(kept.table, name)
        assert a.dtype == b.dtype and np.array_equal(a, b, equal_nan=a.dtype.kind == "f"), name
    assert kept.report == fresh.report and kept.report.format() == fresh.report.format()
    assert kept.taxonomy == fresh.taxonomy and kept.taxonomy.content_hash == fresh.taxonomy.content_hash


def entries(cache):
    return sorted(p.name for p in cache.iterdir() if p.is_dir()) if cache.exists() else []


def test_a_cached_log_is_the_log_ingested_again(tmp_path, monkeypatch):
    log, cache = tmp_path / "clicks.csv", tmp_path / "cache"
    log.write_text(LOG, encoding="utf-8")
    monkeypatch.setenv(ENVIRONMENT, str(cache))
    fresh = ingest(log, TAXONOMY, min_clicks=1)
    assert fresh.taxonomy.ids[len(TAXONOMY.ids):] == (f"{TOYS}/other",)  # the log exercises the Other leaves
    assert set(fresh.report.skipped) == {"unknown_category", "empty_query", "bad_clicks"}
    assert fresh.report.duplicate_rows and fresh.report.impression_conflicts and fresh.report.internal

    first = cached_ingest(log, TAXONOMY, min_clicks=1)
    assert_same(fresh, first)
    [entry] = entries(cache)
    stamp = (cache / entry / "table.npz").stat().st_mtime_ns
    assert_same(fresh, cached_ingest(log, TAXONOMY, min_clicks=1))
    assert entries(cache) == [entry] and (cache / entry / "table.npz").stat().st_mtime_ns == stamp  # read, not written

    # Another threshold, period or rule, or an edited log: an entry of its own.
    cached_ingest(log, TAXONOMY, min_clicks=3)
    cached_ingest(log, TAXONOMY, min_clicks=1, date_from="2025-01-03")
    cached_ingest(log, TAXONOMY, min_clicks=1, internal_nodes="keep")
    log.write_text(LOG + "train set,Toys > Trains,2025-01-05,2,4\n", encoding="utf-8")
    edited = cached_ingest(log, TAXONOMY, min_clicks=1)
    assert len(entries(cache)) == 5 and "train set" in edited.table.queries.tolist()


def test_an_entry_that_fails_its_hashes_is_ingested_again(tmp_path, monkeypatch):
    log, cache = tmp_path / "clicks.csv", tmp_path / "cache"
    log.write_text(LOG, encoding="utf-8")
    monkeypatch.setenv(ENVIRONMENT, str(cache))
    fresh = cached_ingest(log, TAXONOMY, min_clicks=1)
    [entry] = entries(cache)
    report = cache / entry / "report.json"
    report.write_text(report.read_text(encoding="utf-8").replace('"rows_used": 6', '"rows_used": 600'), encoding="utf-8")
    assert_same(fresh, cached_ingest(log, TAXONOMY, min_clicks=1))
    assert '"rows_used": 6,' in report.read_text(encoding="utf-8")  # written anew


@pytest.mark.parametrize("value", [None, ""])
def test_without_the_variable_nothing_is_kept(tmp_path, monkeypatch, value):
    log = tmp_path / "clicks.csv"
    log.write_text(LOG, encoding="utf-8")
    if value is None:
        monkeypatch.delenv(ENVIRONMENT, raising=False)
    else:
        monkeypatch.setenv(ENVIRONMENT, value)
    corpus = LogCorpus(log, tmp_path / "unused.tsv", min_clicks=1)
    corpus._loaded["taxonomy"] = TAXONOMY
    assert_same(ingest(log, TAXONOMY, min_clicks=1), corpus.ingest())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["clicks.csv"]


def test_a_corpus_reads_through_the_cache(tmp_path, monkeypatch):
    log, cache = tmp_path / "clicks.csv", tmp_path / "cache"
    log.write_text(LOG, encoding="utf-8")
    monkeypatch.setenv(ENVIRONMENT, str(cache))
    corpus = LogCorpus(log, tmp_path / "unused.tsv", min_clicks=1)
    corpus._loaded["taxonomy"] = TAXONOMY
    assert_same(ingest(log, TAXONOMY, min_clicks=1), corpus.ingest())
    assert len(entries(cache)) == 1


def test_two_commands_asking_at_once_ingest_the_log_once(tmp_path, monkeypatch):
    """The second waits on the entry's lock and reads what the first wrote."""
    import threading

    from qcat.training.clicklogs import ingest_cache

    log, cache = tmp_path / "clicks.csv", tmp_path / "cache"
    log.write_text(LOG, encoding="utf-8")
    monkeypatch.setenv(ENVIRONMENT, str(cache))
    ingested = []

    def counted(*args, **kwargs):
        ingested.append(args[0])
        return ingest(*args, **kwargs)

    monkeypatch.setattr(ingest_cache, "ingest", counted)
    results = [None, None]

    def ask(i):
        results[i] = cached_ingest(log, TAXONOMY, min_clicks=1)

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert ingested == [log] and len(entries(cache)) == 1
    assert_same(results[0], results[1])
