"""Human-judged categories (issue 39): graded gold files, the judged figures against hand-computed
cases, and ``qcat evaluate --gold`` against a plain recount from the file and the model's answers."""

from __future__ import annotations

import csv
import json
import random

import numpy as np
import pytest

from qcat.errors import InputError
from qcat.measure.graded_gold import read_graded_gold
from qcat.measure.judged import (
    bootstrap_interval,
    figures,
    query_outcomes,
    segment_figures,
    segment_paired,
    subset,
    top_level_of,
)
from qcat.taxonomy import from_paths
from tests.test_own_data import one_line_error, qcat

TAXONOMY = from_paths(["Food > Juice", "Food > Cheese", "Toys > Cars", "Toys > Models"])
LEAF = {TAXONOMY.path_of(i).split(" > ")[-1]: i for i in TAXONOMY.leaves}


def test_outcomes_per_query_hand_computed() -> None:
    """Five queries, k = 2: 0 exact top-1; 1 acceptable top-1 and an ungraded second answer; 2 a
    wrong top-1 in Toys while only Food is acceptable (severe); 3 a wrong top-1 in Food beside an
    acceptable Food leaf (not severe); 4 a top-1 nobody graded; 5 a wrong top-1 where nothing is
    acceptable (no department to miss: not severe)."""
    juice, cheese, cars, models = (LEAF[n] for n in ("Juice", "Cheese", "Cars", "Models"))
    answers = [[juice, cheese], [cheese, cars], [cars, juice], [cheese, juice], [models], [cars, juice]]
    graded = [{juice: 3, cheese: 1}, {cheese: 2}, {cars: 0, juice: 3}, {cheese: 0, juice: 2}, {juice: 3},
              {cars: 0, juice: 1}]
    out = query_outcomes(answers, graded, top_level_of(TAXONOMY), 2)
    assert out["exact"].tolist() == [1, 0, 0, 0, 0, 0]
    assert out["acceptable"].tolist() == [1, 1, 0, 0, 0, 0]
    assert out["severe"].tolist() == [0, 0, 1, 0, 0, 0]
    assert out["precision"].tolist() == [0.5, 0.5, 0.5, 0.5, 0.0, 0.0]  # query 4: one answer, ungraded
    assert out["judged"].tolist() == [1, 1, 1, 1, 0, 1]
    assert out["top1_grade"][:4].tolist() == [3, 2, 0, 0] and np.isnan(out["top1_grade"][4])
    assert top_level_of(TAXONOMY)("nope") is None


def test_bootstrap_interval_depends_on_the_values_not_their_order() -> None:
    """The report takes queries in the store's order, a gold file in its own: same interval."""
    values = np.array([1, 0, 0, 1, 1, 0, 1, 1, 0, 0, 0, 1, 1])
    shuffled = values.copy()
    random.Random(3).shuffle(shuffled)
    assert bootstrap_interval(values) == bootstrap_interval(shuffled) == bootstrap_interval(np.sort(values)[::-1])
    low, high = bootstrap_interval(values)
    assert low < values.mean() < high
    assert bootstrap_interval(np.zeros(0)) != bootstrap_interval(np.zeros(0))  # NaN, NaN


def test_per_segment_figures_are_the_figures_of_each_segments_queries() -> None:
    outcomes = {name: np.array(values, dtype=float) for name, values in {
        "acceptable": [1, 0, 1, 1], "exact": [1, 0, 0, 1], "severe": [0, 1, 0, 0], "precision": [1, 0, .5, .5],
        "judged": [1, 1, 1, 0], "top1_grade": [3, 0, 2, np.nan]}.items()}
    outcomes |= {name + "_right": outcomes[name] for name in ("acceptable", "exact", "precision")}
    outcomes |= {"severe_wrong": outcomes["severe"], "ungraded_top1": np.zeros(4), "ungraded_topk": np.zeros(4),
                 "answered_topk": np.ones(4), "precision_cap": np.ones(4),
                 "top1": np.array(["a", "b", "c", None], dtype=object)}  # query 3: no answer
    segments = ["tail", "head", None, "tail"]
    by_segment = segment_figures(outcomes, segments)
    assert list(by_segment) == ["all", "head", "tail"]  # no torso query; query 2 only in all
    assert by_segment["all"] == figures(outcomes)
    assert by_segment["tail"] == figures(subset(outcomes, np.array([True, False, False, True])))
    assert by_segment["tail"]["exact"]["value"] == 1.0 and by_segment["tail"]["queries"] == 2
    better = dict(outcomes, top1_grade=np.array([3, 2, 1, 3.0]), exact=np.array([1, 0, 0, 1.0]),
                  top1=np.array(["a", "x", "y", "z"], dtype=object))
    paired = segment_paired(outcomes, better, segments)
    assert (paired["all"]["win"], paired["all"]["tie"], paired["all"]["loss"]) == (2, 1, 1)
    assert (paired["head"]["win"], paired["tail"]["win"]) == (1, 1)


