"""Issue 53, item 2: when two models saw different numbers of the evaluated queries in training (one
trained on judged test queries), ``qcat evaluate`` gives every headline figure again on the queries
neither saw, side by side, and computes the paired differences on those."""

import json

import numpy as np
import pytest
import scipy.sparse as sp

from qcat.classifier import Classifier
from qcat.evaluation.scoring import add_unseen_scores, differing_sets
from qcat.measure.metrics import Matched
from qcat.training.data.corpus import LogCorpus
from tests.test_own_data import BESTBUY, CLICKS, qcat
from tests.test_train_judged import JUDGED, LOG

SEEN_BY_JUDGED = {"amp", "anastasia cd"}  # the judged file's queries in the log's test split


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory):
    work = tmp_path_factory.mktemp("unseen")
    judged = work / "judged.tsv"
    judged.write_text(JUDGED)
    for name, extra in (("plain", ()), ("judged", ("--judged", judged, "--judged-weight", "10"))):
        result = qcat("train", "nb", *LOG, *extra, "--out", work / name)
        assert result.returncode == 0, result.stderr.decode()
    test = LogCorpus(CLICKS, BESTBUY, 1, 0, "other").dataset().test
    gold_queries = sorted(SEEN_BY_JUDGED) + [q for q in test.queries if q not in SEEN_BY_JUDGED][:10]
    plain = Classifier.load(work / "plain")
    rows = [f"{q}\t{a.categories[0].id}\t{3 if i % 2 else 0}"
            for i, (q, a) in enumerate(zip(gold_queries, plain.classify(gold_queries, k=1)))]
    gold = work / "gold.tsv"
    gold.write_text("query\tcategory\tgrade\n" + "\n".join(rows) + "\n")
    result = qcat("evaluate", "--model", work / "plain", "--name", "plain", "--model", work / "judged", "--name",
                  "judged", *LOG[:4], "--gold", gold, "--out", work / "report")
    assert result.returncode == 0, result.stderr.decode()
    report = json.loads((work / "report" / "report.json").read_text())
    return work, test, gold_queries, report, result


def top1_hits(directory, queries, truth_of) -> np.ndarray:
    answers = Classifier.load(directory).classify(list(queries), k=1)
    return np.array([bool(a.categories) and a.categories[0].id in truth_of[q] for q, a in zip(queries, answers)])


@pytest.mark.slow  # the evaluated fixture trains two models and evaluates them
def test_headline_figures_on_unseen_queries_are_a_plain_recount(evaluated):
    work, test, _, report, result = evaluated
    plain, judged = report["models"]
    assert plain["overlap"]["all"]["seen"] == 0 and judged["overlap"]["all"]["seen"] == 2
    truth_of = {}
    for q, c in zip(test.pair_query.tolist(), test.pair_category.tolist()):
        truth_of.setdefault(test.queries[q], set()).add(test.categories[c])
    unseen = [q for q in test.queries if q not in SEEN_BY_JUDGED]
    hits = {name: top1_hits(work / name, unseen, truth_of) for name in ("plain", "judged")}
    for entry in (plain, judged):
        assert entry["unseen"]["all"]["queries"] == len(unseen) == len(test.queries) - 2
        assert entry["unseen"]["all"]["PR@1"] == pytest.approx(hits[entry["name"]].mean())
    difference = hits["judged"].astype(float) - hits["plain"].astype(float)
    paired = judged["unseen_paired"]["all"]
    assert paired["value"] == pytest.approx(difference.mean())
    assert paired["se"] == pytest.approx(difference.std(ddof=1) / np.sqrt(len(difference)))
    assert "unseen_paired" not in plain
    stderr = result.stderr.decode()
    assert f"judged on unseen queries ({len(unseen)} of the {len(test.queries)} simulated split queries, those no model saw): PR@1 " \
        f"{hits['judged'].mean():.4f}" in stderr
    markdown = (work / "report" / "report.md").read_text()
    assert "Headline figures on unseen queries" in markdown and "PR@1 (%) on unseen queries" in markdown
    assert any("every headline figure there is also given on unseen queries" in note for note in report["notes"])


