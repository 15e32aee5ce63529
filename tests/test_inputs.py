"""The one input layer (issue 45): every reader declares its file kind to qcat.inputs, and the
layer's rules hold the same way for each kind (BOM, one header, comments only where the kind says,
typed values, the query limit, normalized matching, every line accounted for)."""

from __future__ import annotations

import ast
import gzip
import json
from pathlib import Path

import pytest

from qcat.errors import InputError
from qcat.inputs import REFUSE, SKIP, read_table
from qcat.measure.graded_gold import read_graded_gold
from tests.test_judged_gold import LEAF, TAXONOMY
from tests.test_own_data import one_line_error, qcat

REPO = Path(__file__).resolve().parent.parent
BOM = "\ufeff"


def gold(tmp_path, text: str, name: str = "gold.tsv") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# --- item 6: a column named twice ---------------------------------------------------------------

@pytest.mark.parametrize(("name", "text", "reader"), [
    ("gold.tsv", "query\tcategory\tgrade\tgrade\nbed\tc1\t3\t0\n", "gold"),
    ("gold.tsv", "query\tcategory\tGrade\tgrade\nbed\tc1\t3\t0\n", "gold"),
    ("traffic.csv", "query,impressions,query\nlego,3,tv\n", "traffic"),
    ("taxonomy.tsv", "id\tpath\tPATH\n1\tA\tB\n", "taxonomy"),
    ("results.csv", "query,rank,listing_id,rank\nlego,1,L1,2\n", "results"),
])
def test_a_column_named_twice_is_refused_naming_it(tmp_path, name, text, reader) -> None:
    from qcat.judging.grading.categories import read_traffic
    from qcat.judging.grading.imports import read_results
    from qcat.taxonomy import load_taxonomy

    path = gold(tmp_path, text, name)
    read = {"gold": read_graded_gold, "traffic": read_traffic, "taxonomy": load_taxonomy,
            "results": lambda p: read_results([p])}[reader]
    with pytest.raises(InputError, match=rf"{name}:1: the header names the column '\w+' twice"):
        read(path)


# --- item 7: queries matched once normalized ------------------------------------------------------

def test_gold_queries_written_several_ways_are_one_query_and_conflicts_name_both_lines(tmp_path) -> None:
    juice, cheese = LEAF["Juice"], LEAF["Cheese"]
    read = read_graded_gold(gold(tmp_path, f"query\tcategory\tgrade\nTV\t{juice}\t3\n tv \t{juice}\t3\n"
                                           f"Tv\t{cheese}\t0\nlego\t{cheese}\t2\n"))
    assert read.queries == ["tv", "lego"] and read.grades["tv"] == {juice: 3, cheese: 0}
    assert read.merged == {"tv": ["TV", "tv", "Tv"]} and "1 written several ways merged" in read.describe()
    with pytest.raises(InputError, match=rf"gold\.tsv:3: query 'tv' grades category '{juice}' 0 here and 3 on line 2"):
        read_graded_gold(gold(tmp_path, f"query\tcategory\tgrade\nTV\t{juice}\t3\ntv\t{juice}\t0\n"))


# --- item 8: the # top_k: directive ---------------------------------------------------------------

@pytest.mark.parametrize("value", ["0", "-1", "abc", "nan", "1e309", "2.5", "99", ""])
def test_a_malformed_top_k_is_refused_naming_its_line(tmp_path, value) -> None:
    path = gold(tmp_path, f"# session: 3\n# top_k: {value}\nquery\tcategory\tgrade\nbed\tc1\t3\n")
    with pytest.raises(InputError, match=r"gold\.tsv:2: '# top_k:'"):
        read_graded_gold(path)


def test_top_k_given_twice_is_refused_and_given_once_is_kept(tmp_path) -> None:
    with pytest.raises(InputError, match=r"gold\.tsv:2: '# top_k:' is given a second time"):
        read_graded_gold(gold(tmp_path, "# top_k: 3\n# top_k: 4\nquery\tcategory\tgrade\nbed\tc1\t3\n"))
    read = read_graded_gold(gold(tmp_path, "# Top_K: 4\n# a note: anything\nquery\tcategory\tgrade\nbed\tc1\t3\n"))
    assert read.top_k() == 4 and read.meta == {"top_k": "4"}


# --- item 10: leaves only -------------------------------------------------------------------------

