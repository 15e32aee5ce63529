"""The README's quick start is what CI runs; the figures the README and the guide quote are what
the code prints; every `qcat` command line they show parses with qcat's own parsers."""

import importlib.util
import re
import shlex
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GUIDE = ROOT / "docs" / "guide"


def quick_start_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```bash\n(.+?)\n```", section)


def test_quick_start_has_exactly_two_commands():
    commands = quick_start_commands()
    assert len(commands) == 2
    assert 'qcat classify "dior gaudron"' in commands[0]
    assert "pytest" in commands[1]


def test_ci_runs_the_readme_test_command_verbatim():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert quick_start_commands()[1] in ci


@pytest.mark.slow
def test_the_readme_demo_scores_are_what_the_demo_model_prints():
    """Every score the README quotes for the demo model comes from `qcat classify` today: a
    rebuilt demo model must come with its README figures."""
    from qcat.classifier import Classifier

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    start = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    classify_page = (GUIDE / "classify.md").read_text(encoding="utf-8")  # the guide's "Classifying queries"
    quoted = re.search(r"near-zero score \((\d\.\d\d)\).*?\((\d\.\d\d), (\d\.\d\d) and (\d\.\d\d) for the right leaf\)",
                       start, re.S)
    bed = re.search(r'"king poster bed" gets\s+Sofa Beds & Futons, the demo catalog\'s only\s+beds, first at (\d\.\d\d), '
                    r'barely ahead of two toy categories at (\d\.\d\d) and (\d\.\d\d)', classify_page)
    assert quoted and bed, "the demo scores of the README's quick start or docs/guide/classify.md moved: update this test"
    queries = ["dior gaudron", "hornby train set", "lego star wars", "rocketfish usb cable"]
    top = [result.categories[0].score for result in Classifier.load().classify(queries, 1)]
    assert [f"{score:.2f}" for score in top] == list(quoted.groups())
    (bed_result,) = Classifier.load().classify(["king poster bed"], 3)
    assert [c.path.startswith("Toys") for c in bed_result.categories] == [False, True, True]
    assert bed_result.categories[0].path.endswith("Sofa Beds & Futons")
    assert [f"{c.score:.2f}" for c in bed_result.categories] == [bed.group(1), bed.group(2), bed.group(3)]


def test_the_patience_claim_follows_the_stopping_rule():
    """Issue 34, item 14: docs/benchmarks.md said `--patience 8` means the third cosine period
    (epochs 7-14) "always finishes"; a run with best epoch 5 stopped after 13. The trainer stops
    `patience` epochs after the best one (training/xmlq/train.py, ValidationMonitor)."""
    pages = [ROOT / "docs" / "benchmarks.md", *sorted((ROOT / "docs" / "benchmarks").glob("*.md"))]
    docs = "\n".join(page.read_text(encoding="utf-8") for page in pages)  # the benchmark pages, by area
    assert "always finishes" not in docs
    claim = re.search(r"`--patience (\d+)`:\s+a run stops \1 epochs after its best one, so the third cosine period\s+"
                      r"\(epochs 7–(\d+)\) finishes only\s+when the best epoch is (\d+) or later \(a run whose best "
                      r"epoch is (\d+) stops after epoch (\d+)\)", docs)
    assert claim, "the sentence on --patience 8 in docs/benchmarks/ moved: update this test"
    patience, end, earliest, best, stopped = map(int, claim.groups())
    assert earliest + patience == end and best + patience == stopped < end
    source = (ROOT / "training" / "xmlq" / "train.py").read_text(encoding="utf-8")
    assert "elif epoch + 1 - self.best_epoch >= self.patience:" in source  # the rule the claim rests on


# ---------------------------------------------------------------- the guide's command lines

