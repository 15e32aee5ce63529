import json

import duckdb
import numpy as np
import pytest

from qcat.errors import InputError
from qcat.taxonomy import from_paths
from qcat.training.clicklogs.clicklog import detect_format, ingest

TAXONOMY = from_paths(["Toys > Trains", "Toys > Dolls", "Home > Beds"])
TRAINS, DOLLS, BEDS = (TAXONOMY.id_of_path(p) for p in ("Toys > Trains", "Toys > Dolls", "Home > Beds"))


def write_csv(path, text: str) -> None:
    path.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)


def test_real_bestbuy_sample(data_dir, bestbuy_taxonomy):
    result = ingest(data_dir / "bestbuy_clicks_sample.csv", bestbuy_taxonomy, min_clicks=1)
    report = result.report
    assert report.rows_read == 927
    # 2011 clicks name categories the 2016 taxonomy no longer has.
    assert dict(report.skipped) == {"unknown_category": 129}
    assert report.rows_used == 798
    table = result.table
    assert table.clicks.sum() == 798  # no clicks column: one click per row
    assert report.pairs_kept == len(table) == 659
    assert "sharp" in set(table.queries)
    # no impressions column: a query's demand is its clicks
    assert np.isnan(table.impressions).all()
    assert table.query_impressions.sum() == 798


def test_aggregation_threshold_and_ctr(tmp_path):
    write_csv(tmp_path / "log.csv", (
        "query,category,clicks,impressions\n"
        f"Hornby Train,{TRAINS},2,10\n"
        f"hornby  train!,{TRAINS},2,10\n"  # normalizes to the same query
        f"hornby train,Toys > Dolls,1,10\n"  # category by path
        f"baby doll,{DOLLS},5,50\n"
    ))
    result = ingest(tmp_path / "log.csv", TAXONOMY, min_clicks=3)
    table = result.table
    assert list(table.queries) == ["baby doll", "hornby train"]
    pairs = {(table.queries[q], table.categories[c]): (k, i) for q, c, k, i in
             zip(table.pair_query, table.pair_category, table.clicks, table.impressions)}
    # Impressions are the searches of a query as typed: three typed variants of 10 searches each
    # normalize to "hornby train", which so had 30, whichever category each variant clicked.
    assert pairs == {("hornby train", TRAINS): (4, 30), ("baby doll", DOLLS): (5, 50)}
    assert result.report.pairs_below_min_clicks == 1 and result.report.clicks_below_min_clicks == 1
    assert np.allclose(table.ctr, [0.1, 4 / 30])
    assert list(table.query_impressions) == [50, 30]
    report = result.report  # no conflict, no exact duplicate (the two rows are written differently)
    assert (report.impression_conflicts, report.duplicate_rows, report.internal) == (0, 0, {})


def test_every_reason_is_counted_and_named(tmp_path):
    write_csv(tmp_path / "log.csv", (
        "query,category,clicks,impressions,date\n"
        f"good query,{TRAINS},3,5,2025-01-02\n"   # line 2
        f"!!!,{TRAINS},3,5,2025-01-02\n"          # 3 empty query
        "thing,NOPE,3,5,2025-01-02\n"             # 4 unknown category
        f"thing,{TRAINS},-1,5,2025-01-02\n"       # 5 negative clicks
        f"thing,{TRAINS},many,5,2025-01-02\n"     # 6 non-numeric clicks
        f"thing,{TRAINS},3,x,2025-01-02\n"        # 7 bad impressions
        f"thing,{TRAINS},9,5,2025-01-02\n"        # 8 clicks > impressions
        f"thing,{TRAINS},3,5,yesterday\n"         # 9 bad date
        f"thing,{TRAINS},3\n"                     # 10 wrong field count
    ).encode() + f"caf\xe9,{TRAINS},3,5,2025-01-02\n".encode("latin-1"))  # 11 bad encoding
    result = ingest(tmp_path / "log.csv", TAXONOMY, min_clicks=1)
    report = result.report
    assert dict(report.skipped) == {
        "empty_query": 1, "unknown_category": 1, "bad_clicks": 2, "bad_impressions": 1,
        "clicks_exceed_impressions": 1, "bad_date": 1, "malformed_row": 1, "bad_encoding": 1,
    }
    assert report.rows_read == 10 and report.rows_used == 1
    assert report.examples["unknown_category"] == [(4, "NOPE")]
    assert report.examples["bad_clicks"] == [(5, "-1"), (6, "many")]
    text = report.format()
    assert "category is not in the taxonomy (e.g. row 4: 'NOPE')" in text
    with pytest.raises(InputError, match=r"log.csv row 3: query is empty after normalization: '!!!'"):
        ingest(tmp_path / "log.csv", TAXONOMY, strict=True)