def test_a_gold_grading_an_internal_node_is_refused(tmp_path) -> None:
    food = next(i for i in TAXONOMY.ids if TAXONOMY.path_of(i) == "Food")
    read = read_graded_gold(gold(tmp_path, f"query\tcategory\tgrade\njuice\t{LEAF['Juice']}\t3\njuice\tFood\t2\n"))
    with pytest.raises(InputError, match=rf"gold\.tsv:3: query 'juice': category 'Food' \(Food\) is not a leaf"):
        read.check_against(TAXONOMY)
    assert food in TAXONOMY


# --- item 11: comments only above the header; quote-led queries -------------------------------------

def test_hash_led_and_quote_led_gold_queries_are_read_as_written(tmp_path) -> None:
    juice = LEAF["Juice"]
    read = read_graded_gold(gold(tmp_path, f"# a comment above the header\nquery\tcategory\tgrade\n"
                                           f"#1 dad mug\t{juice}\t3\n\"Sheriff\" toy car\t{juice}\t2\n"
                                           f"\"quoted\ttab\"\t{juice}\t1\n"))
    assert read.queries == ["1 dad mug", "sheriff toy car", "quoted tab"]
    assert [read.lines[(q, juice)] for q in read.queries] == [3, 4, 5]


# --- item 16 and 19: the query limit and empty queries, named by file and line ------------------------

@pytest.mark.slow
def test_gold_queries_over_the_limit_or_empty_once_normalized_are_refused_naming_the_line(tmp_path) -> None:
    with pytest.raises(InputError, match=r"gold\.tsv:3: the query is too long \(4,001 bytes, limit 4,000\)"):
        read_graded_gold(gold(tmp_path, f"query\tcategory\tgrade\nbed\tc1\t3\n{'a' * 4001}\tc1\t3\n"))
    path = gold(tmp_path, "query\tcategory\tgrade\nbed\tc1\t3\n!!!\tc1\t3\n")
    line = one_line_error(qcat("evaluate", "--model", tmp_path / "none", "--gold", path))
    assert f"--gold {path}:3: the query '!!!' is empty once normalized" in line


# --- item 18: a byte order mark anywhere a file starts ------------------------------------------------

def test_a_byte_order_mark_is_dropped_from_confusable_maps_and_jsonl_logs(tmp_path) -> None:
    from qcat.taxonomy import load_taxonomy
    from qcat.taxonomy.confusable import load_confusable
    from qcat.training.clicklogs.clicklog import ingest

    juice, cheese = LEAF["Juice"], LEAF["Cheese"]
    (tmp_path / "map.tsv").write_text(f"{BOM}leaf_a\tleaf_b\tnote\n{juice}\t{cheese}\tx\n", encoding="utf-8")
    assert load_confusable(tmp_path / "map.tsv", TAXONOMY).pairs == (tuple(sorted((juice, cheese))),)
    (tmp_path / "map.tsv").write_text(f"{BOM}{juice}\t{cheese}\n", encoding="utf-8")
    assert len(load_confusable(tmp_path / "map.tsv", TAXONOMY)) == 1
    bestbuy = load_taxonomy(REPO / "tests" / "data" / "bestbuy_categories_2016.json.gz")
    log = tmp_path / "log.jsonl"
    log.write_text(BOM + "\n".join(json.dumps({"query": q, "category": "abcat0101001", "clicks": 3})
                                   for q in ("sharp tv", "lg tv")) + "\n", encoding="utf-8")
    report = ingest(log, bestbuy, min_clicks=1).report
    assert report.rows_used == 2 and sum(report.skipped.values()) == 0


# --- item 20: standard input ------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["-", "/dev/stdin"])
def test_ingesting_standard_input_says_it_is_not_supported(name) -> None:
    line = one_line_error(qcat("data", "ingest", name, "--taxonomy", REPO / "tests/data/bestbuy_categories_2016.json.gz",
                               stdin=b"query,category\nlego,x\n"))
    assert "standard input" in line and "not supported" in line and "cannot tell" not in line


# --- issue 46, item 2.8: traffic merges said ----------------------------------------------------------

def test_traffic_lines_written_several_ways_merge_and_say_so(tmp_path) -> None:
    from qcat.judging.grading.categories import read_traffic

    said = []
    path = gold(tmp_path, "TV\ntv\n Tv\nlego\n#1 dad mug\n", "traffic.txt")
    assert read_traffic(path, note=said.append) == [("TV", 3.0, None), ("lego", 1.0, None), ("#1 dad mug", 1.0, None)]
    assert said and "5 rows, 3 distinct queries once normalized (1 written several ways, e.g. 'TV' / 'tv' / 'Tv')" in said[0]


