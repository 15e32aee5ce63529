"""The second stage (issue 32): a learned re-ranker over the demo model's candidates.

Fast: the first stage is the shipped demo model, the neighbour index a few hand-written
listings, the trees hand-built or trained by LightGBM on a few hundred rows.
"""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
from single_query_check import assert_same_answers

from qcat.bundles.bundle import read_manifest
from qcat.classifier import Classifier, load_model
from qcat.errors import BundleError
from qcat.rerank.features import feature_names
from qcat.rerank.model import RerankModel
from qcat.rerank.neighbours import build_neighbour_index
from qcat.rerank.trees import TreeEnsemble
from qcat.text.normalize import tokenize

BED = "c146"  # Furniture > Living Room Furniture > Sofa Beds & Futons
LISTINGS = [("king size poster bed frame oak", BED), ("poster bed with canopy king", BED),
            ("queen poster bed solid pine", BED), ("star wars poster", "c542"), ("lego city police car", "c542")]


@pytest.fixture(scope="module")
def first():
    return load_model(Classifier.load().directory)


def neighbour_index(first):
    position = {label: i for i, label in enumerate(first.labels)}
    return build_neighbour_index([tokenize(title) for title, _ in LISTINGS],
                                 np.array([position[label] for _, label in LISTINGS], dtype=np.int32))


def stump(names: tuple[str, ...], feature: str, threshold: float, low: float, high: float) -> TreeEnsemble:
    """One tree of one split: ``low`` at or below ``threshold`` of ``feature``, else ``high``."""
    return TreeEnsemble(np.array([0]), np.array([names.index(feature), -1, -1], dtype=np.int32),
                        np.array([threshold, 0.0, 0.0]), np.array([1, -1, -1]), np.array([2, -1, -1]),
                        np.array([0.0, low, high]), len(names))


def hand_built(first, trees=None) -> RerankModel:
    model = RerankModel(first=first, index=neighbour_index(first), prior=np.full(len(first.labels), 1 / len(first.labels)),
                        trees=None, taxonomy=first.taxonomy, config={}, metrics={})
    names = feature_names(model.answers)
    if trees is None:  # trust the first stage's score, unless most neighbours agree on a category
        trees = TreeEnsemble(
            np.array([0, 3]), np.array([names.index("first_score"), -1, -1, names.index("nbr_share"), -1, -1], dtype=np.int32),
            np.array([0.0, 0, 0, 0.25, 0, 0]), np.array([1, -1, -1, 4, -1, -1]), np.array([2, -1, -1, 5, -1, -1]),
            np.array([0.0, 0.0, 1.0, 0.0, 0.0, 5.0]), len(names))
    return replace(model, trees=trees)


@pytest.mark.slow
def test_the_features_flip_a_wrong_first_stage_answer(first) -> None:
    query = "king size poster bed"
    assert first.labels[first.predict([query], 1).labels[0, 0]] != BED  # the first stage is wrong
    model = hand_built(first)
    candidates, rows = model.query_rows(query, model.answer_one(query))
    names = feature_names(model.answers)
    bed = np.searchsorted(candidates, first.labels.index(BED))
    assert candidates[bed] == first.labels.index(BED)
    assert rows[bed, names.index("nbr_share")] == pytest.approx(0.3)  # 3 of the 10 neighbour slots
    assert rows[bed, names.index("path_overlap")] == 0.0  # "bed" is not "beds": tokens match exactly
    assert model.labels[model.predict([query], 3).labels[0, 0]] == BED
    assert model.labels[model.predict_one(query, 3).labels[0, 0]] == BED
    # a query no listing matches keeps the first stage's answer
    other = "iphone case"
    assert model.predict([other], 1).labels[0, 0] == first.predict([other], 1).labels[0, 0]


@pytest.mark.slow
def test_explain_names_the_features_behind_the_answer(first) -> None:
    lines = hand_built(first).explain("king poster bed", 3)
    assert "re-ranks" in lines[0]
    assert any("answer c146" in line and "nbr_share" in line for line in lines)


@pytest.mark.slow
def test_compiled_path_equals_batch_path(first) -> None:
    model = hand_built(first)
    words = ["king", "poster", "bed", "lego", "police", "iphone", "case", "zzqx", "oak", "samsung", "tv", "dior"]
    rng = np.random.default_rng(0)
    queries = [" ".join(rng.choice(words, rng.integers(1, 6))) for _ in range(60)]
    for k in (1, 5, 25):
        assert_same_answers(model, queries, k)


