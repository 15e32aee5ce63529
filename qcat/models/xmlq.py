"""XML-Q inference: the exported network run by onnxruntime (no TensorFlow here)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Sequence

import numpy as np

from qcat.bundles.bundle import Manifest, load_labels, load_vocabulary, save_lines, write_bundle
from qcat.errors import BundleError
from qcat.models.calibration import (
    Calibration,
    calibrated,
    calibrated_one,
    describe,
    load_calibration,
    save_calibration,
)
from qcat.models.model import Predictions, top_k
from qcat.models.query_encoding import UNKNOWN, encode, encode_tokens, token_index
from qcat.taxonomy import Taxonomy
from qcat.text.normalize import tokenize

BACKEND = "xmlq"
NETWORK_FILE = "model.onnx"
VOCABULARY_FILE = "vocabulary.txt"
LABELS_FILE = "labels.txt"
BATCH = 4096


def onnxruntime_options():
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    return options


def new_session(network: bytes, options):
    import onnxruntime

    return onnxruntime.InferenceSession(network, options, providers=["CPUExecutionProvider"])


@dataclass
class XMLQModel:
    """The network's ONNX graph, its vocabulary and its output labels (taxonomy ids)."""

    labels: tuple[str, ...]
    taxonomy: Taxonomy
    vocabulary: tuple[str, ...]
    network: bytes  # the ONNX model
    config: dict
    metrics: dict
    calibration: Calibration | None = None
    backend: str = BACKEND
    _session: object = field(default=None, repr=False)
    _single_session: object = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self._session = new_session(self.network, onnxruntime_options())
        self._single_session = None  # made by the first predict_one
        self._all_labels = np.ones(len(self.labels), dtype=np.bool_)
        inputs, outputs = self._session.get_inputs(), self._session.get_outputs()
        width = outputs[0].shape[-1]
        if len(inputs) != 1 or (isinstance(width, int) and width != len(self.labels)):
            raise BundleError(f"the XML-Q network's output ({width}) does not match its {len(self.labels)} labels")
        self._input = inputs[0].name
        self._index = token_index(self.vocabulary)

    def probabilities(self, token_ids: np.ndarray) -> np.ndarray:
        """Sigmoid outputs ``(n, labels)`` for encoded queries."""
        return self._session.run(None, {self._input: token_ids.astype(np.int32)})[0]

    def predict(self, queries: Sequence[str], k: int) -> Predictions:
        labels = np.full((len(queries), k), -1, dtype=np.int32)
        scores = np.zeros((len(queries), k), dtype=np.float32)
        for start in range(0, len(queries), BATCH):
            probabilities = self.probabilities(encode(queries[start:start + BATCH], self._index))
            top_labels, top_scores = top_k(probabilities, k)
            n = top_labels.shape[1]
            labels[start:start + len(probabilities), :n] = top_labels
            scores[start:start + len(probabilities), :n] = top_scores
        return calibrated(self.calibration, Predictions(labels, scores, ("xmlq",) * len(queries)), queries)

    def predict_one(self, query: str, k: int) -> Predictions:
        """``predict([query], k)`` through the single-query path: one onnxruntime call on a
        session kept for single queries (one thread), then the compiled top-k."""
        from qcat.models import kernels
        if self._single_session is None:
            options = onnxruntime_options()
            options.intra_op_num_threads = options.inter_op_num_threads = 1
            self._single_session = new_session(self.network, options)
        ids = np.array([encode_tokens(tokenize(query), self._index)], dtype=np.int32)
        probabilities = self._single_session.run(None, {self._input: ids})[0][0]
        top_labels, top_scores = kernels.top_k(probabilities, k, self._all_labels)
        labels = np.full((1, k), -1, dtype=np.int32)
        scores = np.zeros((1, k), dtype=np.float32)
        labels[0, :len(top_labels)], scores[0, :len(top_labels)] = top_labels, top_scores
        return calibrated_one(self.calibration, Predictions(labels, scores, ("xmlq",)), query)

    # One network call per batch wins from a few queries on (small preset on the Best Buy sample:
    # 154 µs per query in batches of 8, 50-63 in batches of 100-1,000, about 510 one by one;
    # benchmarks/bench_single_query.py --batch-sizes --xmlq DIR).
    faster_one_by_one = False

    def uncalibrated(self) -> "XMLQModel":
        return replace(self, calibration=None)

    def explain(self, query: str, k: int) -> list[str]:
        tokens = tokenize(query)
        ids = encode_tokens(tokens, self._index)
        unknown = [t for t in tokens[:9] if self._index.get(t, UNKNOWN) == UNKNOWN]
        lines = [f"xmlq: CNN-RNN over {min(len(tokens), 9)} token(s) + end marker; scores are independent "
                 f"sigmoid probabilities per category"]
        if len(tokens) > 9:
            lines.append(f"  truncated to the first 9 tokens (dropped: {' '.join(tokens[9:])})")
        if unknown:
            lines.append(f"  not in the vocabulary (read as unknown): {', '.join(repr(t) for t in unknown)}")
        if all(i <= UNKNOWN for i in ids):
            lines.append("  no known token: the answer reflects only what the network learned for unknown input")
        return lines + [describe(self.calibration, "xmlq")]

    def save(self, directory: str | Path) -> Manifest:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        vocabulary_hash = save_lines(directory / VOCABULARY_FILE, list(self.vocabulary))
        save_lines(directory / LABELS_FILE, list(self.labels))
        (directory / NETWORK_FILE).write_bytes(self.network)
        save_calibration(self.calibration, directory)
        return write_bundle(directory, BACKEND, self.taxonomy, vocabulary_hash, self.config, self.metrics)

    @classmethod
    def from_manifest(cls, manifest: Manifest, taxonomy: Taxonomy) -> "XMLQModel":
        vocabulary = load_vocabulary(manifest, VOCABULARY_FILE)
        labels = load_labels(manifest, LABELS_FILE, taxonomy)
        return cls(labels=labels, taxonomy=taxonomy, vocabulary=tuple(vocabulary),
                   network=manifest.file(NETWORK_FILE).read_bytes(), config=manifest.config, metrics=manifest.metrics,
                   calibration=load_calibration(manifest))
