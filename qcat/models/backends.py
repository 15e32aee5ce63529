"""The backend registry: which class loads each backend's bundle, and loading any bundle's model
(its model alone, or with its judged overrides answered first). The classifier, the hybrid and
the re-ranker (whose parts are bundles of their own) load through it; :mod:`qcat.classifier`
re-exports these names."""

from __future__ import annotations

import importlib
from pathlib import Path

from qcat.bundles.bundle import Manifest, load_bundle_taxonomy, read_manifest
from qcat.errors import BundleError
from qcat.models.model import Model
from qcat.models.overrides import with_overrides

# backend name in manifest.json -> "module:class" with a from_manifest(manifest, taxonomy)
BACKENDS = {
    "nb": "qcat.models.nb:NaiveBayesModel",
    "xmlq": "qcat.models.xmlq:XMLQModel",
    "xreg": "qcat.models.xreg:XRegModel",
    "hybrid": "qcat.models.hybrid:HybridModel",
    "rerank": "qcat.rerank.model:RerankModel",
}


def load_model(directory: str | Path, overrides: bool = False) -> Model:
    """Verify and load the bundle in ``directory``, whatever its backend: its model alone, or
    with ``overrides`` its judged overrides answered first (:mod:`qcat.models.overrides`), as
    :meth:`Classifier.load` serves it."""
    manifest = read_manifest(directory)
    model = model_from_manifest(manifest)
    return with_overrides(model, manifest) if overrides else model


def model_from_manifest(manifest: Manifest) -> Model:
    target = BACKENDS.get(manifest.backend)
    if target is None:
        raise BundleError(f"model bundle {manifest.directory}: unknown backend {manifest.backend!r}")
    module_name, class_name = target.split(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    model = cls.from_manifest(manifest, load_bundle_taxonomy(manifest))
    check_leaves(model, manifest)
    return model


def check_leaves(model: Model, manifest: Manifest) -> None:
    """Refuse a model that would answer internal (non-leaf) nodes of its taxonomy, unless it
    records that it was trained so on purpose (``qcat train --internal-nodes keep``)."""
    data = manifest.config.get("data")
    if isinstance(data, dict) and data.get("internal_nodes") == "keep":
        return
    internal = [label for label in model.labels if not model.taxonomy.is_leaf(label)]
    if internal:
        raise BundleError(f"model bundle {manifest.directory}: {len(internal):,} of its categories are internal nodes "
                          f"of its taxonomy, not leaves (e.g. {internal[0]} {model.taxonomy.path_of(internal[0])}), "
                          f"and it was not trained with --internal-nodes keep: retrain it")
