"""The README's own-data walkthrough: its commands, run as written, print what it says."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

import qcat.training.commands.data  # noqa: F401  (imported here, not in the fast test: `qcat data` runs in-process)
from qcat.cli import main

ROOT = Path(__file__).resolve().parent.parent


def walkthrough() -> tuple[list[str], list[str]]:
    readme = (ROOT / "docs" / "guide" / "own-data.md").read_text(encoding="utf-8")  # the README's walkthrough moved there
    section = readme.split("## Walkthrough: your own click log, end to end", 1)[1].split("\n## ", 1)[0]
    commands = re.search(r"```bash\n(.+?)\n```", section, re.S).group(1).splitlines()
    expected = re.search(r"```text\n(.+?)\n```", section, re.S).group(1).splitlines()
    return commands, expected


@pytest.mark.slow  # five qcat processes: two models trained, an evaluation
def test_readme_walkthrough_runs_and_prints_what_it_says(tmp_path):
    commands, expected = walkthrough()
    assert [c.split()[:3] for c in commands] == [["qcat", "data", "ingest"], ["qcat", "train", "nb"],
                                                 ["qcat", "train", "xreg"], ["qcat", "classify", '"sharp']] + \
        [["qcat", "evaluate", "--model"]]
    (tmp_path / "tests").symlink_to(ROOT / "tests")  # the commands name tests/data/... from the repository root
    qcat = str(Path(sys.executable).parent / "qcat")
    output = ""
    for command in commands:
        result = subprocess.run(command.replace("qcat ", f"{qcat} ", 1), shell=True, cwd=tmp_path, text=True,
                                capture_output=True, timeout=300)
        assert result.returncode == 0, f"{command}\n{result.stderr}"
        output += result.stdout + result.stderr
    for line in expected:
        assert line.strip() in output, f"README says {line.strip()!r}; the run printed:\n{output}"
    assert (tmp_path / "bb-report" / "report.html").is_file()
    # The pairs file is a click log again: ingesting it gives the same pairs.
    again = subprocess.run([qcat, "data", "ingest", "bb-pairs.csv", "--taxonomy",
                            "tests/data/bestbuy_categories_2016.json.gz", "--min-clicks", "1"],
                           cwd=tmp_path, text=True, capture_output=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert "659 rows read, 659 used, 0 skipped" in again.stdout and "659 pairs of 558 queries kept" in again.stdout


def test_the_walkthroughs_first_step_prints_the_guides_ingest_lines(tmp_path, monkeypatch, capsys):
    """Its first command (``qcat data ingest`` of the Best Buy sample) run as written, in-process:
    every line the guide shows for it is printed, and the pairs file holds the pairs it says."""
    commands, expected = walkthrough()
    argv = shlex.split(commands[0])
    assert argv[:3] == ["qcat", "data", "ingest"] and argv[-2:] == ["--out", "bb-pairs.csv"]
    (tmp_path / "tests").symlink_to(ROOT / "tests")  # the command names tests/data/... from the repository root
    monkeypatch.chdir(tmp_path)
    assert main(argv[1:]) == 0
    printed = "".join(capsys.readouterr())
    shown = expected[:next(i for i, line in enumerate(expected) if line.startswith("wrote ")) + 1]
    assert len(shown) == 6 and shown[-1] == "wrote 659 pairs to bb-pairs.csv"
    for line in shown:
        assert line.strip() in printed, f"the guide says {line.strip()!r}; the step printed:\n{printed}"
    assert len((tmp_path / "bb-pairs.csv").read_text(encoding="utf-8").splitlines()) == 1 + 659
