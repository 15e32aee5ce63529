"""XML-Q where a GPU image has JAX but neither TensorFlow, tf2onnx nor LightGBM (issue 38): in a
virtual environment holding this one's packages but those, ``KERAS_BACKEND=jax qcat train xmlq``
trains, saying before it trains what export will need; with jax2onnx there too, the network is
exported without TensorFlow and its ONNX graph scores as the network does, to 1e-4.

The environments are real virtual environments: each entry of this one's site-packages is linked
into theirs, but those of the left-out distributions, so those packages are absent from them
(nothing is installed, nothing is mocked)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

pytestmark = [pytest.mark.skipif(importlib.util.find_spec("jax") is None or importlib.util.find_spec("keras") is None,
                                 reason="jax or keras is not installed (pip install 'jax[cpu]' keras): "
                                        "XML-Q under JAX is not tested"),
              pytest.mark.usefixtures("xmlq_jax_cache_env")]  # its JAX commands share a compilation cache

TESTS = Path(__file__).parent
ROOT = TESTS.parent
GPU_IMAGE_LACKS = ("tensorflow", "tf2onnx", "lightgbm")  # modules
needs_jax2onnx = pytest.mark.skipif(importlib.util.find_spec("jax2onnx") is None,
                                    reason="jax2onnx is not installed (pip install jax2onnx): XML-Q's ONNX export "
                                           "under JAX is not tested")


def venv_without(root: Path, modules: tuple[str, ...]) -> Path:
    """A virtual environment at ``root`` with this environment's packages but the distributions
    that bring ``modules``; returns its python."""
    providers = importlib.metadata.packages_distributions()
    left_out = set()
    for module in modules:
        for name in providers.get(module, []):
            files = importlib.metadata.distribution(name).files or []
            left_out |= {f.parts[0] for f in files if f.parts and f.parts[0] != ".."}
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    python = root / "bin" / "python"
    target = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                 check=True, capture_output=True, text=True).stdout.strip())
    for here in dict.fromkeys((sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"])):
        for entry in Path(here).iterdir():
            if entry.name not in left_out and entry.name != "__pycache__" and not (target / entry.name).exists():
                (target / entry.name).symlink_to(entry)
    return python


def run(python: Path, *args, **env) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "XLA_FLAGS")}
    environment |= {"KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu", "CUDA_VISIBLE_DEVICES": "", **env}
    return subprocess.run([str(python), *map(str, args)], cwd=ROOT, env=environment, capture_output=True, text=True,
                          timeout=600)


def installed(python: Path, modules) -> list[str]:
    probe = f"import importlib.util, json; print(json.dumps([m for m in {tuple(modules)!r} if importlib.util.find_spec(m)]))"
    return json.loads(run(python, "-c", probe).stdout)


@pytest.fixture(scope="module")
def trained_without_an_exporter(tmp_path_factory, data_dir):
    """``qcat train xmlq --epochs 1`` under JAX with no TensorFlow, tf2onnx, LightGBM or jax2onnx: the
    sample's 438 training queries in 3 whole batches of 146 (a last, smaller batch would cost JAX a
    second compilation of the training step), its vocabulary the other XML-Q tests' (min count 1)."""
    root = tmp_path_factory.mktemp("no-exporter")
    python = venv_without(root / "venv", GPU_IMAGE_LACKS + ("jax2onnx",))
    assert installed(python, GPU_IMAGE_LACKS + ("jax2onnx", "jax", "keras", "onnx")) == ["jax", "keras", "onnx"]
    flags = ["-m", "qcat.cli", "train", "xmlq", "--log", data_dir / "bestbuy_clicks_sample.csv", "--taxonomy",
             data_dir / "bestbuy_categories_2016.json.gz", "--min-clicks", "1", "--batch-size", "146", "--min-token-count",
             "1", "--epochs", "1", "--out", root / "xmlq"]
    return root, flags, run(python, *flags), python


@pytest.mark.slow
def test_xmlq_trains_without_tensorflow_tf2onnx_or_lightgbm(trained_without_an_exporter) -> None:
    root, _, result, _ = trained_without_an_exporter
    lines = result.stdout.splitlines()
    assert lines[0].startswith("training on keras ") and ", jax " in lines[0], result.stdout + result.stderr[-3000:]
    assert next(line for line in lines if line.startswith("epoch ")).startswith("epoch 1: loss ")
    assert sorted(p.name for p in (root / "xmlq.checkpoints").iterdir()) == ["best.weights.h5", "last.npz", "state.json"]


