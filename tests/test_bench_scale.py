"""benchmarks/bench_scale.py at a tiny size, so the scale benchmark cannot rot: its generator,
the cheap stages (ingestion, NB training, batch classification) through the command line, the merged results, the fits and the plot."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from qcat.taxonomy import load_taxonomy

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_scale", ROOT / "benchmarks" / "bench_scale.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def parts(bench):
    """The modules beside bench_scale.py it imports (its folder is on sys.path once it is loaded):
    the generator (scale_log) and the results (scale_report)."""
    return importlib.import_module("scale_log"), importlib.import_module("scale_report")


@pytest.mark.slow
def test_generator_writes_row_groups_over_a_large_taxonomy(parts, tmp_path):
    log_module = parts[0]
    log_module.CHUNK, log_module.ROW_GROUP = 8_000, 5_000  # several chunks and row groups at a tiny size
    info = log_module.generate_log(20_000, tmp_path / "log.parquet", tmp_path / "taxonomy.tsv", progress=lambda m: None)
    taxonomy = load_taxonomy(tmp_path / "taxonomy.tsv")
    assert len(taxonomy.leaves) >= 5_000
    log = pq.ParquetFile(tmp_path / "log.parquet")
    assert log.metadata.num_rows == 20_000 and log.num_row_groups >= 4
    table = log.read()
    assert table.column_names == ["query", "category", "clicks", "date"]
    assert set(table.column("category").to_pylist()) <= set(taxonomy.leaves)
    queries = table.column("query").to_pylist()
    assert all(1 <= len(q.split(" ")) <= 5 for q in queries)
    assert info["universe_queries"] == log_module.distinct_queries(20_000)
    # different query ids may draw the same tokens: texts are at most the ids seen
    assert 0 < len(set(queries)) <= info["distinct_query_ids"] <= info["universe_queries"]
    counts = sorted(__import__("collections").Counter(queries).values(), reverse=True)
    assert counts[0] > 20 * counts[len(counts) // 2]  # Zipfian: the head query is far above the median


@pytest.mark.slow
def test_cheap_stages_end_to_end(bench, tmp_path, capsys):
    out = tmp_path / "results.json"
    svg = tmp_path / "scale.svg"
    common = ["--data-dir", str(tmp_path), "--out", str(out), "--classify-queries", "2000"]
    assert bench.main(["--sizes", "10k,20k", "--stages", "generate,ingest", *common]) == 0
    # an unknown engine is refused before anything runs
    with pytest.raises(SystemExit):
        bench.main(["--sizes", "20k", "--stages", "ingest", "--engines", "nosuch", *common])
    assert "unknown engine(s) ['nosuch']" in capsys.readouterr().err
    # a rerun of some stages merges into the results
    assert bench.main(["--sizes", "20k", "--stages", "ingest,nb,classify", *common, "--plot", str(svg)]) == 0
    printed = capsys.readouterr().out
    runs = json.loads(out.read_text())["runs"]
    for key in ("generate@10000", "generate@20000", "ingest-duckdb@10000", "ingest-duckdb@20000", "nb@20000",
                "classify@20000"):
        assert runs[key]["rc"] == 0, (key, runs[key])
        assert runs[key]["seconds"] > 0 and runs[key]["peak_gb"] > 0.01
    assert runs["classify@20000"]["queries"] == 2000
    assert "| nb |" in printed and "memory exponent" in printed
    assert svg.read_text().lstrip().startswith("<?xml")


def test_fit_exponent(bench, parts):
    a, b = parts[1].fit_exponent([10**6, 10**7, 10**8], [2.0, 20.0, 200.0])
    assert b == pytest.approx(1.0) and a == pytest.approx(2e-6)
    assert parts[1].fit_exponent([10**6], [1.0]) is None
    assert bench.parse_size("1M") == 1_000_000 and bench.parse_size("20k") == 20_000
    assert bench.size_name(100_000_000) == "100M" and bench.size_name(20_000) == "20k"
