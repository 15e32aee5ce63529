"""qcat data audit (issue 40, item 1): it finds duplicate leaves planted in a generated log, and
none in a log without them; its files are what the guide says."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from qcat.confusable import load_confusable
from qcat.taxonomy import load_taxonomy
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
    found = load_confusable(out / "confusable.tsv", load_taxonomy(taxonomy))
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
