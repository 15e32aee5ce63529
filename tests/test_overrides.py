"""Judged overrides (issue 47 item 3): a bundle's overrides.tsv, served first by classify, serve and the Python API."""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import qcat
from qcat.bundles.bundle import read_manifest
from qcat.classifier import Classifier, load_model
from qcat.cli import main
from qcat.errors import BundleError, InputError
from qcat.models.overrides import JUDGED, OVERRIDES_FILE, OverriddenModel

REPO = Path(__file__).resolve().parent.parent
DEMO = REPO / "demo" / "qcat_demo" / "model"
# The demo model answers "tv" with c542, c441, c534 (NB) and "lego star wars" with c458, c441 (blend).
OVERRIDES = {"tv": ["c106", "c108"], "lego star wars": ["c441"]}
OTHERS = ["tv stand", "king poster bed", "lego", "nintendo switch controller", "usb c cable", "iphone 4 case"]


@pytest.fixture(scope="module")
def demo():
    return load_model(DEMO)


@pytest.fixture(scope="module")
def bundle(tmp_path_factory, demo):
    """The demo model's bundle written by save_bundle with overrides, as `qcat train ... --overrides` writes it."""
    from qcat.training.commands.bundles import save_bundle

    dataset = SimpleNamespace(table=SimpleNamespace(queries=np.array(["tv", "lego"])), split=np.array([0, 2]))
    out = tmp_path_factory.mktemp("overrides") / "model"
    save_bundle(demo, out, dataset, overrides=OVERRIDES)
    return out


@pytest.fixture(scope="module")
def classifier(bundle):
    return Classifier.load(bundle)


@pytest.mark.slow
def test_the_file_is_listed_hashed_and_verified(bundle):
    manifest = read_manifest(bundle)  # verifies every hash
    text = (bundle / OVERRIDES_FILE).read_text(encoding="utf-8")
    assert text == "query\tcategories\nlego star wars\tc441\ntv\tc106\tc108\n"
    assert manifest.data["files"][OVERRIDES_FILE] == hashlib.sha256(text.encode()).hexdigest()
    assert not (bundle / "nb" / OVERRIDES_FILE).exists()  # a part loaded on its own has none


