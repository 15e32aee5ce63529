"""What XML-Q is fed: the vocabulary, the label lists and their multi-hot targets, the batches
(shuffled per epoch from ``(seed, epoch)``), the inputs prepared in the network's index spaces
(:func:`prepare`) and their fingerprint, which a checkpoint is resumed on."""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field

import keras
import numpy as np

from qcat.models.query_encoding import encode, token_index
from qcat.training.clicklogs.clicktable import ClickTable
from qcat.training.data.dataset import Dataset
from qcat.training.xmlq.config import XMLQConfig, steps_per_epoch


def build_vocabulary(queries, min_count: int, max_size: int) -> list[str]:
    """Tokens seen in at least ``min_count`` training queries, most frequent first (ties by
    token), at most ``max_size``."""
    counts = Counter(token for query in queries for token in set(query.split(" ")))
    kept = [t for t, c in counts.items() if c >= min_count]
    kept.sort(key=lambda t: (-counts[t], t))
    return kept[:max_size]


def label_lists(table: ClickTable, label_of_category: np.ndarray) -> np.ndarray:
    """``(queries, widest)`` int32 label ids of each query's categories, -1 padded."""
    labels = label_of_category[table.pair_category]
    keep = labels >= 0
    rows, labels = table.pair_query[keep], labels[keep]
    width = max(int(np.bincount(rows, minlength=len(table.queries)).max(initial=0)), 1)
    out = np.full((len(table.queries), width), -1, dtype=np.int32)
    starts = np.searchsorted(rows, np.arange(len(table.queries)))
    out[rows, np.arange(len(rows)) - starts[rows]] = labels
    return out


def multi_hot(labels: np.ndarray, n_labels: int) -> np.ndarray:
    """``(rows, n_labels)`` float32 0/1 targets from -1-padded label lists."""
    out = np.zeros((len(labels), n_labels), dtype=np.float32)
    rows, columns = np.nonzero(labels >= 0)
    out[rows, labels[rows, columns]] = 1.0
    return out


class Batches(keras.utils.PyDataset):
    """Batches of (token ids, multi-hot targets[, sample weights]) as numpy arrays, for
    every backend. With a ``seed`` the queries are shuffled once per epoch by the
    permutation drawn from ``(seed, epoch)``: a resumed run sees the same batches as an
    uninterrupted one. The trainer sets :attr:`epoch` at the start of each epoch
    (:class:`EpochShuffle`); ``__getitem__`` is pure, so Keras may peek at any batch.

    With ``multiple`` (the devices of a data-parallel run) every batch holds a multiple of it:
    the epoch's last batch is cut to one, leaving out fewer than ``multiple`` queries, the
    last of that epoch's order (other queries each epoch)."""

    def __init__(self, tokens: np.ndarray, labels: np.ndarray, n_labels: int, batch_size: int, seed: int | None,
                 weights: np.ndarray | None = None, multiple: int = 1):
        super().__init__()  # one worker, no multiprocessing: the order is the index order
        self.tokens, self.labels, self.n_labels, self.batch_size, self.seed = tokens, labels, n_labels, batch_size, seed
        self.weights = None if weights is None else np.asarray(weights, dtype=np.float32)
        self.used = len(tokens) - len(tokens) % batch_size % multiple  # queries an epoch trains on
        self.epoch = 0
        self._order: tuple[int, np.ndarray] | None = None

    def __len__(self) -> int:
        return steps_per_epoch(self.used, self.batch_size)

    def order(self) -> np.ndarray:
        if self.seed is None:
            return np.arange(len(self.tokens))
        if self._order is None or self._order[0] != self.epoch:
            self._order = (self.epoch, np.random.default_rng([self.seed, self.epoch]).permutation(len(self.tokens)))
        return self._order[1]

    def __getitem__(self, index: int):
        if not 0 <= index < len(self):
            raise IndexError(index)
        rows = self.order()[:self.used][index * self.batch_size:(index + 1) * self.batch_size]
        batch = (self.tokens[rows].astype(np.int32), multi_hot(self.labels[rows], self.n_labels))
        return batch if self.weights is None else batch + (self.weights[rows],)


class EpochShuffle(keras.callbacks.Callback):
    """Tells the batches which epoch Keras starts (so the shuffle follows ``initial_epoch``)."""

    def __init__(self, data: Batches):
        super().__init__()
        self.data = data

    def on_epoch_begin(self, epoch: int, logs=None) -> None:
        self.data.epoch = epoch


@dataclass
class Prepared:
    """Training inputs in the network's index spaces."""

    vocabulary: list[str]
    labels: np.ndarray  # taxonomy ids, the output columns
    train_tokens: np.ndarray
    train_labels: np.ndarray
    validation_tokens: np.ndarray
    validation: ClickTable
    train_weights: np.ndarray | None = None
    initial_embeddings: tuple[np.ndarray, np.ndarray] | None = None  # (token ids, vectors) for build_xmlq
    # the validation objective's sets: name -> (token ids, table, weight); the split alone by default
    monitored: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.monitored:
            self.monitored = {"validation": (self.validation_tokens, self.validation, 1.0)}


def prepare(dataset: Dataset, config: XMLQConfig, train: ClickTable | None = None,
            train_weights: np.ndarray | None = None, sets: dict | None = None) -> Prepared:
    """Vocabulary and label space from ``train`` (default ``dataset.train``), token ids and
    label lists for it and for the validation split, and token ids of the validation
    objective's ``sets`` (:func:`qcat.training.selection.objective.validation_sets`; default: the split alone)."""
    train = train if train is not None else dataset.train
    vocabulary = build_vocabulary(train.queries, config.min_token_count, config.max_vocabulary)
    used = np.unique(train.pair_category)
    labels = train.categories[used]
    label_of_category = np.full(len(train.categories), -1, dtype=np.int64)
    label_of_category[used] = np.arange(len(used))
    index = token_index(vocabulary)
    validation_tokens = encode(dataset.validation.queries, index)
    monitored = {}
    for name, (table, weight) in (sets or {}).items():
        same = table is dataset.validation
        monitored[name] = (validation_tokens if same else encode(table.queries, index), table, weight)
    return Prepared(
        vocabulary=vocabulary,
        labels=labels,
        train_tokens=encode(train.queries, index),
        train_labels=label_lists(train, label_of_category),
        validation_tokens=validation_tokens,
        validation=dataset.validation,
        train_weights=train_weights,
        monitored=monitored,
    )


def data_fingerprint(prepared: Prepared) -> str:
    """A hash of the training inputs, so a checkpoint is resumed only on the data it was made on."""
    digest = hashlib.sha256()
    digest.update("\n".join(prepared.vocabulary).encode())
    monitored = [array for name, (tokens, _, weight) in prepared.monitored.items()
                 for array in (np.frombuffer(name.encode(), np.uint8), tokens, np.float64(weight))]
    for array in (prepared.labels.astype(str), prepared.train_tokens, prepared.train_labels,
                  prepared.validation_tokens, prepared.train_weights, *monitored):
        if array is not None:
            digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()
