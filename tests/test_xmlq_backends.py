"""XML-Q under every Keras backend: the JAX trainer on CPU (deterministic, resumable, its SNM
draws advancing), its weights exported to ONNX and served by onnxruntime with the JAX
model's scores, a JAX checkpoint resumed and exported under this process's backend
(TensorFlow unless KERAS_BACKEND says otherwise), resuming under that backend, and the CLI's
backend line and --resume.

A Keras backend is fixed when Keras is first imported, so the JAX runs happen in a
subprocess (tests/xmlq_backend_job.py) with ``KERAS_BACKEND=jax``, once a session (the
``jax_run`` fixture, tests/conftest.py: tests/test_xmlq_data_parallel.py reads it too)."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
keras = pytest.importorskip("keras")

from test_cli import qcat  # noqa: E402

from qcat.training.xmlq.train import XMLQConfig  # noqa: E402

pytestmark = pytest.mark.usefixtures("xmlq_jax_cache_env")  # the JAX processes it starts share a compilation cache

needs_jax = pytest.mark.skipif(importlib.util.find_spec("jax") is None,
                               reason="jax is not installed (pip install 'jax[cpu]'): the JAX backend is not tested")


def _arrays(path: Path) -> list[np.ndarray]:
    with np.load(path) as data:
        return [data[key] for key in data.files]


def _assert_same_state(first: Path, second: Path) -> None:
    """Two checkpoints hold the same variables with the same values (weights, BatchNorm
    statistics, random states, optimizer step and moments)."""
    names = [json.loads((d / "state.json").read_text())["variables"] for d in (first, second)]
    assert [len(n) for n in names[0].values()] == [len(n) for n in names[1].values()]  # paths carry object counters
    a, b = _arrays(first / "last.npz"), _arrays(second / "last.npz")
    assert len(a) == len(b) > 100
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)


@pytest.mark.slow
@needs_jax
def test_jax_trainer_is_deterministic(jax_run) -> None:
    backend, device = (jax_run / "backend.txt").read_text().splitlines()
    assert backend == "jax" and ", jax " in device and "cpu" in device
    first, second = _arrays(jax_run / "run1.npz"), _arrays(jax_run / "run2.npz")
    assert len(first) == len(second) > 10
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)


@pytest.mark.slow
@needs_jax
def test_jax_resume_goes_on_as_if_never_stopped(jax_run) -> None:
    histories = json.loads((jax_run / "histories.json").read_text())
    assert histories["resumed"] == histories["uninterrupted"] and len(histories["resumed"]) == 2
    _assert_same_state(jax_run / "uninterrupted", jax_run / "resumed")
    assert json.loads((jax_run / "resumed" / "state.json").read_text())["epoch"] == 2


@pytest.mark.slow
@needs_jax
def test_jax_snm_draws_new_negatives_every_step(jax_run) -> None:
    """SNM's SeedGenerator is training state under JAX too: one draw per step (13 batches of 32)."""
    state = json.loads((jax_run / "snm" / "state.json").read_text())
    index = [i for i, path in enumerate(state["variables"]["model"]) if path.startswith("snm_seed_generator")]
    assert len(index) == 1
    with np.load(jax_run / "snm" / "last.npz") as data:
        seed = data[f"model/{index[0]}"]
    assert seed.tolist() == [0, 13]


@pytest.mark.slow
@needs_jax
def test_onnx_export_of_jax_weights_matches_jax(jax_run) -> None:
    from qcat.classifier import load_model

    model = load_model(jax_run / "bundle")
    tokens = np.load(jax_run / "tokens.npy")
    np.testing.assert_allclose(model.probabilities(tokens), np.load(jax_run / "probabilities.npy"), atol=1e-4)


