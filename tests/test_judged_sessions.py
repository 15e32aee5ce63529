"""Category sessions and their figures say what they rest on (issue 45 items 2-5, 14, 17; issue 46
item 2.6): seeds and bootstrap draws checked at parse time, all-digit names refused, a session drawn
from a user's log with internal nodes (the Other leaves qcat evaluate adds), drawn outside the
models' training queries by default, and every human-judged figure with how many of its queries each
model trained on and how many of its answers nobody graded."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from judging_fixtures import qcat

from tests.test_judging_categories import category_db  # noqa: F401  (a fixture)

from qcat.judging.commands.parsers import judge_parser

SEED_2_70 = str(2**70)


def user_error(result) -> str:
    """The one ``qcat: error:`` line of a refused command (exit 2)."""
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1 and lines[0].startswith("qcat: error: "), lines
    return lines[0]


# ---- item 2: seeds the store cannot keep

def test_a_seed_beyond_the_stores_integer_is_refused_at_parse_time(tmp_path) -> None:
    parser = judge_parser()
    assert parser.parse_args(["create-session", "--seed", str(2**31 - 1)]).seed == 2**31 - 1
    assert parser.parse_args(["report", "s", "--seed", str(2**31 - 1)]).seed == 2**31 - 1
    for argv in (["create-session", "--kind", "categories", "--model", "m", "--traffic", "t.txt", "--seed", SEED_2_70],
                 ["create-session", "--seed", str(2**31)], ["report", "s", "--seed", SEED_2_70]):
        with pytest.raises(Exception, match=r"--seed: must be in 0\.\.2,147,483,647 .*32-bit"):
            parser.parse_args(argv)
    # From the command line: one line, exit 2, before any model or file is read.
    line = user_error(qcat("judge", "create-session", "--kind", "categories", "--model", tmp_path / "none",
                           "--traffic", tmp_path / "none.txt", "--seed", SEED_2_70, "--url", tmp_path / "j.db"))
    assert "--seed" in line and SEED_2_70 in line


# ---- item 17: a name that reads as a session id

@pytest.mark.slow
def test_an_all_digit_session_name_is_refused_saying_why(tmp_path) -> None:
    for name in ("1", " 12 "):
        line = user_error(qcat("judge", "create-session", "--kind", "categories", "--model", tmp_path / "none",
                               "--traffic", tmp_path / "none.txt", "--name", name, "--url", tmp_path / "j.db"))
        assert "--name" in line and "all digits" in line and f"would open session id {name.strip()}" in line
        assert f"'run {name.strip()}'" in line
    assert judge_parser().parse_args(["create-session", "--name", "run 1"]).name == "run 1"


@pytest.mark.slow
def test_include_training_queries_applies_to_sessions_drawn_from_a_log(tmp_path) -> None:
    line = user_error(qcat("judge", "create-session", "--baseline", tmp_path / "a", "--target", tmp_path / "b",
                           "--include-training-queries", "--url", tmp_path / "j.db"))
    assert "--include-training-queries applies to --kind categories only" in line
    line = user_error(qcat("judge", "create-session", "--kind", "categories", "--model", tmp_path / "a", "--traffic",
                           tmp_path / "t.txt", "--include-training-queries", "--url", tmp_path / "j.db"))
    assert "--include-training-queries applies to queries drawn from a click log" in line


# ---- item 3: too few bootstrap draws

@pytest.mark.slow
def test_too_few_bootstrap_draws_are_refused_saying_how_many(tmp_path) -> None:
    parser = judge_parser()
    assert parser.parse_args(["report", "s", "--bootstrap", "0"]).bootstrap == 0
    assert parser.parse_args(["report", "s", "--bootstrap", "40"]).bootstrap == 40
    for draws in ("1", "39"):
        line = user_error(qcat("judge", "report", "s", "--bootstrap", draws, "--url", tmp_path / "j.db"))
        assert f"--bootstrap: {draws} draws cannot give a 95% interval: give at least 40" in line


# ---- items 4 and 5: a session drawn from the user's own log

def log_with_internal_nodes(directory: Path) -> tuple[Path, Path]:
    """test_decide's small log plus rows that name department d0 itself (an internal node), which
    the default internal-node rule trains as the leaf d0/other."""
    from tests.test_decide import small_log

    log, taxonomy = small_log(directory)
    rows = [f"ws{i} dept thing,d0,3" for i in range(5)] * 4
    log.write_text(log.read_text() + "\n".join(rows) + "\n")
    return log, taxonomy


@pytest.fixture(scope="module")
def own_log(tmp_path_factory):
    root = tmp_path_factory.mktemp("own")
    log, taxonomy = log_with_internal_nodes(root)
    trained = qcat("train", "nb", "--log", log, "--taxonomy", taxonomy, "--min-clicks", "1", "--out", root / "nb")
    assert trained.returncode == 0, trained.stderr
    return root, log, taxonomy, root / "nb"


def training_queries(log: Path, taxonomy: Path) -> set[str]:
    """The log's train and validation queries (what an NB model trained on it saw), from the split itself."""
    from qcat.training.data.corpus import LogCorpus

    dataset = LogCorpus(log, taxonomy, 1, 0, "other").dataset()
    return {str(q) for part in (dataset.train, dataset.validation) for q in part.queries}


