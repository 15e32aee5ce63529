"""Issue 53 ("Never silently wrong, round 5"), items 12 and 13a-e: what a chosen judging session
holds and why, its segment warnings counting what a segment holds, and messages that say what the
file wrote, name a file once, tell the truth about a default, tell repeated lines apart and describe
the comparison made.
"""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import pytest

from qcat.errors import InputError
from tests.test_judge_selection import IMPRESSIONS, MODEL, NB, POOL, judge_first, run
from tests.test_own_data import BESTBUY, CLICKS, qcat

# Item 12: a --select disagree session short of its budget.

@pytest.mark.slow  # over 3 s: the demo model and NB loaded, a session made and graded
def test_a_disagree_session_short_of_its_budget_says_what_it_holds_and_why(tmp_path, capsys) -> None:
    """A pool of one segment (40 queries, n of them with the models disagreeing) and a budget of n + 3:
    the session holds n. The line said "the n + 3 queries of a pool of 40" and the warning "the tail
    segment has n queries"."""
    from qcat.classifier import load_model
    from qcat.judging.grading.selection.rank import top_categories
    from qcat.judging.reporting.categories import build_category_report, header_lines
    from qcat.judging.store.connection import open_store

    first, second = (top_categories(load_model(d), np.asarray(POOL, dtype=object)) for d in (MODEL, NB))
    n = int((first != second).sum())
    assert 3 <= n <= 30, n
    db, traffic = tmp_path / "j.db", tmp_path / "tail.csv"
    traffic.write_text("query,impressions,segment\n" + "".join(f"{q},{i:g},tail\n" for q, i in zip(POOL, IMPRESSIONS)),
                       encoding="utf-8")
    assert run("db", "upgrade", "--url", db) == 0
    capsys.readouterr()
    assert run("judge", "create-session", "--kind", "categories", "--model", MODEL, "--model", NB, "--traffic",
               traffic, "--select", "disagree", "--queries", n + 3, "--name", "d", "--url", db) == 0
    said = capsys.readouterr()
    assert (f"warning: the tail segment holds 40 queries, {n} of them with the two models disagreeing: {n} taken, "
            f"fewer than the {n + 3} asked for") in said.err.splitlines(), said.err
    judge_first(db, 1, n)
    store = open_store(str(db))
    line = header_lines(build_category_report(store, "d", bootstrap=0, min_judges=1))[2]
    store.dispose()
    assert line.startswith(f"Sample: disagree, {n} queries (budget {n + 3}; only {n} of the pool of 40 with the two "
                           "models disagreeing) with the most impressions"), line
    assert f"the {n + 3} queries" not in line


def test_a_session_that_took_its_budget_says_so_and_a_short_segment_counts_what_it_holds() -> None:
    from qcat.judging.grading.selection.wording import how_many, say_short_segment

    full = {"sampled": {"head": 8, "torso": 8, "tail": 8}, "requested": {"head": 8, "torso": 8, "tail": 8},
            "selection": {"budget": 24, "pool": 400, "candidates": {"head": 30, "torso": 40, "tail": 50}}}
    assert how_many(full, "uncertain") == "the 24 queries of a pool of 400 queries"
    short = full | {"sampled": {"head": 8, "torso": 8, "tail": 1}}
    short["selection"] = full["selection"] | {"candidates": {"head": 30, "torso": 40, "tail": 1}}
    assert how_many(short, "uncertain") == ("17 queries (budget 24; 71 of the pool of 400 with an answer from the "
                                            "first model, but only 1 in the tail (its share 8))")
    assert say_short_segment("tail", 376, 300, 10, ("disagree", 22), 0, 22, 24) == (
        "warning: the tail segment holds 376 queries, 300 of them left out (a model trained on them), 10 left out "
        "(never asked again), 22 of the rest with the two models disagreeing: 22 taken, fewer than the 24 asked for")
    assert say_short_segment("head", 1, 0, 0, None, 0, 1, 2) == (
        "warning: the head segment holds 1 query: 1 taken, fewer than the 2 asked for")


# Item 13a: a header named twice is quoted as the file writes it.

