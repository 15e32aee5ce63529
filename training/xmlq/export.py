"""Export a trained XML-Q network to ONNX and write it as a model bundle.

The exporter is Keras' own ONNX export, which works under two backends here:

- ``tensorflow``: tf2onnx (a ``tf.function`` of the network converted);
- ``jax``: jax2onnx (the network's JAX function converted directly; no TensorFlow), at
  opset :data:`JAX_OPSET`.

A network is exported under the backend it trained under when that backend's exporter is
installed; otherwise its architecture (:func:`portable_config`) and weights (the same on every
backend) are saved and exported by a subprocess under a backend whose exporter is, on CPU. The
torch backend's exporter (torch.onnx) is not used: a network trained under torch is exported
under one of the two. :func:`export_plan` tells which before training starts, so a machine
with no exporter is named then, not after hours of training. Every path is checked against
the network it exported to 1e-4 (tests/test_xmlq_backends.py, tests/test_xmlq_without_tensorflow.py).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import keras
import numpy as np

from qcat.models.xmlq import XMLQModel
from qcat.taxonomy import Taxonomy

# backend -> the modules Keras' ONNX export needs under it, in the order they are preferred
EXPORTERS = {"tensorflow": ("tensorflow", "tf2onnx"), "jax": ("jax", "jax2onnx")}
INSTALL = {"tensorflow": "pip install tensorflow-cpu tf2onnx", "jax": "pip install jax jax2onnx"}
# jax2onnx writes opset 23 by default; at 17 its ReduceMean takes the axes as an input, which is
# opset 18's. 18 is read by every onnxruntime the core allows (>= 1.17 reads up to opset 20).
JAX_OPSET = 18

# Run by the exporting subprocess: argv[1] the network's config (JSON), argv[2] its weights,
# argv[3] the .onnx to write.
_EXPORT_IN_SUBPROCESS = """
import json, sys
import keras
from qcat.training.xmlq.export import export_here
network = keras.Model.from_config(json.loads(open(sys.argv[1]).read()))
network.load_weights(sys.argv[2])
export_here(network, sys.argv[3])
"""


class ExportError(RuntimeError):
    """The network could not be exported to ONNX (typically: no exporter installed here)."""


def exporter_installed(backend: str) -> bool:
    return backend in EXPORTERS and all(importlib.util.find_spec(m) is not None for m in EXPORTERS[backend])


def export_plan(backend: str | None = None) -> str | None:
    """The backend whose ONNX export will export a network trained under ``backend`` (default:
    this process's): that backend when its exporter is installed, else the first of
    :data:`EXPORTERS` whose is (in a subprocess), else None."""
    backend = backend or keras.backend.backend()
    return next((b for b in (backend, *EXPORTERS) if exporter_installed(b)), None)


def no_exporter_message() -> str:
    return ("no ONNX exporter is installed here: Keras exports XML-Q under KERAS_BACKEND=jax with jax2onnx (" +
            INSTALL["jax"] + ") or under tensorflow with tf2onnx (" + INSTALL["tensorflow"] + ")")


def describe_export_plan(plan: str | None, checkpoint: Path | str) -> str:
    """One line for the training log, before training: how the network will be exported."""
    backend = keras.backend.backend()
    if plan is None:
        return (f"export: {no_exporter_message()}. Training goes on; the network will stay in {checkpoint}: "
                f"rerun the command with --resume where one is installed to export it")
    how = "in this process" if plan == backend else f"in a subprocess on CPU (none here for {backend})"
    return f"export: ONNX by Keras under {plan} ({EXPORTERS[plan][1]}), {how}"


def portable_config(network: keras.Model) -> dict:
    """``network``'s architecture as a config any backend rebuilds: BatchNormalization not
    ``synchronized`` (an option of TensorFlow's alone, which changes no weight) and the embedding's
    initializer plain (a skip-gram start is a Python function, which no config can name; the
    weights are loaded over it)."""
    config = network.get_config()
    for layer in config["layers"]:
        if layer["class_name"] == "BatchNormalization":
            layer["config"]["synchronized"] = False
        elif layer["class_name"] == "Embedding":
            layer["config"]["embeddings_initializer"] = "zeros"
    return config


def export_here(network: keras.Model, path: Path | str) -> None:
    """Write ``network`` as ONNX to ``path`` with this process's backend's exporter."""
    network(np.zeros((1,) + tuple(network.input.shape[1:]), dtype="int32"))  # the exporter wants a called model
    options = {"opset_version": JAX_OPSET} if keras.backend.backend() == "jax" else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # tf2onnx probes numpy aliases
        network.export(str(path), format="onnx", verbose=False, **options)


def to_onnx(network: keras.Model) -> bytes:
    """The network as ONNX bytes (Keras' exporter, :func:`export_plan`), inference mode."""
    plan = export_plan()
    if plan is None:
        raise ExportError(f"ONNX export: {no_exporter_message()}")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.onnx"
        if plan == keras.backend.backend():
            export_here(network, path)
        else:
            export_in_subprocess(network, path, plan)
        return path.read_bytes()


def export_in_subprocess(network: keras.Model, onnx_path: Path, backend: str) -> None:
    """Export ``network`` to ``onnx_path`` in a ``backend`` process on CPU."""
    from qcat.training.xmlq.checkpoint import weights_only

    config, weights = onnx_path.with_suffix(".config.json"), onnx_path.with_suffix(".weights.h5")
    config.write_text(json.dumps(portable_config(network)))
    weights_only(network).save_weights(weights)
    env = {**os.environ, "KERAS_BACKEND": backend, "CUDA_VISIBLE_DEVICES": "", "JAX_PLATFORMS": "cpu",
           "TF_CPP_MIN_LOG_LEVEL": os.environ.get("TF_CPP_MIN_LOG_LEVEL", "3")}
    env.pop("XLA_FLAGS", None)  # e.g. simulated devices: one is enough to export
    result = subprocess.run([sys.executable, "-c", _EXPORT_IN_SUBPROCESS, str(config), str(weights), str(onnx_path)],
                            env=env, capture_output=True, text=True)
    if result.returncode != 0 or not onnx_path.is_file():
        tail = (result.stderr or result.stdout).strip().splitlines()[-5:]
        raise ExportError(f"ONNX export under KERAS_BACKEND={backend} ({INSTALL[backend]}) failed:\n" + "\n".join(tail))


def bundle_model(network: keras.Model, vocabulary: list[str], labels: np.ndarray, taxonomy: Taxonomy,
                 config: dict, metrics: dict) -> XMLQModel:
    """The exported network as a model; its taxonomy is the labels and their ancestors."""
    return XMLQModel(labels=tuple(labels), taxonomy=taxonomy.subset(list(labels)), vocabulary=tuple(vocabulary),
                     network=to_onnx(network), config=config, metrics=metrics)
