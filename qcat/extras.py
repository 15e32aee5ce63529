"""The optional extras (pyproject.toml's optional dependencies): the modules each brings, the
extras each includes, and the one check that an extra is installed, naming it when it is not.

``qcat.training``, ``qcat.evaluation`` and ``qcat.judging`` check their extra when imported, and
the command line checks a command's extra before it parses anything (:mod:`qcat.cli`).
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


def first_missing(extra: str) -> str | None:
    """The first module of ``extra`` (or of an extra it includes) that is not installed, or None."""
    for name in (extra, *EXTRA_INCLUDES.get(extra, ())):
        for module in EXTRA_MODULES[name]:
            if importlib.util.find_spec(module) is None:
                return module
    return None


def require_extra(extra: str, package: str) -> None:
    """Raise ImportError naming ``extra`` and its pip line when one of its modules is missing."""
    module = first_missing(extra)
    if module is not None:
        raise ImportError(f"{package} needs the '{extra}' extra (module {module!r} is missing): "
                          f'pip install "qcat[{extra}]"', name=module)