def test_jsonl_and_parquet(tmp_path):
    lines = [
        {"query": "Wooden Train", "category": TRAINS, "clicks": 4},
        {"query": "doll house", "category": "Toys > Dolls"},  # no count in a log with counts: skipped (issue 37)
        "not json",
        {"query": "doll house", "category": DOLLS, "clicks": 3, "date": "2025-03-01"},
    ]
    (tmp_path / "log.jsonl").write_text("\n".join(l if isinstance(l, str) else json.dumps(l) for l in lines) + "\n")
    result = ingest(tmp_path / "log.jsonl", TAXONOMY, min_clicks=3)
    assert result.report.skipped == {"malformed_row": 1, "bad_clicks": 1}
    assert result.report.examples["malformed_row"] == [(3, "not json")]
    assert result.report.examples["bad_clicks"] == [(2, "")]
    assert sorted(result.table.queries) == ["doll house", "wooden train"]
    with pytest.raises(InputError, match="row 2: clicks is empty"):
        ingest(tmp_path / "log.jsonl", TAXONOMY, strict=True)

    con = duckdb.connect()
    con.execute(f"""copy (select * from (values ('king poster bed', '{BEDS}', 7, 70, date '2025-06-01'),
                                            ('', '{BEDS}', 1, 1, date '2025-06-01'))
                         t(query, category, clicks, impressions, date))
                    to '{tmp_path / "log.parquet"}' (format parquet)""")
    result = ingest(tmp_path / "log.parquet", TAXONOMY)
    assert list(result.table.queries) == ["king poster bed"]
    assert result.report.examples["empty_query"] == [(2, "")]


def test_date_range_selects_rows(tmp_path):
    write_csv(tmp_path / "log.csv", (
        "query,category,clicks,date\n"
        f"train set,{TRAINS},3,2025-01-15\n"
        f"train set,{TRAINS},4,2025-08-15\n"
        f"train set,{TRAINS},5,\n"
    ))
    result = ingest(tmp_path / "log.csv", TAXONOMY, date_from="2025-07-01", date_to="2026-01-01")
    assert result.table.clicks.tolist() == [4]
    assert result.report.rows_outside_dates == 2
    everything = ingest(tmp_path / "log.csv", TAXONOMY)
    assert everything.table.clicks.tolist() == [12]


def test_missing_columns_and_files(tmp_path):
    write_csv(tmp_path / "log.csv", "q,category\nx,y\n")
    with pytest.raises(InputError, match="log.csv: missing column\\(s\\) query"):
        ingest(tmp_path / "log.csv", TAXONOMY)
    with pytest.raises(InputError, match="nothere.csv"):
        ingest(tmp_path / "nothere.csv", TAXONOMY)
    with pytest.raises(InputError, match="cannot tell the click-log format"):
        ingest(tmp_path / "log.xlsx", TAXONOMY)