def session_rows(db: Path, session_id: int) -> tuple[list[str], dict]:
    with sqlite3.connect(db) as con:
        texts = [row[0] for row in con.execute("select text from session_queries where session_id = ?", (session_id,))]
        settings = json.loads(con.execute("select settings from judging_sessions where id = ?",
                                          (session_id,)).fetchone()[0])
    return texts, settings


@pytest.mark.slow
def test_a_session_from_a_log_naming_internal_nodes_leaves_out_the_training_queries(own_log) -> None:
    """Item 4: the model trained on this very log answers d0/other, a leaf the session's taxonomy
    must have (it was refused as 'lacked by the corpus taxonomy'). Item 5: by default no query of the
    session is one the model trained on, the output says how many were left out, and the stored stats
    record it; --include-training-queries keeps them and records how many are in."""
    root, log, taxonomy, nb = own_log
    db = root / "sessions.db"
    assert qcat("db", "upgrade", "--url", db).returncode == 0
    result = qcat("judge", "create-session", "--kind", "categories", "--model", nb, "--log", log, "--taxonomy", taxonomy,
                  "--queries", "60", "--judges-per-query", "1", "--name", "held out", "--url", db)
    assert result.returncode == 0, result.stderr
    trained = training_queries(log, taxonomy)
    with sqlite3.connect(db) as con:
        log_queries = {row[0] for row in con.execute("select distinct text from session_queries")}
    texts, settings = session_rows(db, 1)
    assert texts and not set(texts) & trained
    from qcat.training.data.corpus import LogCorpus
    from qcat.evaluation.golden.query_sets import log_demand

    every = {str(q) for q in log_demand(LogCorpus(log, taxonomy, min_clicks=1)).queries}
    left_out = len(every & trained)
    assert settings["training_queries"] == "left out" and sum(settings["training_left_out"].values()) == left_out
    assert settings["seen_in_training"] == [{"queries": len(texts), "seen": 0, "seen_queries": []}]
    assert f"left out {left_out:,} queries that a model trained on" in result.stderr
    assert f"{nb}: 0 of the session's {len(texts)} queries seen in training" in result.stderr
    assert log_queries == set(texts)
    kept = qcat("judge", "create-session", "--kind", "categories", "--model", nb, "--log", log, "--taxonomy", taxonomy,
                "--queries", "60", "--judges-per-query", "1", "--name", "with training", "--include-training-queries",
                "--url", db)
    assert kept.returncode == 0, kept.stderr
    texts, settings = session_rows(db, 2)
    seen = sorted(set(texts) & trained)
    assert 0 < len(seen) < len(texts)
    assert settings["training_queries"] == "included"
    assert settings["seen_in_training"][0]["seen"] == len(seen) and sorted(settings["seen_in_training"][0]["seen_queries"]) == seen
    assert f"{nb}: {len(seen)} of the session's {len(texts)} queries seen in training" in kept.stderr
    assert "left out" not in kept.stderr