@pytest.mark.slow
def test_a_tampered_overrides_file_is_refused(bundle, tmp_path, capsys):
    copy = Path(shutil.copytree(bundle, tmp_path / "tampered"))
    (copy / OVERRIDES_FILE).write_text("query\tcategories\ntv\tc542\n", encoding="utf-8")
    with pytest.raises(BundleError, match=f"{OVERRIDES_FILE} does not match its hash"):
        Classifier.load(copy)
    assert main(["classify", "--model", str(copy), "tv"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("qcat: error: ") and "overrides.tsv does not match its hash" in err


def rehashed(directory: Path, text: str) -> Path:
    """``directory`` with a new overrides.tsv whose hash the manifest records (a file qcat did not write)."""
    (directory / OVERRIDES_FILE).write_text(text, encoding="utf-8")
    manifest = json.loads((directory / "manifest.json").read_text())
    manifest["files"][OVERRIDES_FILE] = hashlib.sha256(text.encode()).hexdigest()
    (directory / "manifest.json").write_text(json.dumps(manifest))
    return directory


@pytest.mark.slow
def test_a_well_hashed_but_wrong_overrides_file_is_refused_naming_what(bundle, tmp_path):
    copy = Path(shutil.copytree(bundle, tmp_path / "copy"))
    rehashed(copy, "query\tcategories\ntv\tc99999\n")
    with pytest.raises(BundleError, match=r"overrides.tsv: query 'tv': category 'c99999' is not one of the model's"):
        Classifier.load(copy)
    assert Classifier.load(copy, overrides=False).classify(["tv"], 1)[0].source == "nb"
    rehashed(copy, "query,categories\ntv\tc106\n")
    with pytest.raises(BundleError, match=r"overrides.tsv: the first line must be the header 'query\\tcategories'"):
        Classifier.load(copy)
    rehashed(copy, "query\tcategories\ntv\tc106\ntv\tc108\n")
    with pytest.raises(BundleError, match=r"overrides.tsv: line 3: query 'tv' is listed twice"):
        Classifier.load(copy)


@pytest.mark.slow
def test_a_wrong_overrides_file_is_named_once(bundle, demo, tmp_path, capsys):
    """Issue 53 item 13b: the message read `overrides.tsv: overrides.tsv: query ...`."""
    copy = rehashed(Path(shutil.copytree(bundle, tmp_path / "once")), "query\tcategories\ntv\tc99999\n")
    assert main(["classify", "--model", str(copy), "tv"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"qcat: error: model bundle {copy}: overrides.tsv: query 'tv': category 'c99999' is "), err
    assert err.count(OVERRIDES_FILE) == 1
    with pytest.raises(InputError, match=r"^overrides: query 'tv': category 'c99999'"):  # a dict, in Python
        OverriddenModel(demo, {"tv": ["c99999"]})


def test_save_bundle_refuses_unknown_categories_and_unnormalized_queries(demo, tmp_path):
    from qcat.training.commands.bundles import save_bundle

    dataset = SimpleNamespace(table=SimpleNamespace(queries=np.array(["tv"])), split=np.array([0]))
    with pytest.raises(InputError, match=r"--overrides: query 'tv': category 'c99999' is not one of the model's 579"):
        save_bundle(demo, tmp_path / "a", dataset, overrides={"tv": ["c106", "c99999"]})
    with pytest.raises(InputError, match=r"query ' TV' is not a normalized query \(it normalizes to 'tv'\)"):
        save_bundle(demo, tmp_path / "b", dataset, overrides={" TV": ["c106"]})
    with pytest.raises(InputError, match="has no category"):
        save_bundle(demo, tmp_path / "c", dataset, overrides={"tv": []})
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists() and not (tmp_path / "c").exists()


@pytest.mark.slow
def test_an_overridden_query_answers_its_judged_categories_first(classifier, demo):
    own = demo.predict(["tv"], 7)
    assert [demo.labels[i] for i in own.labels[0][:3]] == ["c542", "c441", "c534"]
    for query in ("TV", " tv", "Tv!"):
        [result] = classifier.classify([query], k=5)
        assert result.source == JUDGED and result.normalized == "tv" and result.calibrated is True
        assert [c.id for c in result.categories] == ["c106", "c108", "c542", "c441", "c534"]
        assert [c.score for c in result.categories[:2]] == [1.0, 1.0]
        assert np.allclose([c.score for c in result.categories[2:]], own.scores[0][:3])
    # a judged category the model ranks too comes once, first, at 1.0
    [lego] = classifier.classify(["Lego Star Wars"], k=3)
    assert [c.id for c in lego.categories] == ["c441", "c458", "c445"]
    assert lego.categories[0].score == 1.0 and lego.categories[1].score == pytest.approx(0.902744, abs=1e-6)
    assert [c.id for c in classifier.classify(["tv"], k=1)[0].categories] == ["c106"]
    assert [c.id for c in classifier.classify(["tv"], k=5, min_score=0.2)[0].categories] == ["c106", "c108", "c542"]


@pytest.mark.slow
def test_other_queries_answer_exactly_as_without_overrides(classifier, demo):
    queries = OTHERS + ["tv", "TV remote"]
    for k in (1, 5, 20, 30):
        plain, overridden = demo.predict(queries, k), classifier.model.predict(queries, k)
        rows = [i for i, q in enumerate(queries) if q != "tv"]
        assert np.array_equal(plain.labels[rows], overridden.labels[rows])
        assert np.array_equal(plain.scores[rows], overridden.scores[rows])
        assert [plain.sources[i] for i in rows] == [overridden.sources[i] for i in rows]
        assert overridden.sources[queries.index("tv")] == JUDGED


@pytest.mark.slow
def test_the_single_query_path_and_batches_agree(bundle):
    compiled = Classifier.load(bundle).compile()
    batch = Classifier.load(bundle)
    queries = ["tv", "lego star wars", "tv stand", "LEGO star wars", "king poster bed"]
    for k in (1, 3, 5, 25):
        one = [compiled.classify([q], k)[0] for q in queries]
        assert [r.to_json() for r in one] == [r.to_json() for r in batch.classify(queries, k)]
        assert [r.source for r in one] == [JUDGED, JUDGED, "blend", JUDGED, "blend"]
    # the service shares one call between requests whose k share a group: the same answers cut
    assert compiled.k_group(3) == compiled.k_group(5) != compiled.k_group(25)


@pytest.mark.slow
def test_overrides_can_be_turned_off_and_load_model_leaves_them_out(bundle, demo):
    for model in (Classifier.load(bundle, overrides=False).model, load_model(bundle)):
        assert not isinstance(model, OverriddenModel)
        assert np.array_equal(model.predict(["tv"], 5).labels, demo.predict(["tv"], 5).labels)
    assert isinstance(load_model(bundle, overrides=True), OverriddenModel)
    assert qcat.load(bundle).classify(["tv"], k=1)[0].categories[0].id == "c106"
    assert qcat.load(bundle, overrides=False).classify(["tv"], k=1)[0].source == "nb"
    part = Classifier.load(bundle / "nb")  # a hybrid's part loaded on its own: the top level's file is not its
    assert part.classify(["tv"], k=1)[0].source == "nb" and not isinstance(part.model, OverriddenModel)
    nb = Classifier.load(bundle, backend="nb")  # routing by flag keeps the bundle's overrides
    assert nb.classify(["tv"], k=1)[0].source == JUDGED and nb.model.route_to == "nb"


@pytest.mark.slow
def test_classify_cli_json_explain_and_no_overrides(bundle, capsys):
    assert main(["classify", "--model", str(bundle), "--json", "--explain", "-k", "3", " TV", "tv stand"]) == 0
    tv, stand = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert tv["source"] == "judged" and tv["normalized"] == "tv"
    assert [c["id"] for c in tv["categories"]] == ["c106", "c108", "c542"] and tv["categories"][0]["score"] == 1.0
    assert tv["explanation"][0] == "answered by judged"
    assert tv["explanation"][1].startswith("judged override: 'tv' was judged Exact for c106 (Electronics > ")
    assert stand["source"] == "blend" and not any("judged" in line for line in stand["explanation"])
    assert main(["classify", "--model", str(bundle), "-k", "2", "TV"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "TV  [hybrid: judged]" and out[1].split()[:3] == ["1.", "1.000", "c106"]
    assert main(["classify", "--model", str(bundle), "--no-overrides", "--json", "-k", "1", "TV"]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert plain["source"] == "nb" and plain["categories"][0]["id"] == "c542"


@pytest.mark.slow
def test_info_counts_the_overrides(bundle, capsys):
    assert main(["info", str(bundle)]) == 0
    out = capsys.readouterr().out
    assert "overrides      2 judged queries answered first with 3 categories judged Exact (overrides.tsv;" in out
    assert main(["info", str(DEMO)]) == 0
    assert "overrides " not in capsys.readouterr().out


@pytest.mark.slow
def test_serve_answers_overrides_and_no_overrides_leaves_them_out(bundle):
    sys.path.insert(0, str(REPO / "benchmarks"))
    from serve_load import ServerProcess
    from test_serve import call

    from qcat.serve.config import ServeConfig
    from qcat.serve.loading import load

    server = ServerProcess(["--model", str(bundle), "--no-access-log"])
    try:
        status, _, body = call(server.port, "GET", "/v1/classify?q=%20TV&k=3")
        assert status == 200 and body["results"][0]["source"] == "judged"
        assert [c["id"] for c in body["results"][0]["categories"]] == ["c106", "c108", "c542"]
        status, _, body = call(server.port, "POST", "/v1/classify", {"queries": ["tv", "tv stand", "lego star wars"],
                                                                     "k": 2})
        assert [r["source"] for r in body["results"]] == ["judged", "blend", "judged"]
        assert [[c["id"] for c in r["categories"]] for r in body["results"]] == [["c106", "c108"], ["c496", "c534"],
                                                                                  ["c441", "c458"]]
        assert call(server.port, "GET", "/v1/model")[2]["overrides"] == 2
    finally:
        assert server.stop() == 0
    plain = load(ServeConfig(model=bundle, overrides=False))
    assert plain.classifier.classify(["tv"], 1)[0].source == "nb" and "overrides" not in plain.summary()


def test_qcat_train_judged_overrides_end_to_end(tmp_path, capsys):
    """`qcat train nb --judged FILE --overrides` (issue 47 item 2's flag) writes what classify serves first."""
    from tests.test_own_data import BESTBUY, CLICKS
    from tests.test_train_judged import JUDGED, TV

    judged = tmp_path / "judged.tsv"
    judged.write_text(JUDGED)
    out = tmp_path / "nb"
    assert main(["train", "nb", "--log", str(CLICKS), "--taxonomy", str(BESTBUY), "--min-clicks", "1",
                 "--judged", str(judged), "--overrides", "--out", str(out)]) == 0
    capsys.readouterr()
    assert (out / OVERRIDES_FILE).read_text() == f"query\tcategories\n13 3 case\t{TV}\namp\t{TV}\nzzq widget\t{TV}\n"
    assert main(["classify", "--model", str(out), "--json", "-k", "2", "AMP", "ZZQ  widget", "13 3 case"]) == 0
    results = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["source"] for r in results] == ["judged"] * 3
    assert [r["categories"][0]["id"] for r in results] == [TV] * 3
    assert [r["categories"][0]["score"] for r in results] == [1.0] * 3
    assert main(["classify", "--model", str(out), "--json", "-k", "3", "--no-overrides", "AMP", "ZZQ  widget",
                 "13 3 case"]) == 0
    plain = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["source"] for r in plain] == ["lookup"] * 3 and [r["categories"][0]["score"] for r in plain] == \
        pytest.approx([0.833333, 1.0, 0.909091], abs=1e-6)  # the model's own, TV first too
    for judged_result, own in zip(results, plain):  # after the judged TV: the model's own answers without TV
        assert judged_result["categories"][1:] == [c for c in own["categories"] if c["id"] != TV][:1]
    assert main(["info", str(out)]) == 0
    assert "overrides      3 judged queries answered first with 1 categories judged Exact" in capsys.readouterr().out


@pytest.mark.slow
def test_overrides_of_a_bundle_from_before_query_folding_are_folded_on_load(bundle, tmp_path, capsys):
    """A bundle saved under normalizer 1 (before issue 53's folding: no "normalizer" in its manifest)
    may hold overrides that are no longer in normal form ("men's", "yoga-mat"): they load folded,
    judged categories merged in order, and classify warns once that the bundle predates the normalizer."""
    copy = rehashed(Path(shutil.copytree(bundle, tmp_path / "old")),
                    "query\tcategories\nmen's\tc106\nmens\tc108\tc106\nyoga-mat\tc441\n")
    manifest = json.loads((copy / "manifest.json").read_text())
    del manifest["normalizer"]
    (copy / "manifest.json").write_text(json.dumps(manifest))
    old = Classifier.load(copy)
    assert old.model.overrides == {"mens": ("c106", "c108"), "yoga mat": ("c441",)}
    [answer] = old.classify(["Men\u2019s"], k=2)
    assert answer.source == JUDGED and [c.id for c in answer.categories] == ["c106", "c108"]
    assert main(["classify", "--model", str(copy), "Yoga-Mat", "-k", "1"]) == 0
    out, err = capsys.readouterr()
    assert "c441" in out and err.count("\n") == 1 and "trained under query normalizer 1" in err