def test_standard_input_is_told_that_a_named_file_or_format_is_needed(tmp_path):
    """Issue 53, item 8: `qcat data ingest /dev/stdin < log.csv` (a regular file on standard input)
    was told only that the name did not tell the format: it says what name is needed, or --format."""
    import subprocess
    import sys

    write_csv(tmp_path / "log.csv", "query,category,clicks\ntv,Toys,3\n")
    (tmp_path / "taxonomy.tsv").write_text("id\tpath\tparent\nT\tToys\t\n")
    with open(tmp_path / "log.csv", "rb") as stdin:
        result = subprocess.run([sys.executable, "-m", "qcat.cli", "data", "ingest", "/dev/stdin", "--taxonomy",
                                 tmp_path / "taxonomy.tsv"], stdin=stdin, capture_output=True, text=True, timeout=60,
                                check=False)
    assert result.returncode == 2 and result.stderr.strip().endswith(
        "/dev/stdin: cannot tell the click-log format from the name: give a file named .csv, .tsv, .parquet or .jsonl "
        "(.gz after it too), or --format (qcat data ingest)"), result.stderr
    with pytest.raises(InputError, match=r"from the name: give a file named .csv, .tsv, .parquet or .jsonl \(.gz after "
                                         r"it too\)$"):
        detect_format(tmp_path / "listings.xlsx", "catalog")  # a catalog's readers have no --format: none offered


TOYS = TAXONOMY.id_of_path("Toys")


def test_rows_naming_an_internal_node_count_for_its_other_leaf(tmp_path):
    """Issue 21, item 4: a log naming a parent category ("Toys") used to train on the parent and
    serve it as an answer, without a word."""
    write_csv(tmp_path / "log.csv", (
        "query,category,clicks\n"
        f"toy box,{TOYS},4\n"
        "toy chest,Toys,2\n"  # by path
        f"hornby train,{TRAINS},3\n"
    ))
    result = ingest(tmp_path / "log.csv", TAXONOMY, min_clicks=1)
    other = f"{TOYS}/other"
    assert set(result.table.categories) == {other, TRAINS}
    assert result.taxonomy.path_of(other) == "Toys > Other" and result.taxonomy.is_leaf(other)
    assert result.taxonomy.parent(other) == TOYS and not result.taxonomy.is_leaf(TOYS)
    assert result.report.internal == {TOYS: (2, 6.0, other)}
    assert f"2 rows name 1 internal (non-leaf) categories, counted for an Other leaf under each node (e.g. {TOYS} 2 rows " \
           f"-> {other})" in result.report.format()

    kept = ingest(tmp_path / "log.csv", TAXONOMY, min_clicks=1, internal_nodes="keep")
    assert set(kept.table.categories) == {TOYS, TRAINS} and kept.taxonomy is TAXONOMY
    assert kept.report.internal == {TOYS: (2, 6.0, TOYS)}

    with pytest.raises(InputError, match=rf"2 rows name 1 internal \(non-leaf\) categories of the taxonomy, e.g. "
                                         rf"{TOYS} \(Toys\): 2 rows"):
        ingest(tmp_path / "log.csv", TAXONOMY, min_clicks=1, internal_nodes="refuse")


def test_an_existing_other_leaf_is_used():
    taxonomy = from_paths(["Toys > Trains", "Toys > Other"])
    toys, other = taxonomy.id_of_path("Toys"), taxonomy.id_of_path("Toys > Other")
    extended, other_of = taxonomy.with_other_leaves([toys])
    assert extended is taxonomy and other_of == {toys: other}


def test_conflicting_impressions_and_duplicate_rows_are_counted_and_resolved(tmp_path):
    """Issue 21, item 6: the hand-made log's "lego star wars" rows carried 1,400 and 25
    impressions, and 150 exact duplicate rows were merged without a word."""
    write_csv(tmp_path / "log.csv", (
        "query,category,clicks,impressions,date\n"
        f"lego star wars,{TRAINS},145,1400,2025-03-01\n"
        f"lego star wars,{DOLLS},15,25,2025-03-01\n"   # same query and day, other impressions
        f"lego star wars,{DOLLS},5,300,2025-03-02\n"   # another day: no conflict
        f"baby doll,{DOLLS},5,50,\n"
        f"baby doll,{DOLLS},5,50,\n"                   # an exact duplicate
        f"Baby Doll,{DOLLS},1,20,\n"                   # another typed variant: 20 more searches
    ))
    result = ingest(tmp_path / "log.csv", TAXONOMY, min_clicks=1)
    report, table = result.report, result.table
    assert (report.impression_conflicts, report.impression_conflict_rows) == (1, 2)
    assert report.impression_conflict_examples == [("lego star wars", "2025-03-01", 25.0, 1400.0)]
    assert report.duplicate_rows == 1
    text = report.format()
    assert "1 (query, day) groups (2 rows) report different impressions for the same typed query in different " \
           "categories; each day counts the largest" in text
    assert "1 rows repeat another row exactly" in text and "their clicks and impressions are summed" in text
    pairs = {(table.queries[q], table.categories[c]): (k, i) for q, c, k, i in
             zip(table.pair_query, table.pair_category, table.clicks, table.impressions)}
    # The conflicting day counts 1,400 searches for both categories; the duplicate's clicks and
    # impressions are both summed (issue 37, item 2: clicks alone made CTR 2.0 of two copies of
    # `lg tv,…,7,7`), and a typed variant's searches add up.
    assert pairs == {("lego star wars", TRAINS): (145, 1400), ("lego star wars", DOLLS): (20, 1700),
                     ("baby doll", DOLLS): (11, 120)}