@pytest.mark.slow  # the evaluated fixture trains two models and evaluates them
def test_gold_figures_and_paired_differences_on_unseen_queries(evaluated):
    _, _, gold_queries, report, result = evaluated
    plain, judged = report["models"]
    assert list(judged["gold"])[:2] == ["all", "all, on unseen queries"]
    on_unseen = judged["gold"]["all, on unseen queries"]
    assert on_unseen["queries"] == len(gold_queries) - 2 == 10
    grades = {q: 3 if i % 2 else 0 for i, q in enumerate(gold_queries)}
    # The plain model's top-1 is the graded category of every query: strict = the share graded 3.
    assert plain["gold"]["all, on unseen queries"]["exact"]["value"] == pytest.approx(
        np.mean([grades[q] == 3 for q in gold_queries[2:]]))
    paired = judged["gold_paired"]["all, on unseen queries"]
    assert paired["win"] + paired["tie"] + paired["loss"] + paired["ungraded"] == 10
    stdout = result.stdout.decode()
    assert "judged on unseen queries: human-judged (gold.tsv, 10 queries" in stdout
    assert "judged on unseen queries vs plain: human-judged top-1 wins" in stdout


@pytest.mark.slow  # trains a model, evaluates it twice
def test_models_that_saw_the_same_queries_get_no_unseen_block(tmp_path):
    result = qcat("train", "nb", *LOG, "--out", tmp_path / "nb")
    assert result.returncode == 0, result.stderr.decode()
    result = qcat("evaluate", "--model", tmp_path / "nb", "--name", "a", "--model", tmp_path / "nb", "--name", "b",
                  *LOG[:4], "--out", tmp_path / "report", "--json")
    assert result.returncode == 0, result.stderr.decode()
    report = json.loads(result.stdout)
    assert all("unseen" not in m for m in report["models"])
    assert "Headline figures on unseen queries" not in (tmp_path / "report" / "report.md").read_text()


def test_unseen_figures_and_the_paired_difference_use_only_the_queries_no_model_saw():
    """Six queries of three labels, the first two seen by one model in training (masked out): the
    unseen figures and the paired PR@1 difference (mean, SE = sd / sqrt(n)) are those of the other
    four; only sets whose seen counts differ are compared, and none while a model's count is unknown."""
    truth = sp.csr_matrix(np.eye(3)[[0, 1, 2, 0, 1, 2]])
    def ranked(top: list[int]) -> Matched:  # each query's top two, as Matched.build ranks them
        labels = np.array([[t, (t + 1) % 3] for t in top])
        return Matched(labels, np.tile([0.9, 0.1], (6, 1)), truth, truth.toarray()[np.arange(6)[:, None], labels])

    plain, judged = ranked([0, 1, 2, 1, 2, 2]), ranked([1, 2, 2, 0, 1, 0])  # top-1 hits: 1 1 1 0 0 1 and 0 0 1 1 1 0
    models = [{"name": "plain"}, {"name": "judged"}]
    add_unseen_scores(models, [{"all": plain}, {"all": judged}], {"all": np.array([False, False, True, True, True, True])})
    assert models[0]["unseen"]["all"] == {"queries": 4, "PR@1": 0.5, "PR@3": 0.5, "PR@10": 0.5}
    assert models[1]["unseen"]["all"]["PR@1"] == 0.75 and "unseen_paired" not in models[0]
    paired = models[1]["unseen_paired"]["all"]  # per-query differences 0, +1, +1, -1
    assert paired["queries"] == 4 and paired["value"] == pytest.approx(0.25)
    assert paired["se"] == pytest.approx(np.std([0, 1, 1, -1], ddof=1) / 2)
    overlap = {"all": {"seen": 0}, "real-title": {"seen": 3}}
    assert differing_sets([{"overlap": overlap}, {"overlap": {"all": {"seen": 2}, "real-title": {"seen": 3}}}]) == ["all"]
    assert differing_sets([{"overlap": overlap}, {"overlap": {"all": {"seen": None}, "real-title": {"seen": 3}}}]) == []
