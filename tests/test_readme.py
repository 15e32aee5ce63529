"""The README's quick start is what CI runs."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


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


def test_the_readme_demo_scores_are_what_the_demo_model_prints():
    """Every score the README quotes for the demo model comes from `qcat classify` today: a
    rebuilt demo model must come with its README figures."""
    from qcat.classifier import Classifier

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    start = readme.split("## Quick start", 1)[1].split("## Your own data", 1)[0]
    quoted = re.search(r"near-zero score \((\d\.\d\d)\).*?\((\d\.\d\d), (\d\.\d\d) and (\d\.\d\d) for the right leaf\)",
                       start, re.S)
    bed = re.search(r'"king poster bed" gets\s+Sofa Beds & Futons, the demo catalog\'s only\s+beds, third at (\d\.\d\d), '
                    r'behind two toy categories at (\d\.\d\d) and (\d\.\d\d)', start)
    assert quoted and bed, "the README's demo scores moved: update this test with them"
    queries = ["dior gaudron", "hornby train set", "lego star wars", "rocketfish usb cable"]
    top = [result.categories[0].score for result in Classifier.load().classify(queries, 1)]
    assert [f"{score:.2f}" for score in top] == list(quoted.groups())
    (bed_result,) = Classifier.load().classify(["king poster bed"], 3)
    assert [c.path.startswith("Toys") for c in bed_result.categories] == [True, True, False]
    assert bed_result.categories[2].path.endswith("Sofa Beds & Futons")
    assert [f"{c.score:.2f}" for c in bed_result.categories] == [bed.group(2), bed.group(3), bed.group(1)]


def test_the_patience_claim_follows_the_stopping_rule():
    """Issue 34, item 14: docs/benchmarks.md said `--patience 8` means the third cosine period
    (epochs 7-14) "always finishes"; a run with best epoch 5 stopped after 13. The trainer stops
    `patience` epochs after the best one (training/xmlq/train.py, ValidationMonitor)."""
    docs = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    assert "always finishes" not in docs
    claim = re.search(r"`--patience (\d+)`:\s+a run stops \1 epochs after its best one, so the third cosine period\s+"
                      r"\(epochs 7–(\d+)\) finishes only\s+when the best epoch is (\d+) or later \(a run whose best "
                      r"epoch is (\d+) stops after epoch (\d+)\)", docs)
    assert claim, "the sentence on --patience 8 in docs/benchmarks.md moved: update this test"
    patience, end, earliest, best, stopped = map(int, claim.groups())
    assert earliest + patience == end and best + patience == stopped < end
    source = (ROOT / "training" / "xmlq" / "train.py").read_text(encoding="utf-8")
    assert "elif epoch + 1 - self.best_epoch >= self.patience:" in source  # the rule the claim rests on
