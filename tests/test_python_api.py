"""The README's Python examples run as written, and the Python API's contract."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import qcat
from qcat.classifier import Classification
from qcat.errors import BundleError, InputError

ROOT = Path(__file__).resolve().parent.parent


def readme_python_examples() -> list[str]:
    readme = (ROOT / "docs" / "guide" / "classify.md").read_text(encoding="utf-8")  # the README's examples moved there
    section = readme.split("## From Python", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.+?)\n```", section, re.S)


@pytest.mark.slow
def test_the_readme_python_examples_run(tmp_path, monkeypatch, capsys):
    examples = readme_python_examples()
    assert len(examples) == 2
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("QCAT_MODEL", raising=False)
    exec(compile(examples[0], "README example 1", "exec"), {})
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("lego star wars [('Toys & Hobbies > ") and printed[2].startswith("{'query': 'lego star wars'")
    assert any(line.startswith("hybrid: 3 token(s)") for line in printed)
    exec(compile(examples[1], "README example 2", "exec"), {})
    assert capsys.readouterr().out.strip().startswith("Toys & Hobbies")
    assert (tmp_path / "my-nb" / "manifest.json").is_file()


def test_load_returns_the_cli_classifier_and_dataclasses():
    classifier = qcat.load()
    (result,) = classifier.classify(["lego star wars"], k=2)
    assert isinstance(result, Classification) and len(result.categories) == 2
    assert result.to_json()["categories"][0]["path"] == result.categories[0].path
    assert qcat.__version__ == "0.1.0"


def test_load_names_a_missing_bundle(tmp_path):
    with pytest.raises(BundleError, match="not a model bundle"):
        qcat.load(tmp_path)
    with pytest.raises(TypeError, match="a list of queries"):
        qcat.load().classify("lego")


def test_a_training_flag_error_names_the_flag(tmp_path):
    from qcat.training.api import train_nb

    with pytest.raises(InputError, match="--log"):
        train_nb(tmp_path / "out", log=tmp_path / "missing.csv", taxonomy=tmp_path / "missing.tsv")
    with pytest.raises(InputError, match="backend 'svm'"):
        from qcat.training.api import train
        train("svm", tmp_path / "out2")
