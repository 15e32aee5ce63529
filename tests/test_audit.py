"""qcat data audit (issue 40, item 1): it finds duplicate leaves planted in a generated log, and
none in a log without them; its files are what the guide says."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from qcat.taxonomy import load_taxonomy
from qcat.taxonomy.confusable import load_confusable
from tests.test_own_data import qcat

LEAVES = [f"L{i}" for i in range(10)]


def generated_log(directory: Path, planted: bool, seed: int = 0) -> tuple[Path, Path]:
    """Two departments of 5 leaves, each leaf with its own 12 words; 2,400 queries of 1-3 words of
    one leaf, clicked on it (5% of clicks elsewhere). With ``planted``, leaf L9 duplicates L4: its
    queries are L4's words, and a query of either is clicked on L4 or L9 at random."""
    rng = random.Random(seed)
    lines = ["id\tpath\tparent", "D0\tHome\t", "D1\tGarden\t"]
    lines += [f"{leaf}\t{'Home' if i < 5 else 'Garden'} > Leaf {i}\t{'D0' if i < 5 else 'D1'}"
              for i, leaf in enumerate(LEAVES)]
    words = {leaf: [f"{leaf.lower()}w{j}" for j in range(12)] for leaf in LEAVES}
    if planted:
        words["L9"] = words["L4"]
    rows, seen = [], set()
    while len(seen) < 2400:
        leaf = rng.choice(LEAVES)
        query = " ".join(rng.sample(words[leaf], rng.choice((1, 2, 3))))
        if query in seen:
            continue
        seen.add(query)
        for _ in range(3):
            clicked = leaf
            if planted and leaf in ("L4", "L9"):
                clicked = rng.choice(("L4", "L9"))
            if rng.random() < 0.05:
                clicked = rng.choice(LEAVES)
            rows.append(f"{query},{clicked},2")
    (directory / "taxonomy.tsv").write_text("\n".join(lines) + "\n")
    (directory / "log.csv").write_text("query,category,clicks\n" + "\n".join(rows) + "\n")
    return directory / "log.csv", directory / "taxonomy.tsv"


@pytest.mark.slow
@pytest.mark.parametrize("planted", [True, False])
def test_the_audit_finds_planted_duplicate_leaves_and_nothing_else(tmp_path, planted) -> None:
    log, taxonomy = generated_log(tmp_path, planted)
    out = tmp_path / "audit"
    result = qcat("data", "audit", "--log", log, "--taxonomy", taxonomy, "--min-clicks", "1", "--out", out)
    assert result.returncode == 0, result.stderr.decode()
    found = load_confusable(out / "confusable.tsv", load_taxonomy(taxonomy), allow_empty=True)
    report = json.loads((out / "report.json").read_text())
    if planted:
        assert found.pairs == (("L4", "L9"),), found.pairs
        top = report["pairs"][0]
        assert {top["leaf_a"], top["leaf_b"]} == {"L4", "L9"} and top["confusable"]
        assert top["shared_texts"] > 50 and top["lift"] is None or top["lift"] > 5
        assert report["errors_explained_by_the_map"] > 0.5  # the planted pair is most of the fast model's errors
        assert "1 confusable pairs" in result.stdout.decode()
    else:
        assert found.pairs == ()
        assert report["confusable_pairs"] == 0
    # The training split only: 80% of the queries (split by a seeded hash).
    assert 0.75 * 2400 < report["training_queries"] < 0.85 * 2400
    markdown = (out / "report.md").read_text()
    assert markdown.startswith("# Confusable leaves (qcat data audit)") and "Made by: `qcat data audit" in markdown


def test_the_audit_refuses_to_overwrite_an_earlier_one(tmp_path) -> None:
    out = tmp_path / "audit"
    out.mkdir()
    (out / "confusable.tsv").write_text("")
    result = qcat("data", "audit", "--out", out)
    assert result.returncode == 2
    assert "holds an earlier audit (confusable.tsv); give --force" in result.stderr.decode()


