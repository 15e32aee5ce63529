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

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from qcat.classifier import Classifier

__version__ = "0.1.0"
__all__ = ["__version__", "load"]


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