@pytest.mark.slow
@needs_jax
def test_a_jax_checkpoint_resumes_and_exports_under_this_backend(jax_run, tmp_path) -> None:
    """The accelerator workflow: train under JAX where there is no TensorFlow, bring the
    checkpoint back, and ``--resume`` it here (nothing left to train) to export it."""
    from xmlq_backend_job import tiny_prepared

    from qcat.training.xmlq.export import to_onnx
    from qcat.training.xmlq.train import train

    config = XMLQConfig(epochs=2, batch_size=32, min_token_count=1)
    _, prepared = tiny_prepared(config)
    shutil.copytree(jax_run / "uninterrupted", tmp_path / "checkpoint")
    messages = []
    network, summary = train(prepared, config, checkpoint=tmp_path / "checkpoint", resume=True, log=messages.append,
                             verbose=0)
    assert messages[-1] == "nothing left to train: 2 of --epochs 2 done"
    assert [h["backend"] for h in summary["history"]] == ["jax", "jax"]
    tokens, expected = np.load(jax_run / "tokens.npy"), np.load(jax_run / "probabilities.npy")
    np.testing.assert_allclose(network.predict(tokens, verbose=0), expected, atol=1e-4)
    import onnxruntime

    session = onnxruntime.InferenceSession(to_onnx(network), providers=["CPUExecutionProvider"])
    scores = session.run(None, {session.get_inputs()[0].name: tokens.astype(np.int32)})[0]
    np.testing.assert_allclose(scores, expected, atol=1e-4)


@pytest.fixture(scope="module")
def tiny_tf():
    from conftest import xmlq_tiny_data

    config, _, prepared = xmlq_tiny_data()
    return config, prepared


@pytest.fixture(scope="module")
def one_epoch(tiny_tf, tmp_path_factory):
    """``tiny_tf`` trained for 1 epoch with a checkpoint, once for this module: the network and its
    checkpoint directory (copy it to change it)."""
    from qcat.training.xmlq.train import train

    config, prepared = tiny_tf
    directory = tmp_path_factory.mktemp("one-epoch") / "checkpoint"
    network, _ = train(prepared, replace(config, epochs=1), checkpoint=directory, log=lambda m: None, verbose=0)
    return network, directory


@pytest.mark.slow
def test_resume_under_the_process_backend(tiny_tf, one_epoch, xmlq_two_epochs, tmp_path) -> None:
    from qcat.training.xmlq.checkpoint import CheckpointError
    from qcat.training.xmlq.train import train

    config, prepared = tiny_tf
    quiet = {"log": lambda message: None, "verbose": 0}
    # The uninterrupted run: train(prepared, config, checkpoint=whole), once a session (tests/conftest.py),
    # its summary read back by resuming it with nothing left to train
    shutil.copytree(xmlq_two_epochs, tmp_path / "whole")
    _, whole = train(prepared, config, checkpoint=tmp_path / "whole", resume=True, **quiet)
    assert whole["resumed_after_epoch"] == 2 and len(whole["history"]) == 2
    shutil.copytree(one_epoch[1], tmp_path / "part")  # train(prepared, replace(config, epochs=1), checkpoint=part)
    _, resumed = train(prepared, config, checkpoint=tmp_path / "part", resume=True, **quiet)
    assert resumed["history"] == whole["history"] and resumed["resumed_after_epoch"] == 1
    _assert_same_state(tmp_path / "whole", tmp_path / "part")
    assert keras.backend.backend() in resumed["backend"]
    with pytest.raises(CheckpointError, match="batch_size 32 \\(now 16\\)"):
        train(prepared, replace(config, batch_size=16), checkpoint=tmp_path / "part", resume=True, **quiet)
    with pytest.raises(CheckpointError, match="no checkpoint to resume"):
        train(prepared, config, checkpoint=tmp_path / "none", resume=True, **quiet)


@pytest.mark.slow
@needs_jax
@pytest.mark.skipif(importlib.util.find_spec("jax2onnx") is None,
                    reason="jax2onnx is not installed (pip install jax2onnx): export under JAX is not tested")