@pytest.mark.parametrize(("text", "message"), [
    ("query\tcategory\tgrade\nbed\tc1\t3\nbed\tc2\t4\n", r"gold\.tsv:3: grade '4' is not a whole number in 0\.\.3 \(0 wrong"),
    ("# top_k: 3\nquery\tgrade\tsegment\nbed\t3\thead\n", r"gold\.tsv:2: missing column\(s\) category in the header"),
    ("query\tcategory\tgrade\nbed\tc1\t3\nbed\tc1\t2\n", r"gold\.tsv:3: query 'bed' grades category 'c1' 2 here and 3 on line 2"),
    ("query\tcategory\tgrade\tsegment\nbed\tc1\t3\tmiddle\n", r"gold\.tsv:2: segment 'middle' is not one of"),
    ("query\tcategory\tgrade\nbed\tc1\n", r"gold\.tsv:2: 2 fields where the header names 3"),
])
def test_bad_gold_lines_are_refused_naming_file_and_line(tmp_path, text, message) -> None:
    (tmp_path / "gold.tsv").write_text(text)
    with pytest.raises(InputError, match=message):
        read_graded_gold(tmp_path / "gold.tsv")


def test_categories_are_resolved_against_the_taxonomy_and_an_unknown_one_named_with_its_line(tmp_path) -> None:
    path = tmp_path / "gold.tsv"
    path.write_text(f"# top_k: 3\nquery\tcategory\tgrade\njuice\tFood > Juice\t3\njuice\t{LEAF['Cheese']}\t1\n"
                    f"cars\t{LEAF['Cars']}\t2\ncars\tToys > Kites\t0\n")
    gold = read_graded_gold(path)
    assert gold.top_k() == 3 and gold.queries == ["juice", "cars"]
    with pytest.raises(InputError, match=r"^--gold .*gold\.tsv:6: query 'cars': category 'Toys > Kites' is not in "
                                         r"the taxonomy"):
        gold.check_against(TAXONOMY)
    path.write_text(path.read_text().replace("Toys > Kites", "Toys > Models"))
    checked = read_graded_gold(path).check_against(TAXONOMY)
    assert checked.grades["juice"] == {LEAF["Juice"]: 3, LEAF["Cheese"]: 1}
    assert checked.where("cars", LEAF["Models"]).endswith("gold.tsv:6")


@pytest.mark.slow
def test_a_bad_gold_file_is_one_error_line_before_any_model_is_read(tmp_path) -> None:
    (tmp_path / "gold.tsv").write_text("query\tcategory\tgrade\nbed\tc1\tgood\n")
    line = one_line_error(qcat("evaluate", "--model", tmp_path / "none", "--gold", tmp_path / "gold.tsv"))
    assert "gold.tsv:2: grade 'good' is not a whole number in 0..3" in line
    assert "--gold-k is the k of --gold" in one_line_error(qcat("evaluate", "--model", tmp_path, "--gold-k", "3"))


