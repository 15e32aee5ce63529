"""docs/guide/learning-from-judges.md: the walkthrough's commands (choose uncertain queries, judge
them with the simulated judges, export, train on them, evaluate) run as written and print what the
page says; a judged query is then answered from its judges (``source: judged``)."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from qcat.judging.grading.selection.wording import say_selection
from qcat.measure.graded_gold import read_graded_gold

ROOT = Path(__file__).resolve().parent.parent
GUIDE = ROOT / "docs" / "guide" / "learning-from-judges.md"


def walkthrough() -> tuple[list[str], list[str]]:
    """The walkthrough's commands and the lines the page says they print."""
    section = GUIDE.read_text(encoding="utf-8").split("## Walkthrough", 1)[1].split("\n## ", 1)[0]
    commands = re.search(r"```bash\n(.+?)\n```", section, re.S).group(1).splitlines()
    printed = re.search(r"```text\n(.+?)\n```", section, re.S).group(1).splitlines()
    return commands, printed


@pytest.mark.slow  # a session of the demo, three simulated judges, NB and a hybrid trained, an evaluation
def test_the_learning_walkthrough_runs_and_prints_what_the_guide_says(tmp_path):
    commands, printed = walkthrough()
    assert [c.split()[:3] for c in commands] == [
        ["python", "benchmarks/simulate_category_judges.py", "traffic"], ["qcat", "db", "upgrade"],
        ["qcat", "judge", "create-session"], ["python", "benchmarks/simulate_category_judges.py", "judge"],
        ["qcat", "judge", "export"], ["qcat", "train", "nb"], ["qcat", "train", "hybrid"],
        ["qcat", "evaluate", "--model"]]
    for name in ("demo", "benchmarks"):  # the commands name them from the repository root
        (tmp_path / name).symlink_to(ROOT / name)
    qcat = str(Path(sys.executable).parent / "qcat")
    output = ""
    for command in commands:
        command = command.replace("qcat ", f"{qcat} ", 1).replace("python ", f"{sys.executable} ", 1)
        result = subprocess.run(command, shell=True, cwd=tmp_path, text=True, capture_output=True, timeout=900)
        assert result.returncode == 0, f"{command}\n{result.stderr}"
        output += result.stdout + result.stderr
    for line in printed:
        assert line.strip() in output, f"the guide says {line.strip()!r}; the run printed:\n{output}"
    # A judged query's exact category is served first, marked as the judges' answer
    gold = read_graded_gold(tmp_path / "judged.tsv")
    query, exact = next((q, [c for c, g in grades.items() if g == 3]) for q, grades in sorted(gold.grades.items())
                        if 3 in grades.values())
    result = subprocess.run([qcat, "classify", "--model", "hybrid-judged", "--json", query], cwd=tmp_path,
                            text=True, capture_output=True, timeout=300)
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout.splitlines()[0])
    assert answer["source"] == "judged" and answer["categories"][0]["id"] in exact, answer


def test_the_guides_select_line_is_what_create_session_says_for_its_commands():
    """The guide's second printed line, from the walkthrough's own flags: ``create-session
    --select uncertain --queries N --model M`` over the pool the traffic step wrote (its
    ``--queries``, one segment), as ``qcat judge create-session`` words it (say_selection)."""
    commands, printed = walkthrough()
    flags = []  # each command's flags, the first value of a repeated one (the first --model is the one scored)
    for argv in (shlex.split(c)[3:] for c in commands):
        flags.append({})
        for flag, value in zip(argv[::2], argv[1::2]):
            flags[-1].setdefault(flag, value)
    traffic, session = flags[0], flags[2]
    assert shlex.split(commands[2])[:3] == ["qcat", "judge", "create-session"] and session["--select"] == "uncertain"
    pool = int(traffic["--queries"])
    record = {"kind": session["--select"], "model": session["--model"], "scores": "calibrated",  # the demo model's
              "candidates": {session["--default-segment"]: pool}}  # one segment: every pool query a candidate
    assert printed[0] == f"wrote {pool} real-title validation queries to {traffic['--out']}"
    assert printed[1] == say_selection(record, int(session["--queries"]))