def test_a_header_named_twice_is_quoted_as_written(tmp_path) -> None:
    from qcat.measure.graded_gold import read_graded_gold
    from qcat.taxonomy import load_taxonomy
    from qcat.training.clicklogs.clicklog import ingest

    gold = tmp_path / "gold.tsv"
    gold.write_text("query\tcategory\tgrade\tGrade\nlego\tc1\t3\t2\n", encoding="utf-8")
    with pytest.raises(InputError) as refused:
        read_graded_gold(gold)
    assert ("gold.tsv:1: the header names the column 'grade' twice (as 'grade' and 'Grade'; found: 'query, category, "
            "grade, Grade')") in str(refused.value)
    log = tmp_path / "log.csv"
    log.write_text("Query,category,CATEGORY,clicks\ntv,a,b,3\n", encoding="utf-8")
    taxonomy = load_taxonomy(BESTBUY)
    with pytest.raises(InputError, match=re.escape("'category' twice (as 'category' and 'CATEGORY'; found: 'Query, "
                                                   "category, CATEGORY, clicks')")):
        ingest(log, taxonomy, min_clicks=1)
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"query": ["tv"], "Category": ["a"], "category": ["b"]}), tmp_path / "log.parquet")
    with pytest.raises(InputError, match=re.escape("'category' twice (as 'Category' and 'category'")):
        ingest(tmp_path / "log.parquet", taxonomy, min_clicks=1)  # DuckDB alone reads it as category_1


# Item 13c: --queries' help tells the default --select allows.

def test_the_queries_help_says_the_default_applies_only_without_select_uncertain_or_disagree(capsys) -> None:
    with pytest.raises(SystemExit) as done:
        run("judge", "create-session", "--help")
    assert done.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    start = text.index("--queries QUERIES how many")
    queries = text[start:text.index("--name NAME", start)]
    assert "(default 4500" not in queries
    assert ("Without it: 4500 from a log or corpus, every query of --traffic or --results, and --select uncertain or "
            "disagree refuse to run (their budget has no default)") in queries


# Item 13d: the dataset line of each judged weight tried says its weight.

@pytest.mark.slow  # over 3 s: trains NB four times
def test_train_nb_judged_labels_each_weight_it_trains(tmp_path) -> None:
    judged = tmp_path / "judged.tsv"
    judged.write_text("query\tcategory\tgrade\nzzq widget\tabcat0101001\t3\nair conditioner\tabcat0907007\t2\n")
    result = qcat("train", "nb", "--log", CLICKS, "--taxonomy", BESTBUY, "--min-clicks", "1", "--judged", judged,
                  "--out", tmp_path / "nb")
    assert result.returncode == 0, result.stderr.decode()
    lines = result.stdout.decode().splitlines()
    datasets = [i for i, line in enumerate(lines) if line.startswith("dataset: ")]
    assert len(datasets) == 4
    assert [lines[i - 1] for i in datasets] == ["NB at judged weight 10 (the default):", "NB at judged weight 1:",
                                               "NB at judged weight 3:", "NB at judged weight 30:"]


# Item 13e: a setting told apart as worse is said to be worse.

def test_a_setting_several_se_worse_is_called_worse_not_within_two_se() -> None:
    from qcat.training.selection.decide import decide, in_paired_se

    base = np.ones(400, dtype=bool)
    worse = base.copy()
    worse[:12] = False  # -12 of 400: about 3.5 paired SE worse
    decision = decide(["default", "worse"], [{"v": base}, {"v": worse}], {"v": 1.0}, default=0)
    row = decision.rows[1]
    size = f"{abs(row['difference']) / row['paired_se']:.1f}"
    assert float(size) > 3
    fixed = replace(decision, fixed=True).summary()  # qcat train hybrid with --cutoff/--blend/--long-backend given
    assert fixed.endswith(f"differs by -0.0300 ± {row['paired_se']:.4f} (worse by {size} paired SE)"), fixed
    assert "not more than" not in fixed
    kept = decision.summary()
    assert "cannot tell these apart" not in kept and "every other scores lower" in kept
    assert f"(worse by {size} paired SE)" in kept
    assert in_paired_se(0.05, 0.01) == "more than 2 paired SE"
    assert in_paired_se(0.014, 0.01) == "better by 1.4 paired SE, not more than 2"
    assert in_paired_se(-0.01, 0.01) == "worse by 1.0 paired SE"
    assert in_paired_se(0.0, 0.05) == "the same objective"
