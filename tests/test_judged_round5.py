"""Issue 53 ("Never silently wrong, round 5"), items 1, 3, 6 and 9: ``--judged-weight`` bounded at parse
time with what it does to each part said; judged files that take the whole validation split named as
such; merges, repeated rows and a file given twice said once, counted once, recorded once; a judged
file recorded by name and sha256, never by the trainer's directories.

Fast: parse-time refusals, the readers, and the Best Buy click sample (558 queries at --min-clicks 1).
"""

from __future__ import annotations

import argparse
import hashlib
import warnings

import numpy as np
import pytest

from qcat.errors import InputError
from qcat.training.commands.judged import (
    MAX_JUDGED_WEIGHT,
    MIN_JUDGED_WEIGHT,
    WEIGHT_EFFECT,
    _positive,
    check_judged_flags,
    read_and_exclude,
    weight_notes,
)
from qcat.training.data.corpus import LogCorpus
from qcat.training.data.judged import read_judged, with_judged
from tests.test_own_data import BESTBUY, CLICKS, one_line_error, qcat

LOG = ("--log", CLICKS, "--taxonomy", BESTBUY, "--min-clicks", "1")
TV = "abcat0101001"  # All Flat-Panel TVs
AIRCON = "abcat0907007"


@pytest.fixture(scope="module")
def log_dataset():
    return LogCorpus(CLICKS, BESTBUY, 1, 0, "other").dataset()


# Item 1: --judged-weight's bounds, at parse time, for every train action that takes it.

@pytest.mark.parametrize("text", ["1e308", "1e39", "1000001", "0.001", "1e-300", "0", "-3", "nan", "inf"])
def test_a_weight_out_of_bounds_is_refused_naming_the_bounds(text) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=r"from 0\.01 to 1,000,000, got "):
        _positive(text)


@pytest.mark.parametrize("text, value", [("0.01", 0.01), ("10", 10.0), ("1e6", 1e6), ("1000000", 1e6)])
def test_a_weight_in_bounds_is_taken(text, value) -> None:
    assert _positive(text) == value


@pytest.mark.parametrize("action", [("nb",), ("xreg",), ("xmlq",), ("rerank", "--model", "m", "--catalog", "c.csv")])
def test_every_train_action_refuses_an_overflowing_weight_at_parse_time(tmp_path, action) -> None:
    judged = tmp_path / "judged.tsv"
    judged.write_text(f"query\tcategory\tgrade\nlego\t{TV}\t3\n")
    error = one_line_error(qcat("train", *action, "--judged", judged, "--judged-weight", "1e39",
                                "--out", tmp_path / "out"))
    assert "--judged-weight: must be a number from 0.01 to 1,000,000, got 1e39" in error, error
    assert not (tmp_path / "out").exists()


def test_the_bound_weight_holds_exactly_in_a_float32_click_table_without_a_warning(log_dataset, tmp_path) -> None:
    judged_file = tmp_path / "judged.tsv"
    judged_file.write_text(f"query\tcategory\tgrade\nzzq widget\t{TV}\t3\nair conditioner\t{AIRCON}\t2\n")
    judged = read_judged([judged_file], log_dataset.taxonomy)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        dataset, _ = with_judged(log_dataset, judged, MAX_JUDGED_WEIGHT, negatives=True)
        clicks = dataset.table.clicks
        assert np.isfinite(clicks.astype(np.float32)).all()
        assert (clicks.astype(np.float32).astype(np.float64) == clicks).all()
    with pytest.raises(InputError, match="from 0.01 to 1,000,000"):
        with_judged(log_dataset, judged, 1e39)


def test_the_help_and_the_output_say_what_the_weight_does_to_each_part(capsys) -> None:
    from qcat.training.commands.judged import add_judged_flags

    parser = argparse.ArgumentParser(prog="t")
    add_judged_flags(parser)
    text = " ".join(parser.format_help().split())
    assert "from 0.01 to 1,000,000" in text
    for part in ("NB:", "XReg:", "XML-Q: ignored"):
        assert part in text, part
    assert "above 10 the weight changes nothing" in text
    xreg = weight_notes("XReg", 30.0)
    assert xreg[0] == f"judged weight 30: {WEIGHT_EFFECT['XReg']}" and "is above 10" in xreg[1]
    assert len(weight_notes("XReg", 10.0)) == 1  # at the cap: nothing ignored
    assert any("--judged-weight 3 is ignored" in n for n in weight_notes("XML-Q", 3.0, given=True))
    assert not any("is ignored" in n for n in weight_notes("XML-Q", 10.0, given=False))
    assert "-5.5 at 10,000" in weight_notes("NB", 1000.0)[0]


@pytest.mark.slow
def test_training_says_the_weight_a_part_ignores(tmp_path) -> None:
    judged = tmp_path / "judged.tsv"
    judged.write_text(f"query\tcategory\tgrade\nzzq widget\t{TV}\t3\n")
    result = qcat("train", "xreg", *LOG, "--judged", judged, "--judged-weight", "30", "--out", tmp_path / "x")
    assert result.returncode == 0, result.stderr.decode()
    printed = result.stdout.decode()
    assert "XReg: judged weight 30 is above 10" in printed and WEIGHT_EFFECT["XReg"] in printed
    assert not [line for line in result.stderr.decode().splitlines() if "RuntimeWarning" in line]