# -- Issue 37: logs that gave a wrong table with exit 0.

def test_a_header_naming_a_column_twice_is_refused(tmp_path):
    """Item 1: `query,category,category,clicks` filed `tv` under the last category without a word."""
    write_csv(tmp_path / "log.csv", f"query,category,Category,clicks\ntv,{BEDS},{TRAINS},3\n")
    with pytest.raises(InputError, match=r"log\.csv: the header names the column 'category' twice"):
        ingest(tmp_path / "log.csv", TAXONOMY, min_clicks=1)
    (tmp_path / "log.jsonl").write_text(json.dumps({"query": "tv", "category": BEDS, "clicks": 3}) + "\n"
                                        + f'{{"query": "tv", "category": "{BEDS}", "Category": "{TRAINS}", "clicks": 3}}\n')
    report = ingest(tmp_path / "log.jsonl", TAXONOMY, min_clicks=1).report  # a JSON object naming a field twice
    assert report.skipped == {"malformed_row": 1} and report.examples["malformed_row"][0][0] == 2


def test_duplicate_rows_sum_impressions_with_their_clicks(tmp_path):
    """Item 2: two copies of `lg tv,…,7,7` became 14 clicks of 7 impressions (CTR 2.0)."""
    write_csv(tmp_path / "log.csv", f"query,category,clicks,impressions\nlg tv,{BEDS},7,7\nlg tv,{BEDS},7,7\n"
                                    f"lg tv,{TRAINS},2,7\n")
    result = ingest(tmp_path / "log.csv", TAXONOMY, min_clicks=1)
    table, report = result.table, result.report
    pairs = {table.categories[c]: (k, i) for c, k, i in zip(table.pair_category, table.clicks, table.impressions)}
    # BEDS' two rows are 14 clicks of 14 searches; TRAINS' row reports 7: the day counts the largest.
    assert pairs == {BEDS: (14, 14), TRAINS: (2, 14)} and np.all(table.ctr <= 1)
    assert (report.duplicate_rows, report.impression_conflicts, report.pairs_over_impressions) == (1, 1, 0)
    assert list(table.query_impressions) == [14]


def test_pairs_whose_clicks_exceed_impressions_are_counted_and_dropped(tmp_path):
    """Item 2's check after aggregation: float sums can put clicks above impressions (0.1 + 0.2 >
    0.3 by rounding only: kept); nothing else under the rule can, but any such pair is counted."""
    write_csv(tmp_path / "log.csv", f"query,category,clicks,impressions\nnook,{BEDS},0.1,0.1\nnook,{BEDS},0.2,0.2\n")
    result = ingest(tmp_path / "log.csv", TAXONOMY, min_clicks=0.1)
    assert result.report.pairs_over_impressions == 0 and result.report.pairs_kept == 1
    from qcat.training.clicklogs import ingest_sql as sql
    from qcat.training.clicklogs.ingest_duckdb import DuckDBEngine

    engine = DuckDBEngine()  # pairs as the rule never makes them: 9 clicks of 3 impressions
    try:
        engine.con.execute("create temp table pairs as select * from (values ('tv', 'x', 9.0, 3.0, 1, 1), "
                           "('tv', 'y', 2.0, 3.0, 1, 1)) t(query, category_id, clicks, impressions, "
                           "rows_with_impressions, rows)")
        from qcat.training.clicklogs.clicklog import IngestReport, _aggregate

        report = IngestReport(path="log.csv", min_clicks=1)
        table = _aggregate(engine, 1, report)
    finally:
        engine.close()
    assert (report.pairs_over_impressions, report.pairs_kept, list(table.categories)) == (1, 1, ["y"])
    assert "1 (query, category) pairs have more clicks than impressions after aggregation; dropped (e.g. 'tv' x: " \
           "9 clicks, 3 impressions)" in report.format()


