"""The optional extras (pyproject.toml's optional dependencies): the modules each brings, the
extras each includes, and the one check that an extra is installed, naming it when it is not.

``qcat.training``, ``qcat.evaluation`` and ``qcat.judging`` check their extra when imported, and
the command line checks a command's extra before it parses anything (:mod:`qcat.cli`). A command
that uses only part of its extra checks that part (:data:`COMMAND_MODULES`): ``qcat train xmlq``
on a GPU image needs neither LightGBM (the re-ranker's learner) nor tf2onnx (the ONNX exporter
under TensorFlow; the trainer says before it trains which exporter it will use,
:func:`qcat.training.xmlq.export.export_plan`).
"""

from __future__ import annotations

import importlib.util

EXTRA_MODULES = {
    "data": ("scipy", "duckdb", "pyarrow", "rich"),
    "train": ("keras", "tf2onnx", "onnx", "lightgbm"),
    "eval": ("matplotlib", "bm25s"),
    "judge": ("streamlit", "sqlalchemy", "alembic", "psycopg", "markdown_it"),
    "spark": ("pyspark",),
}
DISTRIBUTIONS = {"markdown_it": "markdown-it-py"}  # a module whose distribution has another name
EXTRA_INCLUDES = {"train": ("data",), "eval": ("data",), "judge": ("eval", "data"), "spark": ("data",)}
# The modules of its extra a command uses, where that is fewer than the extra brings (the
# extras it includes are checked whole). A missing one is named with the command's extra.
COMMAND_MODULES = {
    ("train", "xmlq"): ("keras", "onnx"),  # the network and its graph (quantization); the exporter: export_plan
    ("train", "rerank"): ("lightgbm",),
    ("train", "nb"): (),
    ("train", "xreg"): (),
    ("train", "hybrid"): (),
}
PACKAGE_MODULES = {"qcat.training.xmlq": COMMAND_MODULES["train", "xmlq"],
                   "qcat.training.rerank": COMMAND_MODULES["train", "rerank"]}


def first_missing(extra: str, modules: tuple[str, ...] | None = None) -> str | None:
    """The first module of ``extra`` (or of an extra it includes) that is not installed, or None.
    With ``modules``, those stand for ``extra``'s own (the extras it includes are checked whole)."""
    for name in (extra, *EXTRA_INCLUDES.get(extra, ())):
        for module in (modules if name == extra and modules is not None else EXTRA_MODULES[name]):
            if importlib.util.find_spec(module) is None:
                return module
    return None


def require_extra(extra: str, package: str) -> None:
    """Raise ImportError naming ``extra`` and its pip line when one of its modules that ``package``
    uses (:data:`PACKAGE_MODULES`; by default all) is missing."""
    module = first_missing(extra, PACKAGE_MODULES.get(package))
    if module is not None:
        raise ImportError(f"{package} needs the '{extra}' extra (module {module!r} is missing): "
                          f'pip install "qcat[{extra}]"', name=module)