def _hook():
    """docs/hooks/qcat_reference.py, the MkDocs hook that generates the CLI reference: its
    ``parse_command_line`` parses as ``qcat`` does, with the parser each command really uses."""
    spec = importlib.util.spec_from_file_location("qcat_docs_reference", ROOT / "docs" / "hooks" / "qcat_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def documented_pages() -> list[Path]:
    return [ROOT / "README.md", *sorted(GUIDE.glob("*.md")), *sorted((ROOT / "docs" / "development").glob("*.md"))]


def command_lines(path: Path) -> list[tuple[str, list[str]]]:
    """Every ``qcat ...`` command in the page's ```bash blocks: continuation lines joined, comments
    dropped, one command per pipeline stage or ``&&``/``;`` part, environment assignments before it
    skipped. (line as written, argv after ``qcat``)"""
    text = path.read_text(encoding="utf-8")
    found = []
    for block in re.findall(r"^[ \t]*```bash\n(.*?)^[ \t]*```", text, re.S | re.M):
        for line in re.sub(r"\\\n\s*", " ", block).splitlines():
            words = shlex.split(line, comments=True)
            command: list[str] = []
            for word in words + [";"]:
                if word in ("|", "&&", ";", "||"):
                    while command and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", command[0]):
                        command.pop(0)
                    if command[:1] == ["qcat"]:
                        found.append((line.strip(), command[1:]))
                    command = []
                else:
                    command.append(word)
    return found


def test_the_guide_shows_command_lines():
    lines = {path.name: command_lines(path) for path in documented_pages()}
    assert sum(map(len, lines.values())) >= 60, lines
    for page in ("README.md", "classify.md", "own-data.md", "training.md", "catalog.md", "xmlq-gpu.md", "serving.md",
                 "evaluating.md", "golden.md", "judging.md", "judging-your-engine.md", "demo-corpus.md"):
        assert lines[page], f"no qcat command found in {page}"


@pytest.mark.parametrize("path", documented_pages(), ids=lambda path: path.relative_to(ROOT).as_posix())
def test_every_command_line_shown_parses(path):
    """A flag renamed or removed in the code fails here until the README or the guide follows.
    Placeholders (DIR, A, B, HYBRID, CATEGORY_ID) are ordinary arguments to argparse."""
    hook = _hook()
    for line, argv in command_lines(path):
        try:
            hook.parse_command_line(argv)
        except SystemExit as exc:  # argparse's own exit (--help, or a parser that is not qcat's)
            raise AssertionError(f"{path.name}: `{line}` exits {exc.code}") from None
        except Exception as exc:
            raise AssertionError(f"{path.name}: `{line}` does not parse: {exc}") from None


@pytest.mark.slow
def test_the_guide_classify_examples_run_on_the_demo_model(capsys):
    """The guide's `qcat classify` lines that need no model of the reader's run as written on the
    demo model (exit 0, something printed)."""
    from qcat.cli import main

    ran = 0
    for line, argv in command_lines(GUIDE / "classify.md"):
        if argv[:1] != ["classify"] or "--model" in argv or len(argv) < 2:
            continue
        status = main(argv)
        out, err = capsys.readouterr()
        assert status == 0 and out.strip(), f"`{line}` exited {status}: {err}"
        ran += 1
    assert ran >= 4


def test_the_measured_cpu_command_of_the_gpu_guide_runs_as_written():
    """Issue 45, item 22: the command whose checkpoint sizes xmlq-gpu.md gives lacked --out (exit 2)."""
    text = re.sub(r"```.*?```", "", (GUIDE / "xmlq-gpu.md").read_text(encoding="utf-8"), flags=re.S)
    text = re.sub(r"\s+", " ", text)
    spans = [span for span in re.findall(r"`([^`]+)`", text)
             if "qcat train xmlq --epochs 1 --log tests/data/bestbuy_clicks_sample.csv" in span]
    assert len(spans) == 1, spans
    argv = shlex.split(spans[0].split("qcat ", 1)[1])
    _hook().parse_command_line(argv)  # raises (or exits 2) on a missing --out


WALKTHROUGH_OUTPUTS = ("category-report/", "demo-audit/", "demo-eval/", "demo-gold.tsv", "demo-judging.db",
                       "demo-judgments.csv", "traffic.txt", "judgments.csv", "session.qrels", "qcat-audit/",
                       "pool.txt", "learn.db", "judged.tsv", "nb-judged/", "hybrid-judged/", "learn-eval/")


@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="not a git checkout: .gitignore is not in force")
def test_the_walkthroughs_outputs_are_ignored_by_git():
    """Issue 45, item 22: what the guides' walkthroughs write at the repository root is ignored."""
    result = subprocess.run(["git", "check-ignore", "--no-index", "--verbose", "--non-matching",
                             *WALKTHROUGH_OUTPUTS], cwd=ROOT, capture_output=True, text=True)
    unmatched = [line.split("\t")[-1] for line in result.stdout.splitlines() if line.startswith("::")]
    assert unmatched == [], f"not in .gitignore: {unmatched}"