@pytest.mark.slow
def test_judges_see_a_traffic_query_as_written_and_grades_match_it_normalized(tmp_path) -> None:
    """Issue 46, item 2.7: the session stores (and the panel draws, as text) the query as first
    written; forms that normalize alike add up; a graded gold file matches it on its normalized form."""
    import sqlite3

    model = REPO / "demo" / "qcat_demo" / "model"
    traffic = gold(tmp_path, "Basmati Rice & Dal\nbasmati rice  & dal\nLEGO Star Wars\n", "traffic.txt")
    db = tmp_path / "j.db"
    assert qcat("db", "upgrade", "--url", db).returncode == 0
    made = qcat("judge", "create-session", "--kind", "categories", "--model", model, "--traffic", traffic,
                "--default-segment", "tail", "--name", "as written", "--url", db)
    assert made.returncode == 0, made.stderr
    assert "3 rows, 2 distinct queries once normalized" in made.stderr.decode()
    with sqlite3.connect(db) as con:
        stored = sorted(text for (text,) in con.execute("select text from session_queries"))
    assert stored == ["Basmati Rice & Dal", "LEGO Star Wars"]
    read = read_graded_gold(gold(tmp_path, "query\tcategory\tgrade\nBasmati Rice & Dal\tc1\t3\n"))
    assert read.queries == ["basmati rice dal"]


# --- the layer itself -------------------------------------------------------------------------------

def test_every_line_is_accounted_for_and_bad_rows_are_named(tmp_path) -> None:
    from qcat.measure.graded_gold import SCHEMA

    text = ("# top_k: 3\n\nquery\tcategory\tgrade\tsegment\nbed\tc1\t3\thead\n\nbed\tc2\t7\t\n"
            "!!!\tc1\t1\t\nlamp\tc1\t2\tmiddle\nlamp\tc1\n")
    table = read_table(gold(tmp_path, text), SCHEMA, on_bad=SKIP)
    assert table.lines == 9 and table.comment_lines == 1 and table.blank == [2, 5] and table.header_line == 3
    assert [row.line for row in table.rows] == [4]
    assert [(s.line, s.reason) for s in table.skipped] == [(6, "bad_grade"), (7, "empty_query"), (8, "bad_segment"),
                                                          (9, "wrong_fields")]
    assert table.directives == {"top_k": 3} and table.rows[0].values == {"query": "bed", "category": "c1", "grade": 3,
                                                                          "segment": "head"}
    with pytest.raises(InputError, match=r"gold\.tsv:6: grade '7' is not a whole number in 0\.\.3"):
        read_table(tmp_path / "gold.tsv", SCHEMA, on_bad=REFUSE)


def test_gzip_and_byte_order_mark_are_the_layers(tmp_path) -> None:
    from qcat.measure.graded_gold import SCHEMA

    (tmp_path / "gold.tsv.gz").write_bytes(gzip.compress((BOM + "query\tcategory\tgrade\nbed\tc1\t3\n").encode()))
    table = read_table(tmp_path / "gold.tsv.gz", SCHEMA)
    assert table.header == ("query", "category", "grade") and len(table.rows) == 1
    (tmp_path / "bad.tsv.gz").write_bytes(b"not gzip")
    with pytest.raises(InputError, match=r"--gold .*bad\.tsv\.gz: its name ends in \.gz but it is not a valid gzip"):
        read_table(tmp_path / "bad.tsv.gz", SCHEMA)


# --- every reader goes through the layer ------------------------------------------------------------

