import json
import shutil

import numpy as np
import pytest

from qcat.bundles.bundle import MANIFEST, read_manifest
from qcat.classifier import Classifier, load_model
from qcat.errors import BundleError


@pytest.fixture()
def bundle(tmp_path, bestbuy_model_dir):
    target = tmp_path / "model"
    shutil.copytree(bestbuy_model_dir, target)
    return target


def test_round_trip_gives_identical_predictions(bundle, bestbuy_model_dir):
    queries = ["sharp tv", "iphone 4 case", "nothing known here"]
    original = load_model(bestbuy_model_dir).predict(queries, 5)
    again = load_model(bundle).predict(queries, 5)
    assert np.array_equal(original.labels, again.labels)
    assert np.array_equal(original.scores, again.scores)


def test_manifest_lists_hashes_of_every_file(bundle):
    manifest = read_manifest(bundle)
    files = {p.name for p in bundle.iterdir()} - {MANIFEST}
    assert set(manifest.data["files"]) == files
    assert all(len(h) == 64 for h in manifest.data["files"].values())
    for key in ("format_version", "backend", "created", "taxonomy_hash", "vocabulary_hash", "config", "metrics"):
        assert key in manifest.data


@pytest.mark.parametrize("name", ["nb.npz", "vocabulary.txt", "taxonomy.tsv", "labels.txt", "lookup_queries.txt"])
def test_any_modified_file_is_refused(bundle, name):
    with open(bundle / name, "ab") as handle:
        handle.write(b"x")
    with pytest.raises(BundleError, match=f"{name} does not match its hash"):
        Classifier.load(bundle)


def test_missing_file_manifest_and_format(bundle, tmp_path):
    (bundle / "vocabulary.txt").unlink()
    with pytest.raises(BundleError, match="missing vocabulary.txt"):
        load_model(bundle)
    with pytest.raises(BundleError, match="does not exist"):
        load_model(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(BundleError, match="no manifest.json"):
        load_model(tmp_path / "empty")


def test_manifest_edits_are_refused(bundle):
    manifest = json.loads((bundle / MANIFEST).read_text())
    manifest["format_version"] = 99
    (bundle / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(BundleError, match="format 99"):
        load_model(bundle)
    manifest["format_version"] = 1
    manifest["files"]["../etc/passwd"] = "0" * 64
    (bundle / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(BundleError, match="outside the bundle"):
        load_model(bundle)
    del manifest["files"]["../etc/passwd"]
    manifest["backend"] = "pickle"
    (bundle / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(BundleError, match="unknown backend 'pickle'"):
        load_model(bundle)


def test_object_arrays_are_never_unpickled(bundle):
    """An attacker who rewrites nb.npz with a pickled array and fixes the manifest hash
    still cannot make loading run code: npz is read with allow_pickle=False."""
    from qcat.bundles.bundle import sha256_file

    arrays = dict(np.load(bundle / "nb.npz"))
    arrays["label_log_prior"] = np.array([object()], dtype=object)
    np.savez(bundle / "nb.npz", **arrays)
    manifest = json.loads((bundle / MANIFEST).read_text())
    manifest["files"]["nb.npz"] = sha256_file(bundle / "nb.npz")
    (bundle / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(BundleError, match="cannot read nb.npz"):
        load_model(bundle)