def planted_gold(path, queries, answers, taxonomy, k: int) -> None:
    """Grades planted on the model's answers, by query position i (i % 5): 0 its top-1 exact and its
    second acceptable; 1 its top-1 acceptable, a leaf of another department exact; 2 its top-1 wrong
    and only another department's leaf acceptable (severe); 3 its top-1 wrong beside an acceptable
    leaf of its own department, its second related; 4 its top-1 ungraded. Segments by i % 3."""
    leaves = [leaf for leaf in taxonomy.leaves]
    department = {leaf: taxonomy.path_of(leaf).split(" > ")[0] for leaf in leaves}
    rows = []
    for i, (query, ranked) in enumerate(zip(queries, answers)):
        top = ranked[0]
        other_department = next(leaf for leaf in leaves if department[leaf] != department[top])
        same_department = next(leaf for leaf in leaves if department[leaf] == department[top] and leaf != top)
        second = ranked[1] if len(ranked) > 1 else None
        grades = [
            {top: 3} | ({second: 2} if second else {}),
            {top: 2, other_department: 3},
            {top: 0, other_department: 2},
            {top: 0, same_department: 2} | ({second: 1} if second and second != same_department else {}),
            {other_department: 3},
        ][i % 5]
        segment = ("head", "torso", "tail")[i % 3]
        rows += [f"{query}\t{category}\t{grade}\t{segment}\t{taxonomy.path_of(category)}"
                 for category, grade in grades.items()]
    path.write_text(f"# top_k: {k}\n# session: planted\nquery\tcategory\tgrade\tsegment\tcategory_path\n"
                    + "\n".join(rows) + "\n")


def recount(path, answers_of: dict, taxonomy, k: int, only: str | None = None) -> dict[str, list[float]]:
    """The judged figures' per-query values in plain Python, from the file's rows."""
    grades, segment = {}, {}
    with open(path, encoding="utf-8") as handle:
        for row in csv.DictReader((line for line in handle if not line.startswith("#")), delimiter="\t"):
            grades.setdefault(row["query"], {})[row["category"]] = int(row["grade"])
            segment[row["query"]] = row["segment"]
    top_of = lambda c: taxonomy.path_of(c).split(" > ")[0]  # noqa: E731
    out = {"exact": [], "acceptable": [], "severe": [], "precision": [], "judged": []}
    for query, graded in grades.items():
        if only and segment[query] != only:
            continue
        ranked = answers_of[query]
        top = ranked[0] if ranked else None
        grade = graded.get(top)
        out["exact"].append(float(grade == 3))
        out["acceptable"].append(float(grade is not None and grade >= 2))
        out["judged"].append(float(grade is not None))
        good = {top_of(c) for c, g in graded.items() if g >= 2}
        out["severe"].append(float(grade == 0 and bool(good) and top_of(top) not in good))
        out["precision"].append(sum(graded.get(c, 0) >= 2 for c in ranked[:k]) / k)
    return out


