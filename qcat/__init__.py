"""qcat: e-commerce query categorization into the leaf categories of a product taxonomy.

This package is the serving runtime. It never imports TensorFlow or training code.

    >>> import qcat
    >>> classifier = qcat.load()            # the demo model (qcat-demo), or qcat.load("my-model")
    >>> classifier.classify(["lego star wars"], k=1)[0].categories[0].path
    'Toys & Hobbies > Characters & Brands > Star Wars > Toys'

Training from Python is :mod:`qcat.training` (``train_nb``, ``train_xreg``, ``train_xmlq``,
``train_hybrid``, ``train_rerank``).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from qcat.version import __version__

if TYPE_CHECKING:
    from qcat.classifier import Classifier

__all__ = ["__version__", "load"]

# Issue 48 sorted the core into subpackages by concern. The old module paths still import, with a
# DeprecationWarning that names the new one, and give the very same module object.
MOVED = {f"qcat.{old}": new for old, new in {
    "normalize": "qcat.text.normalize", "lines": "qcat.text.lines",
    "output": "qcat.console.output", "progress": "qcat.console.progress", "extras": "qcat.console.extras",
    "paths": "qcat.inputs.paths", "confusable": "qcat.taxonomy.confusable",
    "bundle": "qcat.bundles.bundle", "demo": "qcat.bundles.demo",
    "model": "qcat.models.model", "calibration": "qcat.models.calibration", "overrides": "qcat.models.overrides",
    "nb": "qcat.models.nb", "xreg": "qcat.models.xreg", "label_tree": "qcat.models.label_tree",
    "xmlq": "qcat.models.xmlq", "hybrid": "qcat.models.hybrid", "kernels": "qcat.models.kernels",
    "sparse_rows": "qcat.models.sparse_rows", "query_encoding": "qcat.models.query_encoding",
    "bm25": "qcat.rerank.bm25", "info": "qcat.cli.info", "labelwise": "qcat.cli.labelwise",
}.items()}


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """``import qcat.nb`` -> the module ``qcat.models.nb`` (one object under both names), warning."""

    def __init__(self) -> None:
        self.specs: dict = {}

    def find_spec(self, fullname, path=None, target=None):  # noqa: ANN001, ANN201 (the finder protocol)
        return importlib.util.spec_from_loader(fullname, self) if fullname in MOVED else None

    def create_module(self, spec):  # noqa: ANN001, ANN201
        new = MOVED[spec.name]
        warnings.warn(f"{spec.name} moved to {new}; import {new} instead", DeprecationWarning, stacklevel=2)
        module = importlib.import_module(new)
        self.specs[new] = module.__spec__
        return module

    def exec_module(self, module) -> None:  # noqa: ANN001
        module.__spec__ = self.specs[module.__name__]  # the import system set the old name's spec on it


if not any(isinstance(finder, _MovedModules) for finder in sys.meta_path):
    sys.meta_path.append(_MovedModules())


def load(path: str | Path | None = None, *, backend: str | None = None, cutoff: int | None = None,
         overrides: bool = True) -> "Classifier":
    """Verify and load a model bundle: ``path``, else ``$QCAT_MODEL``, else the demo model.

    The classifier's ``classify(queries, k=5, min_score=None)`` returns one
    :class:`qcat.classifier.Classification` (a frozen dataclass; ``to_json()`` gives the dict of
    ``qcat classify --json``) per query, and ``explain(query)`` says which part answered and why.
    ``backend`` and ``cutoff`` choose how a hybrid bundle answers, as the flags of ``qcat classify``.
    A bundle's judged overrides (:mod:`qcat.overrides`) answer their queries first, with source
    ``judged``; ``overrides=False`` is ``--no-overrides``: the model alone.
    """
    from qcat.classifier import Classifier

    return Classifier.load(path, backend=backend, cutoff=cutoff, overrides=overrides)
