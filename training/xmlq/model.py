"""The XML-Q network (eBay §3.3.1, Figure 1) in Keras.

Token ids -> 256-d embeddings -> three Conv1D groups (512, 1024, 512 filters of widths
1, 2, 3), each with BatchNorm and ReLU and then its own GRU (512, 1024, 512 units) with
LayerNorm -> concatenation (2,048) -> Dense at 80% of that (1,638) with BatchNorm, ReLU
and dropout (keep 0.8) -> one logit per leaf category -> sigmoid.

Plain Keras 3: it builds and trains unchanged under any backend (``KERAS_BACKEND``
tensorflow, jax or torch). Under TensorFlow, BatchNorm is synchronized: under a
distribution strategy its batch statistics are those of the global batch, so every worker
keeps the same moving averages (alone, no change); other backends have no such option and
need none (one process, one set of statistics). The flag changes no weight, so weights
move freely between backends.

``rnn=False`` replaces each GRU by global max pooling: the XML-CNN* baseline of Table 2/3.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import keras
import numpy as np
from keras import layers

from qcat.models.query_encoding import SEQUENCE_LENGTH


@dataclass(frozen=True)
class Preset:
    embedding: int
    filters: tuple[int, int, int]  # per convolution group; each GRU has as many units
    widths: tuple[int, int, int] = (1, 2, 3)
    hidden_fraction: float = 0.8  # Dense units as a share of the concatenated width
    keep_probability: float = 0.8  # dropout keeps this share

    def to_json(self) -> dict:
        return asdict(self)


PRESETS = {
    "paper": Preset(embedding=256, filters=(512, 1024, 512)),  # Figure 1: an accelerator's job
    # A quarter of the paper's widths, half its embedding: twice small's widths, so about 4x its
    # GRU work (which grows with the square of the width), 1/16 of the paper's. Not yet measured.
    "medium": Preset(embedding=128, filters=(128, 256, 128)),
    "small": Preset(embedding=64, filters=(64, 128, 64)),  # 1/8 of the paper's widths: CPU training of the demo
}


def build_xmlq(vocabulary_size: int, n_labels: int, preset: Preset, rnn: bool = True, seed: int = 0,
               initial_embeddings: tuple[np.ndarray, np.ndarray] | None = None) -> keras.Model:
    """The network, outputting sigmoid probabilities (``probabilities``); the layer before
    the sigmoid is named ``logits`` for losses that need scores. ``initial_embeddings``
    ``(token ids, vectors)``: those rows of the (trainable) embedding start from the vectors,
    the others from the random init."""
    init = keras.initializers.GlorotUniform
    tokens = keras.Input((SEQUENCE_LENGTH,), dtype="int32", name="tokens")
    embedding_init = keras.initializers.RandomUniform(-0.05, 0.05, seed=seed)
    if initial_embeddings is not None:
        embedding_init = _with_rows(embedding_init, *initial_embeddings, (vocabulary_size, preset.embedding))
    embedded = layers.Embedding(vocabulary_size, preset.embedding, name="embedding",
                                embeddings_initializer=embedding_init)(tokens)
    synchronized = keras.backend.backend() == "tensorflow"  # the option exists only there
    groups = []
    for g, (filters, width) in enumerate(zip(preset.filters, preset.widths)):
        x = layers.Conv1D(filters, width, padding="valid", kernel_initializer=init(seed + 10 + g), name=f"conv{width}")(embedded)
        x = layers.BatchNormalization(synchronized=synchronized, name=f"conv{width}_bn")(x)
        x = layers.ReLU(name=f"conv{width}_relu")(x)
        if rnn:
            x = layers.GRU(filters, kernel_initializer=init(seed + 20 + g),
                           recurrent_initializer=keras.initializers.Orthogonal(seed=seed + 30 + g), name=f"gru{width}")(x)
            x = layers.LayerNormalization(name=f"gru{width}_ln")(x)
        else:
            x = layers.GlobalMaxPooling1D(name=f"pool{width}")(x)
        groups.append(x)
    x = layers.Concatenate(name="concat")(groups)
    hidden = int(preset.hidden_fraction * sum(preset.filters))
    x = layers.Dense(hidden, kernel_initializer=init(seed + 40), name="hidden")(x)
    x = layers.BatchNormalization(synchronized=synchronized, name="hidden_bn")(x)
    x = layers.ReLU(name="hidden_relu")(x)
    x = layers.Dropout(1.0 - preset.keep_probability, seed=seed + 50, name="dropout")(x)
    logits = layers.Dense(n_labels, kernel_initializer=init(seed + 60), name="logits")(x)
    probabilities = layers.Activation("sigmoid", name="probabilities")(logits)
    return keras.Model(tokens, probabilities, name="xmlq")


def _with_rows(random_init, ids: np.ndarray, vectors: np.ndarray, shape: tuple[int, int]):
    """An initializer: ``random_init``'s matrix (a seeded Keras initializer draws the same
    values on every call) with rows ``ids`` replaced by ``vectors``."""
    ids, vectors = np.asarray(ids, dtype=np.int64), np.asarray(vectors, dtype=np.float32)
    if vectors.shape != (len(ids), shape[1]) or (len(ids) and not 0 <= ids.min() <= ids.max() < shape[0]):
        raise ValueError(f"initial embeddings: {vectors.shape} vectors for {len(ids)} ids do not fit an "
                         f"embedding of shape {shape}")

    def initializer(shape, dtype=None):
        matrix = np.array(keras.ops.convert_to_numpy(random_init(shape, dtype="float32")), dtype=np.float32)
        matrix[ids] = vectors
        return keras.ops.convert_to_tensor(matrix, dtype=dtype or "float32")

    return initializer