# Item 3: judged files that take the whole validation split.

def _all_validation_judged(log_dataset, tmp_path):
    validation = log_dataset.validation
    rows = {validation.queries[q]: validation.categories[c]
            for q, c in zip(validation.pair_query.tolist(), validation.pair_category.tolist())}
    path = tmp_path / "all.tsv"
    path.write_text("query\tcategory\tgrade\n" + "".join(f"{q}\t{c}\t3\n" for q, c in rows.items()))
    return path, len(rows)


def test_judged_files_taking_the_whole_validation_split_are_named_with_the_counts(log_dataset, tmp_path) -> None:
    path, count = _all_validation_judged(log_dataset, tmp_path)
    sets = {"log": (log_dataset.validation, 1.0)}
    with pytest.raises(InputError) as caught:
        read_and_exclude([path], log_dataset.taxonomy, sets, log=lambda m: None)
    message = str(caught.value)
    assert f"the judged files hold all {count:,} queries of the log validation split" in message
    assert "give fewer judged queries" in message and "needs more queries" not in message


@pytest.mark.slow
def test_train_says_the_judged_files_took_the_validation_split(log_dataset, tmp_path) -> None:
    path, count = _all_validation_judged(log_dataset, tmp_path)
    error = one_line_error(qcat("train", "nb", *LOG, "--judged", path, "--out", tmp_path / "nb"))
    assert f"all {count:,} queries of the log validation split" in error and "the log needs more" not in error


# Item 6: merges, repeated rows and a file given twice: said once, counted once, recorded once.

GOLD = f"query\tcategory\tgrade\nTV stand\t{TV}\t3\ntv stand\t{TV}\t3\n Tv Stand\t{AIRCON}\t0\nlego\t{TV}\t1\n"


def test_a_gold_says_its_merges_and_repeated_rows_once(tmp_path, capsys) -> None:
    from qcat.measure.graded_gold import read_graded_gold

    path = tmp_path / "gold.tsv"
    path.write_text(GOLD)
    said = []
    gold = read_graded_gold(path, say=said.append)
    assert len(said) == 2, said
    assert "1 query written several ways merged" in said[0] and "'TV stand' / 'tv stand'" in said[0]
    assert said[1].startswith(f"--gold {path}: 1 row(s) repeating") and "line 3 repeats line 2" in said[1]
    assert gold.duplicates == {3: 2}
    read_graded_gold(path)  # the default says it on stderr
    assert capsys.readouterr().err.count("merged") == 1


def test_a_judged_file_given_twice_is_counted_and_recorded_once_and_said(log_dataset, tmp_path, capsys) -> None:
    path = tmp_path / "judged.tsv"
    path.write_text(GOLD)
    other = tmp_path / "other.tsv"
    other.write_text(f"query\tcategory\tgrade\nTV STAND\t{TV}\t3\n")
    args = argparse.Namespace(judged=[path, path, other], judged_weight=None, overrides=False)
    check_judged_flags(args)
    assert capsys.readouterr().err == ""  # the flag check says nothing: reading for training does, once
    judged = read_judged([path, path, other], log_dataset.taxonomy)
    assert len(judged.files) == 2 and [f.as_dict()["name"] for f in judged.files] == ["judged.tsv", "other.tsv"]
    assert judged.describe() == "judged: 2 queries from 2 file(s) (1 exact or acceptable pairs, 1 graded wrong)"
    notes = "\n".join(judged.notes)
    assert notes.count("merged") == 1 and notes.count("repeating") == 1 and notes.count("same file") == 1
    assert f"--judged {path} is the same file as --judged {path}" in notes
    third = tmp_path / "third.tsv"
    third.write_text(f"query\tcategory\tgrade\nLEGO\t{TV}\t1\n")
    across = read_judged([other, third, path], log_dataset.taxonomy).notes
    assert any("written differently in different files merged" in n and "'LEGO' / 'lego'" in n for n in across)


# Item 9: recorded by name and sha256.

def test_a_judged_file_is_recorded_by_name_and_sha256_never_its_directory(log_dataset, tmp_path) -> None:
    path = tmp_path / "deep" / "judged.tsv"
    path.parent.mkdir()
    path.write_text(f"query\tcategory\tgrade\nlego\t{TV}\t3\n")
    record = read_judged([path], log_dataset.taxonomy).files[0].as_dict()
    assert record == {"name": "judged.tsv", "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
                      "queries": 1, "pairs": 1, "negatives": 0}
    assert str(tmp_path) not in repr(record)


def test_bounds_are_those_of_the_data_layer() -> None:
    assert (MIN_JUDGED_WEIGHT, MAX_JUDGED_WEIGHT) == (0.01, 1_000_000.0) and MAX_JUDGED_WEIGHT < 2 ** 24