@pytest.mark.slow
def test_qcat_evaluate_gold_is_a_plain_recount_from_the_file_and_the_models_answers(tmp_path) -> None:
    """Two NB models (trained on two seeds of a small generated log) scored against grades planted
    on the first one's answers to the log's test queries: the printed line and the report's figures
    equal a plain recount, per segment, with intervals that do not depend on the order of queries."""
    from qcat.classifier import load_model
    from qcat.taxonomy import load_taxonomy
    from qcat.training.data.corpus import LogCorpus
    from tests.test_decide import small_log

    (tmp_path / "other").mkdir()
    log, taxonomy_file = small_log(tmp_path)
    other_log, _ = small_log(tmp_path / "other", seed=1)
    for data, out in ((log, "nb"), (other_log, "nb2")):
        trained = qcat("train", "nb", "--log", data, "--taxonomy", taxonomy_file, "--min-clicks", "1",
                       "--out", tmp_path / out)
        assert trained.returncode == 0, trained.stderr.decode()
    taxonomy = load_taxonomy(taxonomy_file)
    queries = list(LogCorpus(log, taxonomy_file, 1, 0, "other").dataset().test.queries)
    k = 3

    def answers(directory) -> dict[str, list[str]]:
        model = load_model(directory)
        rows = model.predict(queries, k).labels
        return {q: [model.labels[i] for i in row if i >= 0] for q, row in zip(queries, rows)}

    first, second = answers(tmp_path / "nb"), answers(tmp_path / "nb2")
    gold = tmp_path / "gold.tsv"
    planted_gold(gold, queries, [first[q] for q in queries], taxonomy, k)

    result = qcat("evaluate", "--model", tmp_path / "nb", "--model", tmp_path / "nb2", "--log", log,
                  "--taxonomy", taxonomy_file, "--gold", gold, "--out", tmp_path / "report")
    assert result.returncode == 0, result.stderr.decode()
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    assert report["gold"]["k"] == k and report["gold"]["k_from"] == "the file's # top_k"
    assert report["gold"]["queries"] == len(queries) and report["gold"]["session"] == "planted"
    for model, answers_of in zip(report["models"], (first, second)):
        assert list(model["gold"]) == ["all", "head", "torso", "tail"]
        for segment in ("all", "head", "torso", "tail"):
            plain = recount(gold, answers_of, taxonomy, k, None if segment == "all" else segment)
            for name, values in plain.items():
                got = model["gold"][segment][name]
                assert got["value"] == pytest.approx(sum(values) / len(values)), (model["name"], segment, name)
                assert (got["low"], got["high"]) == pytest.approx(bootstrap_interval(np.array(values[::-1])))
    planted = report["models"][0]["gold"]["all"]
    n = len(queries)
    assert planted["exact"]["value"] == pytest.approx(len(range(0, n, 5)) / n)  # the plan: i % 5 == 0
    assert planted["severe"]["value"] == pytest.approx(len(range(2, n, 5)) / n)
    assert planted["judged"]["value"] == pytest.approx(1 - len(range(4, n, 5)) / n)
    # Wins, ties and losses of the second model by its top-1's grade (the same top-1 a tie; no answer
    # below wrong); two different top-1s of which one was never graded are no evidence: "ungraded".
    grades = {}
    for row in csv.DictReader((line for line in gold.open() if not line.startswith("#")), delimiter="\t"):
        grades.setdefault(row["query"], {})[row["category"]] = int(row["grade"])
    top = lambda answer, q: answer[q][0] if answer[q] else None  # noqa: E731
    score = lambda answer, q: grades[q].get(top(answer, q), -1)  # noqa: E731
    paired = report["models"][1]["gold_paired"]["all"]
    difference = [0 if top(second, q) == top(first, q) else
                  "ungraded" if any(top(a, q) is not None and top(a, q) not in grades[q] for a in (first, second))
                  else np.sign(score(second, q) - score(first, q)) for q in queries]
    assert (paired["win"], paired["tie"], paired["loss"], paired["ungraded"]) == (
        difference.count(1), difference.count(0), difference.count(-1), difference.count("ungraded"))
    assert paired["ungraded"] > 0  # the plan's fifth queries: the first model's top-1 nobody graded
    # Printed on stdout, one line per model and one against the first; the report's table.
    stdout = result.stdout.decode()
    assert (f"nb: human-judged (gold.tsv, {n} queries, top {k}; 0 of {n} queries seen in training (0.0%)): top-1 "
            f"strict {planted['exact']['value']:.4f}") in stdout
    assert f"nb2 vs nb: human-judged top-1 wins {paired['win']}, ties {paired['tie']}" in stdout
    markdown = (tmp_path / "report" / "report.md").read_text()
    assert "### Human-judged categories (gold.tsv)" in markdown and "differences against nb" in markdown
    assert "Human-judged categories (gold.tsv)" in (tmp_path / "report" / "report.html").read_text()
    # A category the taxonomy lacks: one line naming the file, line and category.
    lines = gold.read_text().splitlines()
    cells = lines[5].split("\t")
    lines[5] = "\t".join([cells[0], "no-such-leaf", *cells[2:]])
    gold.write_text("\n".join(lines) + "\n")
    line = one_line_error(qcat("evaluate", "--model", tmp_path / "nb", "--log", log, "--taxonomy", taxonomy_file,
                               "--gold", gold, "--out", tmp_path / "report"))
    assert "gold.tsv:6: query" in line and "category 'no-such-leaf' is not in the evaluation's taxonomy" in line
