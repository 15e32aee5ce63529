"""Where the demo model and the demo corpus are.

They ship in their own distribution, ``qcat-demo`` (the ``demo/`` folder of the repository),
under their sources' terms (DATA.md), so that the Apache-2.0 ``qcat`` carries no third-party
data. qcat finds them through the ``qcat_demo`` package when it is installed.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from qcat.errors import InputError

INSTALL_HINT = ("install the qcat-demo distribution (from a clone of qcat: pip install ./demo; "
                "its data is under its sources' own terms, see DATA.md)")


def demo_root() -> Path | None:
    """The installed ``qcat_demo`` package's folder, or None."""
    try:
        return Path(str(resources.files("qcat_demo")))
    except ModuleNotFoundError:
        return None


def demo_model_dir() -> Path:
    """The demo model bundle, or an error saying how to install it."""
    root = demo_root()
    if root is None:
        raise InputError(f"no --model given and the demo model is not installed: pass --model DIR, or {INSTALL_HINT}")
    return root / "model"


def demo_corpus_dir() -> Path:
    """The demo corpus (catalog, taxonomy, simulated click log), or an error saying how to install it."""
    root = demo_root()
    if root is None:
        raise InputError(f"no --corpus given and the demo corpus is not installed: pass --corpus DIR, or {INSTALL_HINT}")
    return root / "corpus"
