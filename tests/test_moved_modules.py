"""Issue 48 sorted qcat/ into subpackages: the old module paths still import, warn with the new
path, and give the very same objects (so ``from qcat.nb import NaiveBayesModel`` keeps working)."""

from __future__ import annotations

import importlib
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

import qcat


@pytest.mark.parametrize(("old", "new", "name"), [
    ("qcat.nb", "qcat.models.nb", "NaiveBayesModel"),
    ("qcat.bundle", "qcat.bundles.bundle", "read_manifest"),
    ("qcat.normalize", "qcat.text.normalize", "normalize"),
    ("qcat.model", "qcat.models.model", "Model"),
])
def test_an_old_path_warns_with_the_new_one_and_is_the_same_module(old: str, new: str, name: str) -> None:
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=rf"{old} moved to {new}"):
        module = importlib.import_module(old)
    moved = importlib.import_module(new)
    assert module is moved and getattr(module, name) is getattr(moved, name)
    assert module.__name__ == new and module.__spec__.name == new  # the module keeps its own name


def test_from_an_old_path_import_works_in_a_fresh_interpreter() -> None:
    code = ("import warnings; warnings.simplefilter('error')\n"
            "try:\n    from qcat.nb import NaiveBayesModel\nexcept DeprecationWarning as w: print(w)\n"
            "warnings.simplefilter('ignore')\n"
            "from qcat.nb import NaiveBayesModel; from qcat.hybrid import HybridModel; import qcat.xreg\n"
            "import qcat.models.nb, qcat.models.hybrid, qcat.models.xreg\n"
            "assert NaiveBayesModel is qcat.models.nb.NaiveBayesModel\n"
            "assert HybridModel is qcat.models.hybrid.HybridModel\n"
            "assert qcat.xreg is qcat.models.xreg\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "qcat.nb moved to qcat.models.nb; import qcat.models.nb instead"


def test_every_old_path_names_a_module_that_exists() -> None:
    for old, new in qcat.MOVED.items():
        assert importlib.util.find_spec(new) is not None, new
        assert not (Path(qcat.__path__[0]) / f"{old.split('.')[1]}.py").exists(), f"{old} is a module again"


def test_the_public_paths_need_no_alias() -> None:
    from qcat.classifier import Classifier, load_model, model_from_manifest

    assert qcat.load and Classifier.load and load_model and model_from_manifest
    assert "qcat.taxonomy" not in qcat.MOVED and "qcat.cli" not in qcat.MOVED and "qcat.classifier" not in qcat.MOVED
