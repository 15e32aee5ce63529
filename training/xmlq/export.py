"""Export a trained XML-Q network to ONNX and write it as a model bundle.

The exporter is Keras' ONNX export under the TensorFlow backend (tf2onnx). A network trained
under another backend (JAX, torch) is saved as a ``.keras`` file (architecture and weights,
which are the same on every backend) and exported by a subprocess with
``KERAS_BACKEND=tensorflow`` on CPU: the graph that serves is the same whichever backend
trained it."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import keras
import numpy as np

from qcat.taxonomy import Taxonomy
from qcat.xmlq import XMLQModel

# Run by the exporting subprocess: argv[1] the .keras file, argv[2] the .onnx to write.
_EXPORT_UNDER_TENSORFLOW = """
import sys, warnings
import keras
assert keras.backend.backend() == "tensorflow", keras.backend.backend()
import numpy as np
network = keras.saving.load_model(sys.argv[1], compile=False)
network(np.zeros((1,) + tuple(network.input.shape[1:]), dtype="int32"))  # the exporter wants a called model
with warnings.catch_warnings():
    warnings.simplefilter("ignore", FutureWarning)
    network.export(sys.argv[2], format="onnx", verbose=False)
"""


def to_onnx(network: keras.Model) -> bytes:
    """The network as ONNX bytes (Keras' exporter, via tf2onnx), inference mode."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.onnx"
        if keras.backend.backend() == "tensorflow":
            network(np.zeros((1,) + tuple(network.input.shape[1:]), dtype="int32"))  # the exporter wants a called model
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", FutureWarning)  # tf2onnx probes numpy aliases
                network.export(str(path), format="onnx", verbose=False)
        else:
            saved = Path(tmp) / "network.keras"
            network.save(saved)
            export_under_tensorflow(saved, path)
        return path.read_bytes()


def export_under_tensorflow(saved: Path, onnx_path: Path) -> None:
    """Export the ``.keras`` file ``saved`` to ``onnx_path`` in a TensorFlow-backend process on CPU."""
    env = {**os.environ, "KERAS_BACKEND": "tensorflow", "CUDA_VISIBLE_DEVICES": "",
           "TF_CPP_MIN_LOG_LEVEL": os.environ.get("TF_CPP_MIN_LOG_LEVEL", "3")}
    result = subprocess.run([sys.executable, "-c", _EXPORT_UNDER_TENSORFLOW, str(saved), str(onnx_path)],
                            env=env, capture_output=True, text=True)
    if result.returncode != 0 or not onnx_path.is_file():
        tail = (result.stderr or result.stdout).strip().splitlines()[-5:]
        raise ExportError("ONNX export needs TensorFlow and tf2onnx (pip install tensorflow tf2onnx); the export "
                          "under KERAS_BACKEND=tensorflow failed:\n" + "\n".join(tail))


class ExportError(RuntimeError):
    """The network could not be exported to ONNX (typically: no TensorFlow or tf2onnx here)."""


def bundle_model(network: keras.Model, vocabulary: list[str], labels: np.ndarray, taxonomy: Taxonomy,
                 config: dict, metrics: dict) -> XMLQModel:
    """The exported network as a model; its taxonomy is the labels and their ancestors."""
    return XMLQModel(labels=tuple(labels), taxonomy=taxonomy.subset(list(labels)), vocabulary=tuple(vocabulary),
                     network=to_onnx(network), config=config, metrics=metrics)