def grade_all(db: Path, session_id: int, grade_of) -> None:
    """One judge 'ann' grades every query of the session: ``grade_of(query_id, category)``."""
    from qcat.judging.grading import assignment, judgments
    from qcat.judging.grading.judges import find_judge
    from qcat.judging.store.connection import open_store

    assert qcat("judge", "add-judge", "ann", "--url", db).returncode in (0, 2)
    store = open_store(str(db))
    try:
        with store.sessions() as session:
            judge_id = find_judge(session, "ann").id
        while (shown := assignment.next_query(store, judge_id, session_id)) is not None:
            judgments.submit(store, judge_id, shown.query_id,
                             {(i.listing_id, "left"): grade_of(shown.query_id, i.listing_id) for i in shown.left},
                             resubmit=False)
    finally:
        store.dispose()


@pytest.mark.slow
def test_judged_figures_say_how_many_queries_each_model_trained_on(own_log) -> None:
    """Item 5: a session that keeps the training queries; the report (json, md) and qcat evaluate
    --gold on its export give the same 'N of M seen in training', N counted from the log's split."""
    root, log, taxonomy, nb = own_log
    db = root / "seen.db"
    assert qcat("db", "upgrade", "--url", db).returncode == 0
    made = qcat("judge", "create-session", "--kind", "categories", "--model", nb, "--log", log, "--taxonomy", taxonomy,
                "--queries", "30", "--judges-per-query", "1", "--include-training-queries", "--name", "seen",
                "--url", db)
    assert made.returncode == 0, made.stderr
    grade_all(db, 1, lambda query_id, category: (query_id + len(category)) % 4)
    texts, _ = session_rows(db, 1)
    seen = len(set(texts) & training_queries(log, taxonomy))
    assert 0 < seen < len(texts)
    out = root / "report"
    result = qcat("judge", "report", "seen", "--url", db, "--out", out, "--bootstrap", "0")
    assert result.returncode == 0, result.stderr
    report = json.loads((out / "report.json").read_text())
    overall = report["segments"][0]
    assert overall["segment"] == "all"
    assert overall["models"]["baseline"]["seen_in_training"] == {
        "queries": len(texts), "seen": seen, "share": pytest.approx(seen / len(texts))}
    markdown = (out / "report.md").read_text()
    assert f"| {seen} of {len(texts)} ({100 * seen / len(texts):.1f}%) |" in markdown
    assert "Drawn with the models' training queries (--include-training-queries)" in markdown
    # item 3: --bootstrap 0 says there are no intervals, and the plot has no bars
    assert "(%, no intervals: --bootstrap 0)" in markdown and "95% bootstrap interval" not in markdown
    gold = root / "seen-gold.tsv"
    assert qcat("judge", "export", "seen", "--url", db, "--gold", gold).returncode == 0
    evaluated = qcat("evaluate", "--model", nb, "--log", log, "--taxonomy", taxonomy, "--gold", gold,
                     "--out", root / "evaluated")
    assert evaluated.returncode == 0, evaluated.stderr
    line = next(line for line in evaluated.stdout.splitlines() if "human-judged" in line)
    assert f"top 3; {seen} of {len(texts)} queries seen in training ({seen / len(texts):.1%}))" in line
    block = json.loads((root / "evaluated" / "report.json").read_text())
    assert block["gold"]["seen_in_training"]["nb"]["seen"] == seen
    assert block["models"][0]["gold"]["all"]["seen_in_training"]["seen"] == seen


# ---- issue 46 item 2.6: the taxonomy a second model is checked against

@pytest.mark.slow
def test_a_second_model_on_another_taxonomy_is_refused_naming_the_first_models(own_log) -> None:
    from tests.test_judging_categories import NB, write_traffic

    root, _, _, nb = own_log
    assert qcat("db", "upgrade", "--url", root / "mismatch.db").returncode == 0
    line = user_error(qcat("judge", "create-session", "--kind", "categories", "--model", NB, "--model", nb,
                           "--traffic", write_traffic(root / "traffic.csv"), "--url", root / "mismatch.db"))
    assert f"model {nb} predicts categories that the first model's taxonomy ({NB}) lacks" in line
    assert "corpus" not in line


# ---- item 14: figures with answers nobody graded

