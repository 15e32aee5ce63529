"""docs/guide/judging-categories.md: the walkthrough's commands, run as written (all but the app,
which serves until stopped), print what the page says, and the report holds the rows it shows.

``QCAT_UPDATE_SCREENSHOT=1`` also writes docs/judging_categories_report_1280x800.png: the report's
HTML in headless Chromium at 1280x800.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GUIDE = ROOT / "docs" / "guide" / "judging-categories.md"
SPEC = importlib.util.spec_from_file_location("simulate_category_judges", ROOT / "benchmarks" / "simulate_category_judges.py")
SIMULATE = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(SIMULATE)


def walkthrough() -> tuple[list[str], list[str], list[str]]:
    """The commands, the lines the page says they print, and the report rows it shows."""
    text = GUIDE.read_text(encoding="utf-8")
    section = text.split("## Walkthrough: the demo's categories, judged", 1)[1].split("\n## ", 1)[0]
    commands = re.search(r"```bash\n(.+?)\n```", section, re.S).group(1).splitlines()
    printed = re.search(r"```text\n(.+?)\n```", section, re.S).group(1).splitlines()
    rows = [line for line in section.split("### What the report says", 1)[1].splitlines() if line.startswith("| all |")]
    return commands, printed, rows


@pytest.mark.slow  # about a minute: a session, three simulated judges, an evaluation, an audit
def test_the_category_walkthrough_runs_and_prints_what_the_guide_says(tmp_path):
    commands, printed, rows = walkthrough()
    assert [c.split()[:3] for c in commands] == [
        ["python", "benchmarks/simulate_category_judges.py", "traffic"], ["qcat", "db", "upgrade"],
        ["qcat", "judge", "create-session"], ["qcat", "judge", "add-judge"], ["qcat", "judge", "app"],
        ["python", "benchmarks/simulate_category_judges.py", "judge"], ["qcat", "judge", "report"],
        ["qcat", "judge", "export"], ["qcat", "evaluate", "--model"], ["qcat", "data", "audit"]]
    assert len(rows) == 4
    for name in ("demo", "benchmarks"):  # the commands name them from the repository root
        (tmp_path / name).symlink_to(ROOT / name)
    qcat = str(Path(sys.executable).parent / "qcat")
    output = ""
    for command in commands:
        if command.startswith("qcat judge app"):
            continue  # it serves until stopped; tests/test_judging_categories.py drives the app in Chromium
        command = command.replace("qcat ", f"{qcat} ", 1).replace("python ", f"{sys.executable} ", 1)
        result = subprocess.run(command, shell=True, cwd=tmp_path, text=True, capture_output=True, timeout=600)
        assert result.returncode == 0, f"{command}\n{result.stderr}"
        output += result.stdout + result.stderr
    for line in printed:
        assert line.strip() in output, f"the guide says {line.strip()!r}; the run printed:\n{output}"
    report = (tmp_path / "category-report" / "report.md").read_text(encoding="utf-8")
    for row in rows:
        assert row in report, f"the guide shows {row!r}; the report holds:\n{report}"
    assert "simulated judge 1-1" in report  # the report names the simulated judges
    if os.environ.get("QCAT_UPDATE_SCREENSHOT"):
        from judging_fixtures import CHROMIUM, launch_chromium
        from playwright.sync_api import sync_playwright

        assert Path(CHROMIUM).exists()
        with sync_playwright() as p:
            browser = launch_chromium(p)
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            page.goto((tmp_path / "category-report" / "report.html").as_uri())
            page.screenshot(path=str(ROOT / "docs" / "judging_categories_report_1280x800.png"))
            browser.close()


def test_the_walkthroughs_simulated_judges_grade_by_the_scripts_stated_rule():
    """The judges of the walkthrough's sixth step: a category the corpus grades (3 exact, 2
    acceptable) keeps its grade; an ungraded one is 1 (related) when it shares its parent with a
    category graded 2 or more, else 0; a query the corpus knows nothing of gets 0 everywhere."""
    parent = {"tv-oled": "tvs", "tv-lcd": "tvs", "tv-mount": "tvs", "hdmi": "cables", "usb": "cables", "lego": None}
    truth = {"tv-oled": 3, "hdmi": 1}
    assert [SIMULATE.grade(c, truth, parent) for c in ("tv-oled", "hdmi", "tv-lcd", "tv-mount", "usb", "lego")] == \
        [3, 1, 1, 1, 0, 0]  # usb: its sibling hdmi is graded 1 only
    assert SIMULATE.grade("usb", {"hdmi": 2}, parent) == 1 and SIMULATE.grade("tv-lcd", {"tv-oled": 1}, parent) == 0
    assert {c: SIMULATE.grade(c, {}, parent) for c in parent} == dict.fromkeys(parent, 0)
