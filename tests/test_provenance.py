"""Provenance (issue 21, items 1-3): a bundle records what it was trained on, and the commands
that evaluate or combine bundles use that record: evaluation on the model's own split with its
overlap with the training queries next to every figure, hybrids only of parts of one taxonomy
and one training set, and a hybrid's data taken from its parts, never a default corpus."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from qcat.training.data.provenance import SEEN_FILE, fingerprints, overlap, read_seen_fingerprints
from tests.test_own_data import BESTBUY, CLICKS, DEMO, one_line_error, qcat

LOG = ("--log", CLICKS, "--taxonomy", BESTBUY, "--min-clicks", "1")


@pytest.fixture(scope="module")
def bundles(tmp_path_factory) -> Path:
    """An NB and an XReg bundle trained on the Best Buy sample, and the sample's copy."""
    root = tmp_path_factory.mktemp("provenance")
    for backend in ("nb", "xreg"):
        result = qcat("train", backend, *LOG, "--out", root / backend)
        assert result.returncode == 0, result.stderr.decode()
    return root


def manifest(directory: Path) -> dict:
    return json.loads((directory / "manifest.json").read_text())


@pytest.mark.slow
def test_a_bundle_records_its_data_by_hash_and_the_queries_it_saw(bundles):
    data = manifest(bundles / "nb")["config"]["data"]
    assert data["log"] == str(CLICKS) and data["taxonomy"] == str(BESTBUY)
    assert data["min_clicks"] == 1 and data["split_seed"] == 0
    assert len(data["log_sha256"]) == 64 and len(data["taxonomy_sha256"]) == 64
    assert SEEN_FILE in manifest(bundles / "nb")["files"]  # hashed and verified like every bundle file
    with np.load(bundles / "nb" / SEEN_FILE) as npz:
        seen = npz["fingerprints"]
    # 558 queries survive --min-clicks 1; the 65 test queries are not among those it saw.
    assert len(seen) == 558 - 65


@pytest.mark.slow
def test_evaluate_uses_the_split_the_model_was_trained_with(bundles, tmp_path):
    """Before, --split-seed 7 scored the model on queries it trained on: PR@1 0.849 against the
    real test figure 0.23."""
    trained = manifest(bundles / "nb")["metrics"]["test"]["pr@1"]
    result = qcat("evaluate", "--model", bundles / "nb", "--log", CLICKS, "--taxonomy", BESTBUY,
                  "--out", tmp_path / "r", "--json")  # no --min-clicks, no --split-seed: the model's
    assert result.returncode == 0, result.stderr.decode()
    report = json.loads(result.stdout)
    model = report["models"][0]
    assert report["source"]["queries"] == 65
    # 15 of 65: NB keeps its default setting, which 55 validation queries cannot tell from the
    # others (issue 40; the grid's best point scored 16 of 65 here)
    assert model["segments"]["all"]["PR@1"] == pytest.approx(trained) == pytest.approx(15 / 65)
    assert model["overlap"]["all"] == {"queries": 65, "seen": 0, "share": 0.0}
    assert "0 of 65 queries seen in training" in result.stderr.decode()
    assert "| seen in training |" in (tmp_path / "r" / "report.md").read_text()

    error = one_line_error(qcat("evaluate", "--model", bundles / "nb", "--log", CLICKS, "--taxonomy", BESTBUY,
                                "--split-seed", "7", "--out", tmp_path / "r7"))
    assert "--split-seed 7" in error and "--split-seed 0" in error and "nb" in error
    error = one_line_error(qcat("evaluate", "--model", bundles / "nb", "--log", CLICKS, "--taxonomy", BESTBUY,
                                "--min-clicks", "3", "--out", tmp_path / "r3"))
    assert "--min-clicks 3" in error and "--min-clicks 1" in error
    assert not (tmp_path / "r7").exists() and not (tmp_path / "r3").exists()


@pytest.mark.slow
def test_evaluating_on_other_data_reports_the_overlap_with_training(bundles, tmp_path):
    """A later log shares queries with the training log: every figure says how many."""
    later = tmp_path / "later.csv"
    lines = CLICKS.read_text().splitlines()
    later.write_text("\n".join(lines[:1] + lines[1:400]) + "\n")  # another file: another hash
    result = qcat("evaluate", "--model", bundles / "nb", "--log", later, "--taxonomy", BESTBUY, "--min-clicks", "1",
                  "--split", "validation", "--out", tmp_path / "r", "--json")
    assert result.returncode == 0, result.stderr.decode()
    report = json.loads(result.stdout)
    entry = report["models"][0]["overlap"]["all"]
    assert entry["queries"] == report["source"]["queries"]
    # The later log's validation queries (its own seeded split) were split by the same hash, so
    # the model saw every one of them: the report must say so rather than print a clean figure.
    assert entry["seen"] == entry["queries"] > 0 and entry["share"] == 1.0
    assert any("saw" in note and "in training (100.0%)" in note for note in report["notes"])
    assert set(report["models"][0]["overlap"]) == {"all", "head", "torso", "tail"}