@pytest.mark.slow
def test_evaluate_gold_prints_bounds_and_the_answers_nobody_graded(own_log) -> None:
    """Grades planted on the model's answers to the log's test queries (test_judged_gold.planted_gold:
    every fifth query's top-1 is never graded, its second answer never either). The printed line gives
    lenient with its bounds (ungraded as wrong = the figure, as right = the figure + the ungraded
    share), severe's bounds, P@3's cap and how many top answers nobody graded, counted by hand here."""
    from qcat.classifier import load_model
    from qcat.taxonomy import load_taxonomy
    from qcat.training.data.corpus import LogCorpus
    from tests.test_judged_gold import planted_gold

    root, log, taxonomy_file, nb = own_log
    queries = [str(q) for q in LogCorpus(log, taxonomy_file, 1, 0, "other").dataset().test.queries]
    model = load_model(nb)
    answers = [[model.labels[i] for i in row if i >= 0] for row in model.predict(queries, 3).labels]
    taxonomy = load_taxonomy(taxonomy_file)
    taxonomy = taxonomy.with_other_leaves(["d0"])[0]  # the model answers d0/other too
    gold = root / "planted.tsv"
    planted_gold(gold, queries, answers, taxonomy, 3)
    result = qcat("evaluate", "--model", nb, "--log", log, "--taxonomy", taxonomy_file, "--gold", gold,
                  "--out", root / "planted")
    assert result.returncode == 0, result.stderr
    line = next(line for line in result.stdout.splitlines() if "human-judged" in line)
    n = len(queries)
    ungraded_top1 = len(range(4, n, 5))
    graded = {}
    for row in gold.read_text().splitlines()[3:]:
        query, category, grade = row.split("\t")[:3]
        graded.setdefault(query, {})[category] = int(grade)
    ungraded_topk = sum(c not in graded[q] for q, ranked in zip(queries, answers) for c in ranked[:3])
    answered = sum(len(ranked[:3]) for ranked in answers)
    assert f"never graded: {ungraded_top1} of {n} top-1, {ungraded_topk} of {answered} top-3 answers" in line
    lenient = sum(graded[q].get(ranked[0], -1) >= 2 for q, ranked in zip(queries, answers)) / n
    assert f"lenient {lenient:.4f} [" in line
    assert f"(ungraded as wrong {lenient:.4f}, as right {lenient + ungraded_top1 / n:.4f})" in line
    capped = sum(sum(g >= 2 for g in graded[q].values()) < 3 for q in queries)
    cap = sum(min(3, sum(g >= 2 for g in graded[q].values())) for q in queries) / (3 * n)
    assert f"(at most {cap:.4f}: {capped} of {n} queries have fewer than 3 categories graded acceptable)" in line
    markdown = (root / "planted" / "report.md").read_text()
    assert f"{ungraded_top1} of {n} / {ungraded_topk} of {answered}" in markdown


# ---- item 3: the report without intervals, and a plot whose interval misses its mean

@pytest.mark.slow
def test_bootstrap_0_reports_figures_without_intervals_and_says_so(category_db, tmp_path) -> None:  # noqa: F811
    from tests.test_judging_categories import graded_copy

    copy = graded_copy(category_db[0], tmp_path)
    result = qcat("judge", "report", "shipped vs nb", "--url", copy, "--out", tmp_path / "r", "--bootstrap", "0")
    assert result.returncode == 0, result.stderr
    markdown = (tmp_path / "r" / "report.md").read_text()
    assert "### Human-judged top-1 per model and query set (%, no intervals: --bootstrap 0)" in markdown
    assert "(points, no intervals: --bootstrap 0)" in markdown and "No intervals (--bootstrap 0)." in markdown
    assert "95% bootstrap interval" not in markdown and "with 95% intervals" not in markdown
    assert "![Top-1 acceptable, exact and severe by query set (no intervals: --bootstrap 0)]" in markdown
    assert "| 0 of 6 / 0 of " in markdown  # no answer of the session's own models went ungraded


def test_the_plot_never_draws_a_negative_error_bar() -> None:
    """A percentile interval need not hold its mean (1 draw: low = high = one resample's mean, here
    above the figure); the plot clips the bar at the figure instead of failing."""
    from qcat.judging.reporting.categories import figure_plot

    cell = {"value": 0.5, "low": 0.6, "high": 0.7}
    report = {"segments": [{"segment": "all", "models": {"baseline": {"acceptable": cell, "exact": cell,
                                                                      "severe": cell}}}],
              "session": {"models": {"baseline": "m"}}, "options": {"bootstrap": 1000}}
    assert figure_plot(report).lstrip().startswith("<")