@pytest.mark.slow
def test_exported_lightgbm_trees_score_as_lightgbm() -> None:
    lightgbm = pytest.importorskip("lightgbm")
    from qcat.training.rerank.trainer import BASE_PARAMS, export_trees, train_booster

    rng = np.random.default_rng(0)
    rows = rng.normal(size=(600, 5))
    rows[:, 3] = rng.integers(0, 3, 600)  # ties on thresholds
    relevant = (rows[:, 0] + 0.5 * rows[:, 3] > 0.8).astype(float)
    booster = train_booster(rows, relevant, np.full(60, 10), None, BASE_PARAMS | {"num_leaves": 7, "min_data_in_leaf": 5}, 30)
    trees = export_trees(booster, 5)
    assert isinstance(booster, lightgbm.Booster)
    np.testing.assert_allclose(trees.score(rows), booster.predict(rows), rtol=0, atol=1e-9)
    contributions = trees.contributions(rows[0])
    root_total = sum(trees.value[root] for root in trees.roots)
    assert root_total + contributions.sum() == pytest.approx(trees.score(rows[:1])[0])


def test_cross_fitting_never_scores_a_query_with_a_ranker_that_saw_it(monkeypatch) -> None:
    from qcat.training.rerank import trainer as rerank
    from qcat.training.rerank.data import Examples, fold_of

    queries = ["sony tv 55", "sony tv", "lego city police car", "lego city", "oak bed", "oak bed frame king",
               "iphone case", "iphone", "dior sauvage", "dior"] * 3
    queries = [f"{q} {i}" if i >= 10 else q for i, q in enumerate(queries)]
    n = len(queries)
    rows = np.column_stack([np.repeat(np.arange(n), 3), np.tile([0.0, 1.0, 2.0], n)])  # column 0: the query's number
    examples = [Examples("set", np.array(queries, dtype=object), np.arange(0, 3 * n + 1, 3), np.tile([0, 1, 2], n),
                         rows, np.tile([1.0, 0.0, 0.0], n), np.tile([1.0, 2.0, 3.0], n))]
    trained_on = []

    class Recorder:
        def __init__(self, seen):
            self.seen = seen

        def predict(self, rows, num_iteration=None):
            assert not set(rows[:, 0].astype(int)) & self.seen, "a query scored by a ranker that trained on it"
            return np.zeros(len(rows))

    def fake_train(rows, relevant, groups, weight, params, rounds, names=None):
        trained_on.append(set(rows[:, 0].astype(int)))
        return Recorder(trained_on[-1])

    monkeypatch.setattr(rerank, "train_booster", fake_train)
    rerank.crossfit(examples, {}, (1,), n_folds=3)
    assert len(trained_on) == 3 and set().union(*trained_on) == set(range(n))
    folds = fold_of(np.array(queries, dtype=object), 3)
    assert folds[queries.index("sony tv 55")] == folds[queries.index("sony tv")]  # a title and its two tokens
    rerank.no_leak_check(examples, 3)


@pytest.mark.slow
def test_bundle_round_trip_is_verified_and_pickle_free(first, tmp_path) -> None:
    from qcat.models.calibration import Calibration

    model = hand_built(first)
    model = replace(model, calibration=Calibration({"rerank": (np.array([0.0, 1.0]), np.array([0.1, 0.9]))}, {}),
                    config={"data": first.config.get("data", {})})
    model.save(tmp_path / "rr")
    loaded = Classifier.load(tmp_path / "rr")
    assert loaded.model.backend == "rerank" and loaded.model.first.backend == "hybrid"
    queries = ["king poster bed", "lego police", "iphone case"]
    expected, got = model.predict(queries, 5), loaded.model.predict(queries, 5)
    np.testing.assert_array_equal(expected.labels, got.labels)
    np.testing.assert_allclose(expected.scores, got.scores, atol=1e-7)
    assert loaded.compile().classify(["king poster bed"], 1)[0].categories[0].id == BED
    manifest = read_manifest(tmp_path / "rr")
    assert manifest.data["first_stage"]["backend"] == "hybrid"
    for name in manifest.data["files"]:
        if name.endswith(".npz"):
            with np.load(tmp_path / "rr" / name, allow_pickle=False) as npz:
                assert all(npz[key].dtype != object for key in npz.files)
    assert {p.suffix for p in (tmp_path / "rr").rglob("*") if p.is_file()} <= {".npz", ".txt", ".json", ".tsv"}
    # a changed first stage is refused, and so is a changed tree file
    (tmp_path / "rr" / "first" / "calibration.json").write_text(json.dumps({"method": "isotonic", "maps": {}}))
    with pytest.raises(BundleError, match="does not match its hash"):
        load_model(tmp_path / "rr")


