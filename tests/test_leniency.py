"""Confusable maps and the strict / lenient / severe figures, against hand-computed cases."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp

from qcat.errors import InputError
from qcat.measure.leniency import Leniency, leniency_summary, top1_outcomes
from qcat.measure.metrics import Matched
from qcat.taxonomy import from_paths
from qcat.taxonomy.confusable import ConfusableMap, load_confusable, recorded_map

# Two departments: Food (juice, fridge, cheese) and Toys (cars, models).
TAXONOMY = from_paths(["Food > Juice", "Food > Fridge", "Food > Cheese", "Toys > Cars", "Toys > Models"])
LEAF = {TAXONOMY.path_of(i).split(" > ")[-1]: i for i in TAXONOMY.leaves}
LABELS = [LEAF[name] for name in ("Juice", "Fridge", "Cheese", "Cars", "Models")]  # truth columns 0..4
MAP = ConfusableMap(((LEAF["Juice"], LEAF["Fridge"]), (LEAF["Models"], LEAF["Cars"])), "hand", "0" * 64)


@pytest.fixture()
def six_queries() -> Matched:
    """Gold and top-1 (score) per query:
    0 Juice -> Juice (0.9): right.  1 Juice -> Fridge (0.8): confusable.  2 Cheese -> Fridge (0.3):
    wrong, same department.  3 Cars -> Cheese (0.7): severe, confident.  4 Models -> Juice (0.2):
    severe, not confident.  5 {Cars, Cheese} -> Juice (0.6): wrong, not severe (Cheese is Food).
    6 has no true category: skipped."""
    truth = sp.csr_matrix(([1, 1, 1, 1, 1, 2, 1], ([0, 1, 2, 3, 4, 5, 5], [0, 0, 2, 3, 4, 3, 2])), shape=(7, 5))
    labels = np.array([[0, 1], [1, 0], [1, 2], [2, 3], [0, 4], [0, 3], [3, 0]])
    scores = np.array([[0.9, 0.1], [0.8, 0.2], [0.3, 0.2], [0.7, 0.1], [0.2, 0.1], [0.6, 0.3], [0.9, 0.1]])
    return Matched.build(labels, scores, truth)


def test_outcomes_per_query_hand_computed(six_queries) -> None:
    outcome = top1_outcomes(six_queries, Leniency.build(LABELS, TAXONOMY, MAP))
    assert outcome["strict"].tolist() == [True, False, False, False, False, False]
    assert outcome["lenient"].tolist() == [True, True, False, False, False, False]
    assert outcome["severe"].tolist() == [False, False, False, True, True, False]
    assert outcome["confident"].tolist() == [True, True, False, True, False, True]


def test_summary_means_and_standard_errors(six_queries) -> None:
    summary = leniency_summary(six_queries, Leniency.build(LABELS, TAXONOMY, MAP))
    se = lambda p, n: math.sqrt(p * (1 - p) * n / (n - 1) / n)  # noqa: E731  sample sd / sqrt(n)
    assert summary["top-1 strict"] == pytest.approx(1 / 6)
    assert summary["top-1 strict SE"] == pytest.approx(se(1 / 6, 6))
    assert summary["top-1 lenient"] == pytest.approx(2 / 6)
    assert summary["top-1 lenient SE"] == pytest.approx(se(2 / 6, 6))
    assert summary["severe"] == pytest.approx(2 / 6)
    # Confident answers (>= 0.5): queries 0, 1, 3, 5; of them only 3 is severe.
    assert summary["severe confident"] == pytest.approx(1 / 4)
    assert summary["severe confident SE"] == pytest.approx(se(1 / 4, 4))
    assert summary["confident share"] == pytest.approx(4 / 6)


def test_without_a_map_lenient_is_not_reported_and_severe_still_is(six_queries) -> None:
    summary = leniency_summary(six_queries, Leniency.build(LABELS, TAXONOMY))
    assert summary["top-1 lenient"] is None and summary["top-1 lenient SE"] is None
    assert summary["severe"] == pytest.approx(2 / 6)


def test_pairs_are_not_transitive() -> None:
    chain = ConfusableMap(((LEAF["Juice"], LEAF["Fridge"]), (LEAF["Fridge"], LEAF["Cheese"])), "chain", "1" * 64)
    truth = sp.csr_matrix(([1], ([0], [0])), shape=(1, 5))  # Juice
    matched = Matched.build(np.array([[2]]), np.array([[0.9]]), truth)  # answers Cheese
    assert top1_outcomes(matched, Leniency.build(LABELS, TAXONOMY, chain))["lenient"].tolist() == [False]


def test_map_file_reading(tmp_path) -> None:
    path = tmp_path / "confusable.tsv"
    path.write_text(f"leaf_a\tleaf_b\tpath_a\n# a comment\n{LEAF['Fridge']}\t{LEAF['Juice']}\tx\n"
                    f"{LEAF['Juice']}\t{LEAF['Fridge']}\n")
    read = load_confusable(path, TAXONOMY)
    assert read.pairs == (tuple(sorted((LEAF["Juice"], LEAF["Fridge"]))),)  # one unordered pair
    assert read.partners(LEAF["Juice"]) == (LEAF["Fridge"],)
    assert len(read.sha256) == 64
    again = ConfusableMap.from_config(read.to_config(), "bundle")
    assert again.pairs == read.pairs and again.sha256 == read.sha256

    class Bundle:
        config = {"confusable": read.to_config()}

    assert recorded_map(Bundle()).pairs == read.pairs


@pytest.mark.parametrize(("text", "message"), [
    ("c9\n", r"map\.tsv:1: 1 field, want 2 \(leaf_a, leaf_b, \.\.\.\)"),
    ("LEAF\tLEAF\n", "with itself"),
    ("nope\tLEAF\n", "'nope' is not a category"),
    ("TOP\tLEAF\n", "is not a leaf"),
])
def test_bad_map_lines_are_refused_naming_the_line(tmp_path, text, message) -> None:
    top = next(i for i in TAXONOMY.ids if not TAXONOMY.is_leaf(i))
    (tmp_path / "map.tsv").write_text(text.replace("TOP", top).replace("LEAF", LEAF["Juice"]))
    with pytest.raises(InputError, match=message):
        load_confusable(tmp_path / "map.tsv", TAXONOMY)


@pytest.mark.parametrize("text", ["", "leaf_a\tleaf_b\n", "# qcat data audit: 0 pairs\nleaf_a\tleaf_b\tpath_a\n# x\n"])
def test_a_map_holding_no_pair_is_refused_unless_asked_for(tmp_path, text) -> None:
    """Issue 53 item 4: an empty or header-only --confusable map made lenient silently equal strict."""
    (tmp_path / "map.tsv").write_text(text)
    with pytest.raises(InputError, match=r"^--confusable .*map\.tsv: holds no pair .*lenient top-1 would equal strict"):
        load_confusable(tmp_path / "map.tsv", TAXONOMY)
    assert load_confusable(tmp_path / "map.tsv", TAXONOMY, allow_empty=True).pairs == ()  # an audit's own read-back


def test_missing_map_file_is_one_line(tmp_path) -> None:
    with pytest.raises(InputError, match="no such file"):
        load_confusable(tmp_path / "none.tsv")


@pytest.mark.slow
def test_qcat_evaluate_prints_and_reports_them_as_a_plain_recount(tmp_path) -> None:
    """On a small generated log: the report's strict, lenient and severe top-1 equal a recount
    in plain Python over the test split, and the command prints them with their SEs."""
    import json

    from qcat.classifier import load_model
    from qcat.taxonomy import load_taxonomy
    from qcat.training.data.corpus import LogCorpus
    from tests.test_decide import small_log
    from tests.test_own_data import qcat

    log, taxonomy_file = small_log(tmp_path)
    pairs = [("d0l0", "d0l1"), ("d1l2", "d1l3"), ("d2l0", "d2l3")]
    (tmp_path / "map.tsv").write_text("".join(f"{a}\t{b}\n" for a, b in pairs))
    trained = qcat("train", "nb", "--log", log, "--taxonomy", taxonomy_file, "--min-clicks", "1",
                   "--confusable", tmp_path / "map.tsv", "--out", tmp_path / "nb")
    assert trained.returncode == 0, trained.stderr.decode()
    # No --confusable: the map the bundle recorded.
    result = qcat("evaluate", "--model", tmp_path / "nb", "--log", log, "--taxonomy", taxonomy_file,
                  "--out", tmp_path / "report", "--json")
    assert result.returncode == 0, result.stderr.decode()
    report = json.loads(result.stdout)
    figures = report["models"][0]["segments"]["all"]
    assert report["models"][0]["confusable"]["pairs"] == 3
    assert report["models"][0]["confusable"]["origin"] == "recorded in the bundle"

    taxonomy = load_taxonomy(taxonomy_file)
    test = LogCorpus(log, taxonomy_file, 1, 0, "other").dataset().test
    model = load_model(tmp_path / "nb")
    top = model.predict(list(test.queries), 1).labels[:, 0]
    credited = {frozenset(p) for p in pairs}
    strict = lenient = severe = 0
    for q, query in enumerate(test.queries):
        truth = {test.categories[test.pair_category[i]] for i in range(len(test.pair_query)) if test.pair_query[i] == q}
        answer = model.labels[top[q]] if top[q] >= 0 else None
        strict += answer in truth
        lenient += answer in truth or any(frozenset((answer, t)) in credited for t in truth)
        severe += answer is not None and answer not in truth and all(
            taxonomy.path_of(answer).split(" > ")[0] != taxonomy.path_of(t).split(" > ")[0] for t in truth)
    n = len(test.queries)
    assert figures["top-1 strict"] == pytest.approx(strict / n) == pytest.approx(figures["PR@1"])
    assert figures["top-1 lenient"] == pytest.approx(lenient / n)
    assert figures["severe"] == pytest.approx(severe / n)
    assert lenient > strict  # the map credits something here
    p = lenient / n
    assert figures["top-1 lenient SE"] == pytest.approx(math.sqrt(p * (1 - p) / (n - 1)))
    err = result.stderr.decode()
    assert f"top-1 strict {strict / n:.4f} ± " in err and f"lenient {lenient / n:.4f} ± " in err
    markdown = (tmp_path / "report" / "report.md").read_text()
    assert "Strict, lenient and severe top-1" in markdown and "map.tsv (3 pairs, sha256" in markdown


@pytest.mark.slow
def test_a_bad_map_fails_before_training(tmp_path) -> None:
    from tests.test_own_data import one_line_error, qcat

    (tmp_path / "bad.tsv").write_text("c1\n")
    for path, message in ((tmp_path / "none.tsv", "no such file"), (tmp_path / "bad.tsv", "bad.tsv:1: 1 field, want 2 (leaf_a, leaf_b, ...)")):
        error = one_line_error(qcat("train", "nb", "--confusable", path, "--out", tmp_path / "m"))
        assert message in error and str(path) in error
        assert not (tmp_path / "m").exists()


def test_no_confident_answer_prints_a_dash_not_nan(six_queries) -> None:
    """Issue 45, item 15: with no answer scored at least the threshold, the line says "–" (as
    report.md does), not "nan ± nan"; a figure of one query has no SE and prints without one."""
    from qcat.evaluation.evaluate import leniency_line

    line = leniency_line(leniency_summary(six_queries, Leniency.build(LABELS, TAXONOMY, MAP), confident=0.95))
    assert "nan" not in line
    assert line.endswith("; severe 0.3333 ± 0.2108, severe among answers scored >= 0.5 – (0.0% of queries)")
    one = leniency_summary(six_queries, Leniency.build(LABELS, TAXONOMY, MAP), confident=0.85)  # query 0 alone
    assert leniency_line(one).endswith("severe among answers scored >= 0.5 0.0000 (16.7% of queries)")


def test_severe_excludes_an_answer_the_map_credits() -> None:
    """Issue 45, item 9: a map pair across departments (Food > Juice with Toys > Cars) credits
    "Cars" for a Juice query as lenient; it is then not severe too. Without the map it is severe."""
    cross = ConfusableMap(((LEAF["Juice"], LEAF["Cars"]),), "hand", "0" * 64)
    truth = sp.csr_matrix(([1, 1], ([0, 1], [0, 2])), shape=(2, 5))  # Juice; Cheese
    matched = Matched.build(np.array([[3], [3]]), np.array([[0.9], [0.9]]), truth)  # both answered Cars
    credited = top1_outcomes(matched, Leniency.build(LABELS, TAXONOMY, cross))
    assert credited["lenient"].tolist() == [True, False]
    assert credited["severe"].tolist() == [False, True]
    assert not (credited["lenient"] & credited["severe"]).any()
    assert top1_outcomes(matched, Leniency.build(LABELS, TAXONOMY))["severe"].tolist() == [True, True]
    summary = leniency_summary(matched, Leniency.build(LABELS, TAXONOMY, cross))
    assert (summary["top-1 strict"], summary["top-1 lenient"], summary["severe"]) == (0.0, 0.5, 0.5)


def test_partners_are_the_other_leaf_of_each_pair_naming_it():
    from qcat.taxonomy.confusable import ConfusableMap

    pairs = [("b", "a"), ("a", "c"), ("c", "d"), ("a", "b")]  # a repeated pair, in either order, counts once
    confusable = ConfusableMap(tuple(pairs), "hand-made", "0" * 64)
    assert confusable.pairs == (("a", "b"), ("a", "c"), ("c", "d"))
    by_scan = {leaf: tuple(b if a == leaf else a for a, b in confusable.pairs if leaf in (a, b)) for leaf in "abcde"}
    assert {leaf: confusable.partners(leaf) for leaf in "abcde"} == by_scan == {
        "a": ("b", "c"), "b": ("a",), "c": ("a", "d"), "d": ("c",), "e": ()}
    assert confusable == ConfusableMap((("a", "c"), ("c", "d"), ("a", "b")), "hand-made", "0" * 64)