# The readers of a user's files, each with the schema it declares to qcat.inputs.
READERS = {
    "qcat.measure.graded_gold": ("read_graded_gold", ["SCHEMA"]),
    "qcat.taxonomy.confusable": ("load_confusable", ["SCHEMA"]),
    "qcat.taxonomy.files": ("load_taxonomy", ["TAXONOMY_TABLE", "GOOGLE_LINES"]),
    "qcat.cli.labelwise": ("read_query_file", ["QUERY_FILE"]),
    "qcat.judging.grading.categories": ("read_traffic", ["TRAFFIC_TABLE", "TRAFFIC_LINES"]),
    "qcat.judging.grading.gold": ("read_gold_file", ["GOLD_FILE"]),
    "qcat.judging.grading.imports.files": ("read_records", ["RESULTS", "LISTINGS", "TOPICS"]),
    "qcat.evaluation.golden.importers": ("load_golden", ["GOLDEN_CSV"]),
    "qcat.training.data.listings": ("load_catalog", ["CATALOG_FILE"]),
    "qcat.training.data.real_text": ("load_real_queries", ["REAL_QUERIES"]),
    "qcat.training.clicklogs.ingest_text": ("read_delimited", []),  # a click log's rows are checked in SQL
    "qcat.training.clicklogs.ingest_duckdb": ("DuckDBEngine", []),
    "qcat.judging.commands.sessions": ("read_guidelines", []),
}
# Modules that read files that are not a user's table, and why.
NOT_USER_TABLES = {
    "qcat.text.lines": "the layer's own line rules",
    "qcat.bundles.bundle": "a model bundle's own files, verified by their hashes",
    "qcat.models.calibration.leaves": "a bundle's calibration map (hashed)",
    "qcat.models.calibration.nodes": "a bundle's node calibration (hashed)",
    "qcat.models.xmlq": "a bundle's ONNX network (hashed)",
    "qcat.console.output": "/proc/self/status, the process's own memory",
    "qcat.training.xmlq.checkpoint": "the trainer's own checkpoints",
    "qcat.training.xmlq.export": "the trainer's own exported network",
    "qcat.training.data.corpus": "a corpus's own meta.json",
    "qcat.training.data.real_text": "map_bestbuy_clicks builds the shipped demo from its public sources",
    "qcat.training.clicklogs.ingest_spark": "Spark reads the file; its header goes through the layer's rule",
    "qcat.training.clicklogs.ingest_cache": "its own entries (files it wrote, checked by sha256); the log is hashed, not read as a table",
    "qcat.judging.pages": "the package's own guidelines",
    "qcat.judging.pages.panel": "the package's own panel modules (panel*.js) and panel.css",
}
LOW_LEVEL = {"decoded_lines", "physical_lines", "split_line"}


def low_level_reads(path: Path) -> list[str]:
    """What a module does that reads a file by itself: qcat.text.lines' line primitives imported, the csv
    module's readers, or a path's ``read_text``/``read_bytes`` or ``open``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module == "qcat.text.lines":
            found += [f"imports {a.name}" for a in node.names if a.name in LOW_LEVEL]
        elif isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in ("read_text", "read_bytes", "reader", "DictReader"):
                found.append(f"calls .{func.attr}() on line {node.lineno}")
            elif isinstance(func, ast.Name) and func.id == "open":
                found.append(f"calls open() on line {node.lineno}")
    return found


@pytest.mark.slow
def test_every_reader_goes_through_the_input_layer() -> None:
    from tests.test_structure import every_module

    modules = every_module()
    offenders = {}
    for name, path in modules.items():
        if name.startswith("qcat.inputs") or name in NOT_USER_TABLES:
            continue
        reads = [r for r in low_level_reads(path) if not (r.startswith("calls open()") and _writes(path, r))]
        if reads:
            offenders[name] = reads
    assert offenders == {}
    for name, (function, schemas) in READERS.items():
        source = modules[name].read_text(encoding="utf-8")
        assert "qcat.inputs" in source and (f"def {function}" in source or f"class {function}" in source), name
        module = __import__(name, fromlist=["_"])
        for schema in schemas:
            assert getattr(module, schema).__class__.__name__ == "FileSchema", (name, schema)


def _writes(path: Path, found: str) -> bool:
    """An ``open(...)`` call on that line opens for writing (a mode with w, a or x)."""
    line = int(found.rsplit(" ", 1)[-1])
    text = path.read_text(encoding="utf-8").splitlines()[line - 1]
    return any(f'"{m}' in text or f"'{m}" in text for m in ("w", "a", "x")) or "O_WRONLY" in text or "O_RDWR" in text


def test_the_reader_check_sees_a_reader_of_its_own(tmp_path) -> None:
    module = tmp_path / "sneaky.py"
    module.write_text("from qcat.text.lines import split_line\nimport csv\n\ndef read(p):\n"
                      "    return list(csv.reader(open(p))) + [p.read_text()]\n")
    assert len(low_level_reads(module)) == 4