@pytest.mark.slow
def test_xmlq_names_what_export_needs_before_it_trains(trained_without_an_exporter) -> None:
    root, _, result, _ = trained_without_an_exporter
    lines = result.stdout.splitlines()
    said = next(i for i, line in enumerate(lines) if line.startswith("export: "))
    assert said < next(i for i, line in enumerate(lines) if line.startswith("epoch 1: "))
    assert lines[said] == (
        "export: no ONNX exporter is installed here: Keras exports XML-Q under KERAS_BACKEND=jax with jax2onnx (pip "
        "install jax jax2onnx) or under tensorflow with tf2onnx (pip install tensorflow-cpu tf2onnx). Training goes "
        f"on; the network will stay in {root / 'xmlq.checkpoints'}: rerun the command with --resume where one is "
        "installed to export it")
    # after training: the same, as the command's error (exit 2, one message, no traceback)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.startswith("qcat: error: ONNX export: no ONNX exporter is installed here")
    assert "--resume where an exporter is installed" in result.stderr and not (root / "xmlq").exists()


@pytest.mark.slow
@needs_jax2onnx
def test_jax2onnx_exports_the_network_without_tensorflow_to_1e_4(trained_without_an_exporter, tmp_path) -> None:
    """The checkpoint resumed (nothing left to train) where jax2onnx is installed, TensorFlow still
    absent: the bundle's ONNX graph against the network rebuilt from the checkpoint's best weights."""
    root, flags, _, _ = trained_without_an_exporter
    python = venv_without(tmp_path / "venv", GPU_IMAGE_LACKS)
    assert installed(python, GPU_IMAGE_LACKS + ("jax2onnx",)) == ["jax2onnx"]
    resumed = run(python, *flags, "--resume")
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-3000:]
    assert "export: ONNX by Keras under jax (jax2onnx), in this process" in resumed.stdout
    assert "nothing left to train: 1 of --epochs 1 done" in resumed.stdout
    compare = run(python, TESTS / "xmlq_onnx_check.py", root / "xmlq", root / "xmlq.checkpoints",
                  ROOT / "tests" / "data" / "bestbuy_clicks_sample.csv")
    assert compare.returncode == 0, compare.stderr[-3000:]
    difference, rows, tensorflow_loaded = compare.stdout.split()
    assert float(difference) <= 1e-4 and int(rows) > 500 and tensorflow_loaded == "False"
    shutil.rmtree(root / "xmlq")


@pytest.mark.slow
def test_the_rerank_command_and_package_name_lightgbm_and_its_extra(trained_without_an_exporter, tmp_path) -> None:
    """Each command checks the modules it uses: the re-ranker's is LightGBM."""
    *_, python = trained_without_an_exporter
    result = run(python, "-m", "qcat.cli", "train", "rerank", "--model", tmp_path / "m", "--out", tmp_path / "out")
    assert result.returncode == 2 and result.stderr.strip() == (
        "qcat: error: qcat train needs the 'train' extra (module 'lightgbm' is missing): pip install \"qcat[train]\"")
    probe = run(python, "-c", "import qcat.training.xmlq\ntry:\n    import qcat.training.rerank\n"
                              "except ImportError as exc:\n    print(exc)")
    assert probe.stdout.strip() == ("qcat.training.rerank needs the 'train' extra (module 'lightgbm' is missing): "
                                    'pip install "qcat[train]"'), probe.stderr[-2000:]


def test_where_no_exporter_is_installed_the_log_says_so_before_training() -> None:
    """The line ``qcat train xmlq`` prints before it trains where neither tf2onnx nor jax2onnx is
    installed (the environments above say it for real): both exporters, how to install each, and
    where the network stays."""
    from qcat.training.xmlq.export import describe_export_plan

    assert describe_export_plan(None, "/runs/xmlq.checkpoints") == (
        "export: no ONNX exporter is installed here: Keras exports XML-Q under KERAS_BACKEND=jax with jax2onnx (pip "
        "install jax jax2onnx) or under tensorflow with tf2onnx (pip install tensorflow-cpu tf2onnx). Training goes "
        "on; the network will stay in /runs/xmlq.checkpoints: rerun the command with --resume where one is "
        "installed to export it")