def test_a_bundle_without_a_record_has_an_unknown_overlap_never_zero():
    assert overlap(["a b", "c"], None) == {"queries": 2, "seen": None, "share": None}
    seen = fingerprints(["A  B", "d"])  # normalized before hashing
    assert overlap(["a b", "c", "a b"], seen) == {"queries": 2, "seen": 1, "share": 0.5}


@pytest.mark.slow
def test_a_hybrid_of_two_taxonomies_is_refused(bundles, tmp_path):
    error = one_line_error(qcat("train", "hybrid", "--nb", bundles / "nb", "--xreg", DEMO / "xreg",
                                "--out", tmp_path / "h"))
    # (a demo bundle from before taxonomy files were recorded is refused as other data)
    assert "different taxonomies" in error or "different data" in error
    assert str(bundles / "nb") in error and str(DEMO / "xreg") in error
    assert not (tmp_path / "h").exists()


@pytest.mark.slow
def test_a_hybrid_of_parts_trained_on_different_data_is_refused(bundles, tmp_path):
    other = tmp_path / "nb-seed-3"
    assert qcat("train", "nb", *LOG, "--split-seed", "3", "--out", other).returncode == 0
    error = one_line_error(qcat("train", "hybrid", "--nb", other, "--xreg", bundles / "xreg", "--out", tmp_path / "h"))
    assert "different data" in error and "split_seed 3" in error and "split_seed 0" in error, error


@pytest.mark.slow
def test_a_hybrid_reads_its_data_from_its_parts(bundles, tmp_path):
    """Before, a hybrid of parts trained with --log, run without --log, chose and calibrated on
    the demo corpus: every selection row 0.0000, test PR@1 0.0, exit 0."""
    result = qcat("train", "hybrid", "--nb", bundles / "nb", "--xreg", bundles / "xreg", "--out", tmp_path / "h")
    assert result.returncode == 0, result.stderr.decode()
    out = result.stdout.decode()
    assert "PR@1 log (55 queries)" in out and "simulated" not in out
    hybrid = manifest(tmp_path / "h")
    assert hybrid["config"]["data"]["log_sha256"] == manifest(bundles / "nb")["config"]["data"]["log_sha256"]
    assert hybrid["metrics"]["test"]["pr@1"] > 0.15
    assert SEEN_FILE in hybrid["files"]
    # Its parts saw what it saw: they read its record (verified by its manifest), not copies.
    hybrid_seen = read_seen_fingerprints(tmp_path / "h")
    for part in ("nb", "xreg"):
        assert SEEN_FILE not in manifest(tmp_path / "h" / part)["files"]
        np.testing.assert_array_equal(read_seen_fingerprints(tmp_path / "h" / part), hybrid_seen)

    # Explicit data must be the parts' own.
    error = one_line_error(qcat("train", "hybrid", "--nb", bundles / "nb", "--xreg", bundles / "xreg", *LOG[:-2],
                                "--min-clicks", "3", "--out", tmp_path / "h3"))
    assert "min_clicks" in error and "drop the data flags" in error


@pytest.mark.slow
def test_a_hybrid_refuses_a_training_log_that_changed(tmp_path):
    log = tmp_path / "clicks.csv"
    shutil.copyfile(CLICKS, log)
    for backend in ("nb", "xreg"):
        result = qcat("train", backend, "--log", log, "--taxonomy", BESTBUY, "--min-clicks", "1",
                      "--out", tmp_path / backend)
        assert result.returncode == 0, result.stderr.decode()
    with open(log, "a") as handle:
        handle.write("sharp tv,abcat0101001\n")
    error = one_line_error(qcat("train", "hybrid", "--nb", tmp_path / "nb", "--xreg", tmp_path / "xreg",
                                "--out", tmp_path / "h"))
    assert f"--log {log}, which has changed since" in error
    log.unlink()
    error = one_line_error(qcat("train", "hybrid", "--nb", tmp_path / "nb", "--xreg", tmp_path / "xreg",
                                "--out", tmp_path / "h"))
    assert "no longer exists" in error
    assert not (tmp_path / "h").exists()