def test_an_empty_clicks_cell_is_a_bad_count_not_one_click(tmp_path):
    """Item 3: `tv,K015,,10` beside `tv,K015,50,100` made 51 clicks; JSONL `"clicks": null` too.
    Without a clicks column every row is still one click."""
    write_csv(tmp_path / "log.csv", f"query,category,clicks,impressions\ntv,{BEDS},,10\ntv,{BEDS},50,100\n")
    result = ingest(tmp_path / "log.csv", TAXONOMY, min_clicks=1)
    assert result.report.skipped == {"bad_clicks": 1} and result.report.examples["bad_clicks"] == [(2, "")]
    assert list(result.table.clicks) == [50]
    (tmp_path / "log.jsonl").write_text(json.dumps({"query": "tv", "category": BEDS, "clicks": None}) + "\n"
                                        + json.dumps({"query": "tv", "category": BEDS, "clicks": 50}) + "\n")
    result = ingest(tmp_path / "log.jsonl", TAXONOMY, min_clicks=1)
    assert result.report.skipped == {"bad_clicks": 1} and list(result.table.clicks) == [50]
    write_csv(tmp_path / "plain.csv", f"query,category\ntv,{BEDS}\ntv,{BEDS}\n")
    assert list(ingest(tmp_path / "plain.csv", TAXONOMY, min_clicks=1).table.clicks) == [2]


def test_a_jsonl_query_that_is_not_a_string_is_skipped(tmp_path):
    """Item 4: `{"query": ["lego"], …}` was used as "lego"."""
    lines = [{"query": ["lego"], "category": TRAINS, "clicks": 3}, {"query": 42, "category": TRAINS, "clicks": 3},
             {"query": {"q": "lego"}, "category": TRAINS, "clicks": 3}, {"query": "lego", "category": TRAINS, "clicks": 3}]
    (tmp_path / "log.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    result = ingest(tmp_path / "log.jsonl", TAXONOMY, min_clicks=1)
    assert result.report.skipped == {"query_not_text": 3}
    assert [row for row, _ in result.report.examples["query_not_text"]] == [1, 2, 3]
    assert list(result.table.clicks) == [3]
    assert "skipped 3 rows: query is not a JSON string" in result.report.format()


def test_an_id_that_is_another_nodes_path_is_ambiguous(tmp_path):
    """Item 5: id `Toys` (path `Stuff`) and the node at path `Toys`: every row went to the id."""
    (tmp_path / "taxonomy.tsv").write_text("id\tpath\tparent\nToys\tStuff\t\nT\tToys\t\nL\tToys > Lego\tT\n")
    from qcat.taxonomy import load_taxonomy

    taxonomy = load_taxonomy(tmp_path / "taxonomy.tsv")
    write_csv(tmp_path / "log.csv", "query,category,clicks\nlego,Toys,3\nlego,L,3\nstuff,Stuff,3\n")
    result = ingest(tmp_path / "log.csv", taxonomy, min_clicks=1, internal_nodes="keep")
    assert result.report.skipped == {"ambiguous_category": 1}
    assert result.report.examples["ambiguous_category"] == [(2, "Toys")]
    assert "one node's id and another's path" in result.report.format()
    assert sorted(result.table.categories) == ["L", "Toys"]  # `Stuff` names id Toys by its path alone
    with pytest.raises(Exception, match="is the id of node 'Toys' \\(Stuff\\) and the path of node 'T'"):
        taxonomy.resolve("Toys")
    assert taxonomy.resolve("T") == "T" and taxonomy.resolve("Toys > Lego") == "L"
