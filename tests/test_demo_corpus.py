"""The shipped demo corpus: Table 1 statistics of eBay's query log, splits, size."""

from pathlib import Path

import numpy as np
import pytest

from qcat.bundles.demo import demo_corpus_dir
from qcat.training.clicklogs.logstats import table1_stats
from qcat.training.data.corpus import Corpus
from qcat.training.simulator.simulate import catalog_brand_queries

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def corpus():
    return Corpus.open()


@pytest.fixture(scope="module")
def whole_year(corpus):
    return corpus.ingest("all")


@pytest.mark.slow
def test_shipped_log_reproduces_table1(corpus, whole_year):
    assert whole_year.report.rows_used == whole_year.report.rows_read  # nothing unusable in our own log
    stats = table1_stats(whole_year.table, brands=catalog_brand_queries(corpus.catalog()))
    assert stats["n_pairs"] >= 200_000
    assert 3.5 <= stats["mean_query_length"] <= 4.5 and stats["p90_query_length"] <= 7
    assert 1.3 <= stats["mean_categories_per_query"] <= 2.0 and stats["p90_categories_per_query"] <= 3
    assert stats["head_mean_length"] <= 2.5 and stats["tail_mean_length"] >= 3.5
    assert stats["head_share_multi_category"] >= 0.15
    assert stats["brand_only_multi_category"] >= 50


@pytest.mark.slow
def test_log_spans_one_year_in_two_half_year_periods(corpus, demo_ingested):
    base = demo_ingested["base"].report  # corpus.ingest("base"), once a session (tests/conftest.py)
    candidate = demo_ingested["candidate"].report
    assert base.rows_used > 0 and candidate.rows_used > 0
    assert base.rows_used + candidate.rows_used == base.rows_read
    assert corpus.meta["periods"]["candidate"][1] == corpus.meta["periods"]["base"][0]


@pytest.mark.slow
def test_splits_are_disjoint_by_query(demo_ingested):
    dataset = demo_ingested["dataset"]  # corpus.dataset("base"), once a session (tests/conftest.py)
    parts = [set(dataset.part(name).queries) for name in ("train", "validation", "test")]
    assert not (parts[0] & parts[1]) and not (parts[0] & parts[2]) and not (parts[1] & parts[2])
    sizes = np.array([len(p) for p in parts]) / sum(len(p) for p in parts)
    assert np.allclose(sizes, [0.8, 0.1, 0.1], atol=0.01)


def test_shipped_data_and_models_stay_under_25_mb():
    shipped = [*demo_corpus_dir().rglob("*"), *(ROOT / "demo" / "qcat_demo" / "model").rglob("*")]
    assert sum(p.stat().st_size for p in shipped if p.is_file()) < 25 * 2**20
