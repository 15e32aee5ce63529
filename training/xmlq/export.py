"""Export a trained XML-Q network to ONNX and write it as a model bundle."""

from __future__ import annotations

import tempfile
import warnings
from pathlib import Path

import keras
import numpy as np

from qcat.taxonomy import Taxonomy
from qcat.xmlq import XMLQModel


def to_onnx(network: keras.Model) -> bytes:
    """The network as ONNX bytes (Keras' exporter, via tf2onnx), inference mode."""
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # tf2onnx probes numpy aliases
        path = Path(tmp) / "model.onnx"
        network.export(str(path), format="onnx", verbose=False)
        return path.read_bytes()


def bundle_model(network: keras.Model, vocabulary: list[str], labels: np.ndarray, taxonomy: Taxonomy,
                 config: dict, metrics: dict) -> XMLQModel:
    """The exported network as a model; its taxonomy is the labels and their ancestors."""
    return XMLQModel(labels=tuple(labels), taxonomy=taxonomy.subset(list(labels)), vocabulary=tuple(vocabulary),
                     network=to_onnx(network), config=config, metrics=metrics)
