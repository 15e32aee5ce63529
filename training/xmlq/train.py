"""Training XML-Q: vocabulary, tf.data input, schedule, early stopping, checkpoints.

The learning rate follows cosine decay with restarts (eBay §3.3.3, Figure 2): from 1e-3,
first period 2 epochs, each restart at 0.8 of the previous peak and each period twice the
previous one (Keras' ``CosineDecayRestarts``). Training stops early when the validation
Godbole–Sarawagi F1 (threshold 0.5) has not improved for ``patience`` epochs, and the best
epoch's weights are restored. Every random step takes ``seed``.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import keras
import numpy as np
import tensorflow as tf

from measure.metrics import gs_scores, pr_at_k
from measure.predict import match_to_truth
from qcat.model import top_k
from qcat.query_encoding import RESERVED, encode, token_index
from training.clicktable import ClickTable
from training.dataset import Dataset, truth_matrix
from training.xmlq.losses import StochasticNegativeMining, binary_crossentropy, soft_f1
from training.xmlq.model import PRESETS, build_xmlq

LOSSES = ("soft-f1", "bce", "snm")


@dataclass(frozen=True)
class XMLQConfig:
    preset: str = "small"
    loss: str = "soft-f1"
    rnn: bool = True
    cosine: bool = True  # False: a constant learning rate of 1e-3
    learning_rate: float = 1e-3
    epochs: int = 8
    batch_size: int = 256
    patience: int = 2
    min_token_count: int = 2
    max_vocabulary: int = 100_000
    seed: int = 0
    snm: dict = field(default_factory=lambda: {"sampled": 64, "top_k": 8, "kind": "powl", "phi": "hinge"})

    def __post_init__(self) -> None:
        if self.preset not in PRESETS:
            raise ValueError(f"unknown preset {self.preset!r}; expected one of {', '.join(PRESETS)}")
        if self.loss not in LOSSES:
            raise ValueError(f"unknown loss {self.loss!r}; expected one of {', '.join(LOSSES)}")
        if self.epochs < 1 or self.batch_size < 1:
            raise ValueError("epochs and batch size must be positive")


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


def input_pipeline(tokens: np.ndarray, labels: np.ndarray, n_labels: int, batch_size: int, seed: int | None,
                   weights: np.ndarray | None = None) -> tf.data.Dataset:
    """Batches of (token ids, multi-hot targets[, sample weights]); shuffled when ``seed``."""
    parts = (tokens, labels) if weights is None else (tokens, labels, weights.astype(np.float32))
    data = tf.data.Dataset.from_tensor_slices(parts)
    if seed is not None:
        data = data.shuffle(len(tokens), seed=seed, reshuffle_each_iteration=True)

    def to_dense(*batch):
        multi_hot = tf.reduce_max(tf.one_hot(batch[1], n_labels), axis=1)  # -1 pads give zero rows
        # Token ids travel as float32 (exact below 2^24) and the model's int32 input casts
        # them back: under a distribution strategy Keras averages a first batch across
        # workers to build the model, which fails on integer tensors.
        return (tf.cast(batch[0], tf.float32), multi_hot) + tuple(batch[2:])

    return data.batch(batch_size).map(to_dense, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)


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


def prepare(dataset: Dataset, config: XMLQConfig, train: ClickTable | None = None,
            train_weights: np.ndarray | None = None) -> Prepared:
    """Vocabulary and label space from ``train`` (default ``dataset.train``), token ids and
    label lists for it and for the validation split."""
    train = train if train is not None else dataset.train
    vocabulary = build_vocabulary(train.queries, config.min_token_count, config.max_vocabulary)
    used = np.unique(train.pair_category)
    labels = train.categories[used]
    label_of_category = np.full(len(train.categories), -1, dtype=np.int64)
    label_of_category[used] = np.arange(len(used))
    index = token_index(vocabulary)
    return Prepared(
        vocabulary=vocabulary,
        labels=labels,
        train_tokens=encode(train.queries, index),
        train_labels=label_lists(train, label_of_category),
        validation_tokens=encode(dataset.validation.queries, index),
        validation=dataset.validation,
        train_weights=train_weights,
    )


def validation_scores(model: keras.Model, prepared: Prepared, batch_size: int = 4096) -> dict[str, float]:
    """GS F1 (threshold 0.5) and PR@1/3 of the model on the validation split."""
    probabilities = model.predict(prepared.validation_tokens, batch_size=batch_size, verbose=0)
    labels, scores = top_k(probabilities, 10)
    validation = prepared.validation
    matched = match_to_truth(labels, scores, prepared.labels, validation.categories, truth_matrix(validation))
    return {"f1": gs_scores(matched, 0.5)["f1"], "pr@1": pr_at_k(matched, 1), "pr@3": pr_at_k(matched, 3)}


class ValidationF1(keras.callbacks.Callback):
    """Score ``network`` (the probabilities, whatever Keras trains) on validation after each
    epoch, keep the best weights, stop after ``patience`` epochs without a better F1, and
    restore the best at the end."""

    def __init__(self, network: keras.Model, prepared: Prepared, patience: int, checkpoint: Path | None,
                 log: Callable[[str], None]):
        super().__init__()
        self.network, self.prepared, self.patience, self.checkpoint, self.log = network, prepared, patience, checkpoint, log
        self.best_f1, self.best_epoch, self.best_weights, self.history = -1.0, -1, None, []

    def on_epoch_end(self, epoch: int, logs=None) -> None:
        scores = validation_scores(self.network, self.prepared)
        self.history.append({"epoch": epoch + 1, "loss": float((logs or {}).get("loss", np.nan)), **scores})
        self.log(f"epoch {epoch + 1}: loss {self.history[-1]['loss']:.4f}  validation F1 {scores['f1']:.4f}  "
                 f"PR@1 {scores['pr@1']:.4f}")
        if scores["f1"] > self.best_f1:
            self.best_f1, self.best_epoch, self.best_weights = scores["f1"], epoch + 1, self.network.get_weights()
            if self.checkpoint is not None:
                self.checkpoint.parent.mkdir(parents=True, exist_ok=True)
                self.network.save_weights(self.checkpoint)
        elif epoch + 1 - self.best_epoch >= self.patience:
            self.model.stop_training = True

    def on_train_end(self, logs=None) -> None:
        if self.best_weights is not None:
            self.network.set_weights(self.best_weights)


def steps_per_epoch(n: int, batch_size: int) -> int:
    return max(1, -(-n // batch_size))


def learning_rate(config: XMLQConfig, n_train: int):
    if not config.cosine:
        return config.learning_rate
    return keras.optimizers.schedules.CosineDecayRestarts(
        config.learning_rate, first_decay_steps=2 * steps_per_epoch(n_train, config.batch_size), t_mul=2.0, m_mul=0.8,
    )


def compile_for(config: XMLQConfig, network: keras.Model, n_train: int) -> keras.Model:
    """The model Keras trains: the network itself, or its logits for SNM."""
    optimizer = keras.optimizers.Adam(learning_rate(config, n_train))
    trainable = network
    if config.loss == "snm":
        trainable = keras.Model(network.input, network.get_layer("logits").output)
    trainable.compile(optimizer=optimizer, loss=loss_for(config, reduction="sum_over_batch_size"))
    return trainable


def fit_multi_worker(trainable: keras.Model, config: XMLQConfig, data: tf.data.Dataset,
                     strategy: tf.distribute.Strategy, monitor: ValidationF1) -> None:
    """The training loop across workers, written out: Keras 3.15's ``fit`` fails to
    average its logs under MultiWorkerMirroredStrategy. Each replica computes the loss on its
    share of the global batch; the optimizer all-reduces the gradients, so every worker
    applies the same update."""
    loss_function = loss_for(config, reduction=None)
    optimizer = trainable.optimizer
    distributed = strategy.experimental_distribute_dataset(data)

    def replica_step(tokens, targets, *weights):
        with tf.GradientTape() as tape:
            per_example = loss_function(targets, trainable(tokens, training=True))
            if weights:
                per_example = per_example * weights[0]
            loss = tf.nn.compute_average_loss(per_example, global_batch_size=config.batch_size)
        gradients = tape.gradient(loss, trainable.trainable_variables)
        optimizer.apply_gradients(zip(gradients, trainable.trainable_variables))
        return loss

    @tf.function
    def step(batch):
        return strategy.reduce("SUM", strategy.run(replica_step, args=batch), axis=None)

    monitor.set_model(trainable)
    for epoch in range(config.epochs):
        losses = [float(step(batch)) for batch in distributed]
        monitor.on_epoch_end(epoch, {"loss": float(np.mean(losses))})
        if trainable.stop_training:
            break
    monitor.on_train_end()


def loss_for(config: XMLQConfig, reduction: str | None):
    """The configured loss; with ``reduction=None`` one value per query."""
    if config.loss == "snm":
        return StochasticNegativeMining(seed=config.seed, reduction=reduction, **config.snm)
    return soft_f1 if config.loss == "soft-f1" else binary_crossentropy  # both per query


def seed_everything(seed: int) -> None:
    keras.utils.set_random_seed(seed)
    tf.config.experimental.enable_op_determinism()


def train(prepared: Prepared, config: XMLQConfig, checkpoint: Path | None = None,
          log: Callable[[str], None] = print, verbose: int = 2,
          strategy: tf.distribute.Strategy | None = None) -> tuple[keras.Model, dict]:
    """Fit XML-Q; returns the network (best validation epoch) and a training summary.

    With a ``strategy`` (e.g. ``MultiWorkerMirroredStrategy``) the variables are mirrored
    and every step's gradients are all-reduced, so all workers hold the same weights;
    ``config.batch_size`` is then the global batch, split across the workers.
    """
    seed_everything(config.seed)
    started = time.perf_counter()
    strategy = strategy or tf.distribute.get_strategy()  # the default: this process alone
    with strategy.scope():
        network = build_xmlq(RESERVED + len(prepared.vocabulary), len(prepared.labels), PRESETS[config.preset],
                             rnn=config.rnn, seed=config.seed)
        trainable = compile_for(config, network, len(prepared.train_tokens))
    data = input_pipeline(prepared.train_tokens, prepared.train_labels, len(prepared.labels), config.batch_size,
                          config.seed, prepared.train_weights)
    monitor = ValidationF1(network, prepared, config.patience, checkpoint, log)
    if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        fit_multi_worker(trainable, config, data, strategy, monitor)
    else:
        trainable.fit(data, epochs=config.epochs, verbose=verbose, callbacks=[monitor], shuffle=False)  # tf.data shuffles
    summary = {
        "config": asdict(config),
        "best_epoch": monitor.best_epoch,
        "validation": monitor.history[monitor.best_epoch - 1] if monitor.best_epoch > 0 else {},
        "history": monitor.history,
        "train_queries": int(len(prepared.train_tokens)),
        "vocabulary": len(prepared.vocabulary),
        "labels": int(len(prepared.labels)),
        "train_seconds": round(time.perf_counter() - started, 1),
    }
    return network, summary