@pytest.mark.slow
def test_info_and_the_http_service_say_a_second_stage_is_present(first, tmp_path, capsys) -> None:
    import http.client
    import sys
    from pathlib import Path

    from qcat.cli import main

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    from serve_load import ServerProcess

    model = replace(hand_built(first), config={"data": first.config.get("data", {})})
    model.save(tmp_path / "rr")
    assert main(["info", str(tmp_path / "rr")]) == 0
    assert "second stage" in capsys.readouterr().out
    server = ServerProcess(["--model", str(tmp_path / "rr")])
    try:
        def get(path):
            connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
            connection.request("GET", path)
            return json.loads(connection.getresponse().read())

        summary = get("/v1/model")
        assert summary["backend"] == "rerank" and summary["second_stage"]["first_stage"] == "hybrid"
        answer = get("/v1/classify?q=king%20poster%20bed&k=1")
        assert BED in json.dumps(answer)
    finally:
        assert server.stop() == 0


@pytest.mark.slow
def test_qcat_train_rerank_end_to_end(tmp_path, capsys) -> None:
    """The command on the demo model, with a tiny grid (2 leaves, 2 or 3 rounds, 2 folds)."""
    pytest.importorskip("lightgbm")
    from qcat.training.commands.train import main

    out = tmp_path / "reranked"
    assert main("train", ["rerank", "--model", str(Classifier.load().directory), "--out", str(out), "--folds", "2",
                          "--leaves", "2", "--rounds", "2,3", "--candidates", "5"]) == 0
    printed = capsys.readouterr().out
    assert "out of fold" in printed and "chose 2 leaves" in printed and "held-out listings left out" in printed
    manifest = read_manifest(out)
    assert manifest.backend == "rerank" and manifest.config["depth"] == 5
    assert manifest.config["neighbour_listings"]["held_out_left_out"] > 0
    assert set(manifest.metrics["feature_gain"]) == set(manifest.config["features"])
    classifier = Classifier.load(out).compile()
    assert classifier.classify(["hornby train set"], 3)[0].categories
    assert_same_answers(classifier.model, ["hornby train set", "king poster bed", "ipod"], 5)
    from qcat.training.data.provenance import read_seen_fingerprints

    shipped_seen = read_seen_fingerprints(Classifier.load().directory)
    assert np.array_equal(read_seen_fingerprints(out / "first"), shipped_seen)  # the first stage keeps its record
    assert np.isin(shipped_seen, read_seen_fingerprints(out)).all()  # the second stage's covers it
    # Its learner and calibration trained on every validation query, real-text ones too (issue 40, item 4):
    # before, only those that were also in the log were recorded (55 of 1,551 real-title ones).
    from qcat.training.data.corpus import Corpus
    from qcat.training.data.provenance import fingerprints

    corpus = Corpus.open()
    for name in ("real-title", "real-2tok"):
        validation = corpus.query_set(name, "validation").queries
        assert np.isin(fingerprints(list(validation)), read_seen_fingerprints(out)).all(), name
        test = corpus.query_set(name, "test").queries
        assert not np.isin(fingerprints(list(test)), read_seen_fingerprints(out)).all(), name
    # Its setting is compared with the stated default (2 leaves, the first of 2,3 rounds) by paired SE.
    decision = manifest.metrics["selection"]["decision"]
    assert decision["default"] == "2 leaves, 2 rounds" and len(decision["candidates"]) == 2
    assert all("paired_se" in row for row in decision["candidates"])
    assert set(manifest.metrics["selection"]["versus_first_stage"]) == {"difference", "paired_se", "told_apart"}


@pytest.mark.slow
def test_train_rerank_refuses_a_reranker_as_its_first_stage(first, tmp_path) -> None:
    from qcat.errors import InputError
    from qcat.training.commands.train import main

    model = replace(hand_built(first), config={"data": first.config.get("data", {})})
    model.save(tmp_path / "rr")
    with pytest.raises(InputError, match="re-ranker already"):
        main("train", ["rerank", "--model", str(tmp_path / "rr"), "--out", str(tmp_path / "again")])