def test_gold_agreement_hand_computed() -> None:
    """The map pairs (A, B) and (C, D). q1: A exact, B acceptable: a disagreement the map explains;
    q2: A exact, C and E acceptable, F wrong: two, neither explained; q3: no exact category, B, C and D
    acceptable: three pairs among them, (C, D) explained; q4: C exact, D related: the map's pair
    rejected; q5: A acceptable (the reference), B wrong: rejected; q6: only related and wrong: nothing."""
    from qcat.training.audit.gold_check import gold_agreement, references

    gold = {"q1": {"A": 3, "B": 2}, "q2": {"A": 3, "C": 2, "E": 2, "F": 0}, "q3": {"B": 2, "C": 2, "D": 2},
            "q4": {"C": 3, "D": 1}, "q5": {"A": 2, "B": 0}, "q6": {"A": 1, "B": 0}}
    assert references(gold["q2"]) == {"A"} and references(gold["q3"]) == {"B", "C", "D"}
    found = gold_agreement([("A", "B"), ("D", "C")], gold)
    assert (found["disagreements"], found["disagreement_queries"], found["distinct_disagreements"]) == (6, 3, 6)
    assert (found["explained"], found["explained_distinct"]) == (2, 2)
    assert found["explained_share"] == pytest.approx(2 / 6)
    assert (found["rejected"], found["rejected_queries"], found["rejected_pairs"]) == (2, 2, 2)
    assert found["map_pairs"] == 2 and found["map_pairs_graded"] == 2
    assert found["examples"]["explained"] == [["q1", "A", "B"], ["q3", "C", "D"]]
    assert found["examples"]["rejected"] == [["q4", "C", "D"], ["q5", "A", "B"]]
    assert gold_agreement([], {"q": {"A": 1}})["explained_share"] is None


@pytest.mark.slow
def test_the_audit_checks_its_map_against_a_graded_gold(tmp_path) -> None:
    """The planted pair (L4, L9) is the map; the gold accepts it once, rejects it twice and has two
    acceptable disagreements the map does not pair (one on a query without an exact category)."""
    log, taxonomy = generated_log(tmp_path, planted=True)
    gold = tmp_path / "gold.tsv"
    gold.write_text("# session: s1\nquery\tcategory\tgrade\tsegment\n"
                    "l4w0\tL4\t3\thead\nl4w0\tL9\t2\thead\n"  # explained
                    "l0w1\tL0\t3\t\nl0w1\tL1\t2\t\nl0w1\tL2\t0\t\n"  # not explained
                    "l4w2\tL4\t3\t\nl4w2\tL9\t0\t\n"  # rejected
                    "l2w3\tL2\t2\t\nl2w3\tL3\t2\t\n"  # no exact category: not explained
                    "l9w4\tL9\t3\t\nl9w4\tL4\t1\t\n"  # rejected
                    "l5w5\tL5\t1\t\n")  # nothing acceptable
    out = tmp_path / "audit"
    result = qcat("data", "audit", "--log", log, "--taxonomy", taxonomy, "--min-clicks", "1", "--out", out,
                  "--gold", gold)
    assert result.returncode == 0, result.stderr.decode()
    assert ("(6 queries): 3 human-acceptable disagreements (two exact, or exact vs acceptable) on 3 queries; the map "
            "explains 1 (33.3%); people rejected 1 of its 1 pairs (2 times on 2 queries)") in result.stdout.decode()
    found = json.loads((out / "report.json").read_text())["gold"]
    assert (found["disagreements"], found["explained"], found["rejected"]) == (3, 1, 2)
    assert found["examples"]["not_explained"] == [["l0w1", "Home > Leaf 0", "Home > Leaf 1"],
                                                  ["l2w3", "Home > Leaf 2", "Home > Leaf 3"]]  # leaves by path
    assert "## Against people's grades" in (out / "report.md").read_text()
    gold.write_text(gold.read_text().replace("L5\t1", "L55\t1"))
    result = qcat("data", "audit", "--log", log, "--taxonomy", taxonomy, "--min-clicks", "1", "--out", out,
                  "--force", "--gold", gold)
    assert result.returncode == 2 and "gold.tsv:14: query 'l5w5': category 'L55' is not in the data's taxonomy" \
        in result.stderr.decode()


def tiny_taxonomy(directory: Path) -> Path:
    (directory / "taxonomy.tsv").write_text("id\tpath\tparent\nD\tHome\t\nA\tHome > A\tD\nB\tHome > B\tD\n")
    return directory / "taxonomy.tsv"


@pytest.mark.slow
@pytest.mark.parametrize("rows, queries", [("q0,A,2\nq0,B,2\n", 1),  # one training query: the folds' NB crashed
                                           ("q0,A,2\nq1,B,2\n", 2),  # two: "missed 2 of 2"
                                           ("q7,A,2\n", 0)])  # q7 hashes to the test split: an empty audit
def test_the_audit_refuses_a_training_split_smaller_than_its_folds(tmp_path, rows, queries) -> None:
    """Issue 45, item 1: fewer training queries than folds exits 2, saying so, and writes nothing."""
    (tmp_path / "log.csv").write_text("query,category,clicks\n" + rows)
    out = tmp_path / "audit"
    result = qcat("data", "audit", "--log", tmp_path / "log.csv", "--taxonomy", tiny_taxonomy(tmp_path),
                  "--min-clicks", "1", "--out", out)
    assert result.returncode == 2, result.stderr.decode()
    assert result.stderr.decode().strip().endswith(f"qcat: error: too few training queries ({queries}) for 5 folds: "
                                                   f"the audit cross-fits over --folds 5; give a larger log")
    assert not out.exists()