def test_a_network_exports_under_another_backend_in_a_subprocess(tiny_tf, one_epoch, tmp_path) -> None:
    """Where this backend has no exporter (torch, or TensorFlow without tf2onnx), the network is
    saved and exported under one that has (here: jax2onnx under JAX), scoring as the network does.
    This backend's network (synchronized BatchNorm under TensorFlow) with a skip-gram start (a
    Python function as the embedding's initializer): neither reloaded from a ``.keras`` file under
    JAX before. Its weights are ``one_epoch``'s, trained (BatchNorm statistics away from their start)."""
    import onnxruntime

    from qcat.models.query_encoding import RESERVED
    from qcat.training.xmlq.export import export_in_subprocess
    from qcat.training.xmlq.model import PRESETS, build_xmlq

    config, prepared = tiny_tf
    start = (np.arange(2, 6), np.full((4, 64), 0.01, np.float32))  # the rows a skip-gram start sets
    network = build_xmlq(RESERVED + len(prepared.vocabulary), len(prepared.labels), PRESETS[config.preset],
                         seed=config.seed, initial_embeddings=start)  # as train() builds it from prepared
    network.set_weights(one_epoch[0].get_weights())  # train(prepared, replace(config, epochs=1)): its network
    export_in_subprocess(network, tmp_path / "model.onnx", "jax")
    session = onnxruntime.InferenceSession(tmp_path / "model.onnx", providers=["CPUExecutionProvider"])
    assert session.get_inputs()[0].shape == ["batch", network.input.shape[1]]  # any number of queries
    tokens = prepared.validation_tokens
    scores = session.run(None, {session.get_inputs()[0].name: tokens.astype(np.int32)})[0]
    np.testing.assert_allclose(scores, network.predict(tokens, verbose=0), atol=1e-4)
    # --quantize int8 of jax2onnx's graph: its Conv kernels stay in Keras' [width, in, out] layout
    # (transposed in the graph), and get a scale per filter, as tf2onnx's do
    import onnx
    from onnx import numpy_helper

    from qcat.training.xmlq.quantize import to_int8

    scales = [numpy_helper.to_array(t).shape for t in onnx.load_from_string(to_int8((tmp_path / "model.onnx")
              .read_bytes())).graph.initializer if t.name.endswith("_scale")]
    assert sorted(s for s in scales if len(s) == 3) == [(1, 1, 64), (1, 1, 64), (1, 1, 128)]


@pytest.mark.slow
def test_the_best_checkpoint_holds_the_network_weights_only(tiny_tf, one_epoch, tmp_path) -> None:
    """Issue 38: ``best.weights.h5`` carried the optimizer's state too (the paper preset's was 230 MB,
    111 arrays for a network of 42, the size of ``last.npz``). Now it holds the network's weights,
    loads into a new network, and one written before (optimizer included) still loads."""
    import h5py

    from qcat.models.query_encoding import RESERVED
    from qcat.training.xmlq.checkpoint import Checkpoint
    from qcat.training.xmlq.model import PRESETS, build_xmlq

    config, prepared = tiny_tf
    network, new = one_epoch  # train(prepared, replace(config, epochs=1), checkpoint=new), read here, not changed
    assert network.optimizer is not None  # the soft-F1 network is the model Keras trains: compiled

    def arrays(path: Path) -> tuple[list[str], list[tuple]]:
        found = []
        with h5py.File(path) as weights:
            weights.visititems(lambda name, item: found.append(item.shape) if isinstance(item, h5py.Dataset) else None)
            return list(weights), found

    groups, shapes = arrays(new / "best.weights.h5")
    assert "optimizer" not in groups
    assert sorted(shapes) == sorted(tuple(w.shape) for w in network.weights) and len(shapes) == 42
    assert (new / "best.weights.h5").stat().st_size < 0.4 * (new / "last.npz").stat().st_size

    def fresh():
        return build_xmlq(RESERVED + len(prepared.vocabulary), len(prepared.labels), PRESETS[config.preset], seed=7)

    loaded = fresh()
    Checkpoint(new).load_best(loaded)
    for a, b in zip(loaded.get_weights(), network.get_weights()):
        np.testing.assert_array_equal(a, b)
    (tmp_path / "old").mkdir()
    network.save_weights(tmp_path / "old" / "best.weights.h5")  # as save_best wrote it before
    groups, shapes = arrays(tmp_path / "old" / "best.weights.h5")
    assert "optimizer" in groups and len(shapes) > 100
    loaded = fresh()
    Checkpoint(tmp_path / "old").load_best(loaded)
    for a, b in zip(loaded.get_weights(), network.get_weights()):
        np.testing.assert_array_equal(a, b)


