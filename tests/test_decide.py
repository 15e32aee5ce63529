"""Choices that know when validation cannot decide (issue 40, item 3): paired standard errors,
hand-computed, and a hybrid trained on a log the size of the hand-made one keeping its default."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import numpy as np
import pytest

from qcat.training.selection.decide import decide, objective_of, paired_difference
from tests.test_own_data import qcat


def test_paired_difference_hand_computed() -> None:
    a = {"s": np.array([1, 1, 0, 1]), "r": np.array([1, 0])}
    b = {"s": np.array([0, 1, 0, 0]), "r": np.array([1, 1])}
    weights = {"s": 0.5, "r": 0.5}
    # s: d = 1 0 0 1, mean 0.5, var(ddof=1) 1/3; r: d = 0 -1, mean -0.5, var 0.5.
    difference, se = paired_difference(a, b, weights)
    assert difference == pytest.approx(0.5 * 0.5 + 0.5 * -0.5)
    assert se == pytest.approx(math.sqrt(0.25 * (1 / 3) / 4 + 0.25 * 0.5 / 2))
    assert objective_of(a, weights) == pytest.approx(0.5 * 0.75 + 0.5 * 0.5)


def test_a_candidate_replaces_the_default_only_beyond_two_paired_se() -> None:
    rng = np.random.default_rng(0)
    base = rng.random(400) < 0.6
    slightly = base.copy()
    slightly[np.nonzero(~base)[0][:3]] = True  # +3 of 400: within noise
    clearly = base.copy()
    clearly[np.nonzero(~base)[0][:60]] = True  # +60 of 400, never worse: far beyond 2 SE
    weights = {"v": 1.0}
    tie = decide(["default", "slightly"], [{"v": base}, {"v": slightly}], weights, default=0)
    assert not tie.decided and tie.chosen == 0
    assert "cannot tell these apart: kept the default default" in tie.summary()
    assert tie.rows[1]["difference"] == pytest.approx(3 / 400)
    win = decide(["default", "slightly", "clearly"], [{"v": base}, {"v": slightly}, {"v": clearly}], weights, default=0)
    assert win.decided and win.chosen == 2 and win.rows[2]["wins"] and not win.rows[1]["wins"]
    assert "chose clearly" in win.summary()
    record = win.to_json()
    assert record["default"] == "default" and record["chosen"] == "clearly" and record["validation_queries"] == 400


def test_identical_candidates_never_win() -> None:
    same = {"v": np.array([1.0, 0.0, 1.0])}
    decision = decide(["a", "b"], [same, dict(same)], {"v": 1.0}, default=0)
    assert not decision.decided and decision.rows[1]["paired_se"] == 0.0


# -- a log the size of the hand-made one (3,969 rows, ~25 validation queries) -----------------------

DEPARTMENTS = {"Toys": ["Cars", "Dolls", "Puzzles", "Blocks"], "Food": ["Juice", "Cheese", "Bread", "Pasta"],
               "Phones": ["Cases", "Chargers", "Screens", "Cables"]}


def small_log(directory: Path, seed: int = 0) -> tuple[Path, Path]:
    """A taxonomy of 12 leaves and a log of 3,969 rows over 250 queries of 1-4 tokens, mostly words
    shared by a department's leaves, with brand words and 30% of clicks off-intent: a hard task on
    little data, as the hand-made log was (its settings tied at 0.48)."""
    rng = random.Random(seed)
    taxonomy = ["id\tpath\tparent"]
    leaves = []
    for d, (department, names) in enumerate(DEPARTMENTS.items()):
        taxonomy.append(f"d{d}\t{department}\t")
        for n, name in enumerate(names):
            taxonomy.append(f"d{d}l{n}\t{department} > {name}\td{d}")
            leaves.append(f"d{d}l{n}")
    own = {leaf: [f"w{leaf}x{i}" for i in range(3)] for leaf in leaves}
    shared = {leaf[:2]: [f"w{leaf[:2]}s{i}" for i in range(8)] for leaf in leaves}  # a department's words
    brands = [f"brand{i}" for i in range(5)]
    queries = {}
    while len(queries) < 250:
        leaf = rng.choice(leaves)
        words = rng.sample(shared[leaf[:2]], rng.choice((1, 2))) + ([rng.choice(own[leaf])] if rng.random() < 0.3 else [])
        tokens = words + ([rng.choice(brands)] if rng.random() < 0.4 else [])
        queries.setdefault(" ".join(tokens), leaf)
    rows = []
    items = list(queries.items())
    while len(rows) < 3969:
        query, leaf = rng.choice(items)
        clicked = leaf if rng.random() > 0.3 else rng.choice(leaves)
        rows.append(f"{query},{clicked},{rng.randint(1, 3)}")
    (directory / "taxonomy.tsv").write_text("\n".join(taxonomy) + "\n")
    (directory / "log.csv").write_text("query,category,clicks\n" + "\n".join(rows) + "\n")
    return directory / "log.csv", directory / "taxonomy.tsv"


@pytest.mark.slow
def test_a_hybrid_on_a_small_log_keeps_its_default_and_says_why(tmp_path) -> None:
    log, taxonomy = small_log(tmp_path)
    data = ("--log", log, "--taxonomy", taxonomy, "--min-clicks", "1")
    for backend in ("nb", "xreg"):
        result = qcat("train", backend, *data, "--out", tmp_path / backend)
        assert result.returncode == 0, result.stderr.decode()
    result = qcat("train", "hybrid", "--nb", tmp_path / "nb", "--xreg", tmp_path / "xreg", "--out", tmp_path / "h")
    out = result.stdout.decode()
    assert result.returncode == 0, result.stderr.decode()
    assert "cannot tell these apart: kept the default" in out
    manifest = json.loads((tmp_path / "h" / "manifest.json").read_text())
    decision = manifest["metrics"]["selection"]["decision"]
    assert decision["decided_by_validation"] is False
    assert 15 <= decision["validation_queries"] <= 40
    # The stated default, the paper's hybrid (issue 45, item 12), not the single part that scored best
    assert decision["chosen"] == decision["default"] == "xreg cutoff 1 blend 0"
    assert manifest["config"]["route_to"] == "hybrid" and manifest["config"]["cutoff"] == 1
    assert "kept the default: NB answers queries of at most 1 token(s), longer ones get xreg" in out
    assert "xreg        1.00            1   0.00" in out and out.count("(the default)") == 1
    # 16 settings plus the two single parts, each with its difference from the default and its SE
    table = manifest["metrics"]["selection"]["table"]
    assert len(table) == 18 and [row["default"] for row in table].index(True) == 2
    assert all("paired_se" in row for row in table)
    # the kept bundle routes by length and says so; no --backend flag is cited where none was given
    classified = qcat("classify", "--model", tmp_path / "h", "--json", "--explain", "wd0l0x1 wd0l0x2 brand1")
    assert classified.returncode == 0, classified.stderr.decode()
    explanation = json.loads(classified.stdout)["explanation"]
    assert "hybrid: 3 token(s) > cutoff 1, so xreg answers" in explanation
    assert not any("--backend" in line for line in explanation)


def test_nb_keeps_its_stated_default_on_a_small_log_and_leaves_it_on_a_large_one(tmp_path) -> None:
    """The NB grid's default (threshold 1, Laplace alpha 1) stays unless a point wins by 2 paired SE."""
    from qcat.taxonomy import load_taxonomy
    from qcat.training.clicklogs.clicklog import ingest
    from qcat.training.data.dataset import Dataset
    from qcat.training.nb.trainer import fit

    log, taxonomy = small_log(tmp_path)
    result = ingest(log, load_taxonomy(taxonomy), min_clicks=1)
    model = fit(Dataset.from_table(result.table, result.taxonomy))
    decision = model.metrics["tuning_decision"]
    assert decision["default"] == "threshold 1, alpha 1" and len(decision["candidates"]) == 54
    if not decision["decided_by_validation"]:
        assert (model.config["threshold"], model.config["alpha"]) == (1, 1.0)
        assert "cannot tell these apart" in decision["summary"]
    else:  # a winner must clear the bar
        chosen = next(r for r in decision["candidates"] if r["name"] == decision["chosen"])
        assert chosen["difference"] > 2 * chosen["paired_se"]