def test_gold_agreement_counts_two_leaves_both_graded_exact() -> None:
    """Issue 45, item 14: two leaves both graded exact for a query are an answer people accept that
    differs from a reference; they were ignored. q1: A and B exact (the map pairs them), C acceptable:
    (A, B), (A, C), (B, C), one explained; q2: C, D and E exact: three pairs, (C, D) explained."""
    from qcat.training.audit.gold_check import agreement_line, gold_agreement

    gold = {"q1": {"A": 3, "B": 3, "C": 2}, "q2": {"C": 3, "D": 3, "E": 3, "F": 0}}
    found = gold_agreement([("A", "B"), ("C", "D")], gold)
    assert (found["disagreements"], found["disagreement_queries"], found["distinct_disagreements"]) == (6, 2, 6)
    assert (found["explained"], found["explained_distinct"]) == (2, 2)
    assert found["explained_share"] == pytest.approx(2 / 6)
    assert found["examples"]["explained"] == [["q1", "A", "B"], ["q2", "C", "D"]]
    assert found["rejected"] == 0  # F, graded wrong, pairs with no map leaf
    assert "6 human-acceptable disagreements (two exact, or exact vs acceptable) on 2 queries; the map explains 2 " \
           "(33.3%)" in agreement_line(found, "gold.tsv")


@pytest.mark.slow
def test_a_pair_whose_texts_split_their_clicks_reaches_the_map(tmp_path) -> None:
    """Issue 45, item 13: 40 queries each clicked under both K002 and K003 (beside 20 leaves of 40
    queries of their own words each) gave 0 pairs: the fast model's answer, either leaf, is a
    clicked one, so no confusion is recorded. Their split texts now carry the pair to the map."""
    leaves = [f"K{i:03d}" for i in range(1, 21)]
    taxonomy = ["id\tpath\tparent", "D\tShop\t"] + [f"{leaf}\tShop > Leaf {leaf}\tD" for leaf in leaves]
    pairs = [(i, j) for i in range(10) for j in range(i + 1, 10)][:40]
    rows = [f"{leaf.lower()}w{i} {leaf.lower()}w{j},{leaf},2" for leaf in leaves for i, j in pairs]
    rows += [f"both{i} shared,{leaf},2" for i in range(40) for leaf in ("K002", "K003")]
    (tmp_path / "taxonomy.tsv").write_text("\n".join(taxonomy) + "\n")
    (tmp_path / "log.csv").write_text("query,category,clicks\n" + "\n".join(rows) + "\n")
    out = tmp_path / "audit"
    result = qcat("data", "audit", "--log", tmp_path / "log.csv", "--taxonomy", tmp_path / "taxonomy.tsv",
                  "--min-clicks", "1", "--out", out)
    assert result.returncode == 0, result.stderr.decode()
    report = json.loads((out / "report.json").read_text())
    pair = next(p for p in report["pairs"] if {p["leaf_a"], p["leaf_b"]} == {"K002", "K003"})
    assert pair["confusions"] == 0 and 25 <= pair["split_texts"] == pair["shared_texts"] <= 40
    assert pair["confusable"] and pair["evidence"] == "split texts" and pair["split_lift"] >= 5
    found = load_confusable(out / "confusable.tsv", load_taxonomy(tmp_path / "taxonomy.tsv"))
    assert found.pairs == (("K002", "K003"),)


@pytest.mark.slow
def test_an_audit_that_maps_no_pair_says_why(tmp_path) -> None:
    """Issue 53, item 10: two leaves whose 30 texts all split their clicks mapped no pair without a
    word (with two leaves lift over chance cannot pass 2, --min-lift 5)."""
    rows = [f"both{i} shared,{leaf},2" for i in range(30) for leaf in ("A", "B")]
    (tmp_path / "log.csv").write_text("query,category,clicks\n" + "\n".join(rows) + "\n")
    out = tmp_path / "audit"
    result = qcat("data", "audit", "--log", tmp_path / "log.csv", "--taxonomy", tiny_taxonomy(tmp_path),
                  "--min-clicks", "1", "--out", out)
    assert result.returncode == 0, result.stderr.decode()
    why = ("no pair cleared the bars; the best, Home > A and Home > B, has split texts lift 2.0 over chance "
           "(--min-lift 5). With 2 leaves chance alone puts what one leaf shares on the other, so lift cannot "
           "pass 2 (--min-lift 5): a log of more leaves, or a lower --min-lift, can map them")
    assert f"nothing mapped: {why}" in result.stderr.decode()
    assert json.loads((out / "report.json").read_text())["nothing_mapped"] == why
    assert f"- Nothing mapped: {why}." in (out / "report.md").read_text()
    assert f"# No pair: {why}." in (out / "confusable.tsv").read_text()
    found = load_confusable(out / "confusable.tsv", load_taxonomy(tmp_path / "taxonomy.tsv"), allow_empty=True)
    assert found.pairs == ()