@pytest.mark.slow
def test_cli_prints_the_backend_and_resumes(tmp_path, xmlq_cli_run) -> None:
    """The first run is the session's ``qcat train xmlq --epochs 1`` (tests/conftest.py), its
    checkpoint copied here without its bundle, as if it had been stopped before writing it."""
    from conftest import XMLQ_CLI_FLAGS

    flags = ["train", "xmlq", *XMLQ_CLI_FLAGS, "--out", tmp_path / "xmlq"]
    missing = qcat(*flags, "--resume")
    assert missing.returncode == 2 and "no checkpoint directory" in missing.stderr
    first = (xmlq_cli_run / "stdout.txt").read_text()
    assert f"training on keras {keras.__version__}, {keras.backend.backend()}" in first
    assert sorted(p.name for p in (xmlq_cli_run / "xmlq.checkpoints").iterdir()) == [
        "best.weights.h5", "last.npz", "state.json"]
    shutil.copytree(xmlq_cli_run / "xmlq.checkpoints", tmp_path / "xmlq.checkpoints")
    resumed = qcat(*flags, "--epochs", "2", "--resume")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resumed from" in resumed.stdout and "after epoch 1" in resumed.stdout
    epochs = [line.split(":")[0] for line in resumed.stdout.splitlines() if line.startswith("epoch ")]
    assert epochs == ["epoch 2"]


@pytest.mark.slow
@needs_jax
@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None,
                    reason="tensorflow is not installed: nothing to leave out")
def test_seeding_under_jax_never_imports_tensorflow(tmp_path) -> None:
    """Issue 45, item 22: with KERAS_BACKEND=jax, `qcat train xmlq` imported TensorFlow (where it is
    installed) through keras.utils.set_random_seed, only to seed it. In a JAX process: the trainer
    module imported and training seeded, TensorFlow is not in sys.modules, and the seeding is the
    same as Keras' (Python, NumPy and Keras' own generator draw what set_random_seed makes them draw)."""
    import subprocess
    import sys

    code = ("import json, random, sys\nimport keras, numpy as np\n"
            "from qcat.training.xmlq.train import train\nfrom qcat.training.xmlq.determinism import seed_everything\n"
            "seed_everything(7)\n"
            "draws = [random.random(), float(np.random.random()), float(keras.random.uniform((1,))[0])]\n"
            "print(json.dumps({'backend': keras.backend.backend(), 'tensorflow': 'tensorflow' in sys.modules, "
            "'draws': draws}))\n")
    environment = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS",)}
    environment |= {"KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu", "CUDA_VISIBLE_DEVICES": ""}
    result = subprocess.run([sys.executable, "-c", code], env=environment, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads(result.stdout.strip().splitlines()[-1])
    assert found["backend"] == "jax" and found["tensorflow"] is False
    reference = code.replace("seed_everything(7)", "keras.utils.set_random_seed(7)")
    expected = subprocess.run([sys.executable, "-c", reference], env=environment, capture_output=True, text=True,
                              timeout=300)
    assert expected.returncode == 0, expected.stderr[-3000:]
    keras_seeded = json.loads(expected.stdout.strip().splitlines()[-1])
    assert keras_seeded["tensorflow"] is True  # what set_random_seed does where TensorFlow is installed
    assert found["draws"] == keras_seeded["draws"]


def test_a_backend_without_an_exporter_is_exported_under_the_first_that_has_one() -> None:
    """The export plan: a network trained under torch (no ONNX exporter of its own) is exported
    under the first backend of EXPORTERS whose exporter is installed here, in a subprocess; one
    trained under this process's backend, here, when its exporter is installed."""
    import keras

    from qcat.training.xmlq.export import EXPORTERS, describe_export_plan, export_plan, exporter_installed

    installed = [backend for backend in EXPORTERS if exporter_installed(backend)]
    assert export_plan("torch") == (installed[0] if installed else None)
    here = keras.backend.backend()
    if exporter_installed(here):
        assert export_plan(here) == here
        assert describe_export_plan(here, "ckpt") == f"export: ONNX by Keras under {here} ({EXPORTERS[here][1]}), in this process"
    other = next((backend for backend in installed if backend != here), None)
    if other is not None:
        assert describe_export_plan(other, "ckpt") == (
            f"export: ONNX by Keras under {other} ({EXPORTERS[other][1]}), in a subprocess on CPU (none here for {here})")
