"""Training XML-Q: the fit loop, early stopping on the validation objective, checkpoints, resuming.

Plain Keras 3 under any backend (``KERAS_BACKEND`` tensorflow, jax or torch; choose it before
Keras is imported): the batches are numpy arrays from a :class:`keras.utils.PyDataset`,
shuffled per epoch from ``(seed, epoch)``, the losses and the schedule are ``keras.ops``, and
the checkpoints are Keras weight files plus numpy arrays. TensorFlow is imported only for
what exists only there: op determinism and ``tf.distribute`` (``--distributed`` under
TensorFlow; under JAX it is Keras' DataParallel, both in :mod:`qcat.training.xmlq.distributed`).

The learning rate follows cosine decay with restarts (eBay §3.3.3, Figure 2): from 1e-3,
first period 2 epochs, each restart at 0.8 of the previous peak and each period twice the
previous one (Keras' ``CosineDecayRestarts``). Training stops early when the validation
objective (:mod:`qcat.training.selection.objective`: the weighted PR@1 over the data's validation split and,
for a corpus, its real-text validation sets; the split alone for a user's log) has not improved
for ``patience`` epochs, and the best epoch's weights are restored. The paper does not say what
it stops on; we stop on what every other model choice is made on, so an epoch that fits the
simulated split better but real text worse is not the one kept. Every random step takes ``seed``.

What lives here: the fit loop (:func:`train`), the validation objective scored after each epoch with
early stopping and checkpoints (:class:`ValidationMonitor`), and resuming. The settings are in
:mod:`qcat.training.xmlq.config`, the inputs in :mod:`qcat.training.xmlq.inputs`; both are
importable from here too (``from qcat.training.xmlq.train import XMLQConfig, prepare, train``).
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import keras
import numpy as np

from qcat.measure.metrics import gs_scores, pr_at_k
from qcat.measure.predict import match_to_truth
from qcat.models.model import top_k
from qcat.models.query_encoding import RESERVED
from qcat.training.clicklogs.clicktable import ClickTable
from qcat.training.data.dataset import truth_matrix
from qcat.training.xmlq.checkpoint import Checkpoint, CheckpointError
from qcat.training.xmlq.config import EMBEDDING_INITS, LOSSES, XMLQConfig, compile_for, learning_rate, loss_for
from qcat.training.xmlq.determinism import seed_everything
from qcat.training.xmlq.distributed import device_multiple
from qcat.training.xmlq.inputs import Batches, EpochShuffle, Prepared, data_fingerprint, prepare
from qcat.training.xmlq.model import PRESETS, build_xmlq

# What callers import from here (qcat train xmlq, the benchmarks, the tests): the trainer's API.
__all__ = ["EMBEDDING_INITS", "LOSSES", "Batches", "Prepared", "XMLQConfig", "backend_and_device", "compile_for",
           "learning_rate", "prepare", "train", "validation_scores"]


def _matched(model: keras.Model, tokens: np.ndarray, table: ClickTable, labels: np.ndarray, batch_size: int):
    pad = -len(tokens) % device_multiple()  # a data-parallel run splits every batch evenly across its devices
    padded = np.concatenate([tokens, np.zeros((pad, tokens.shape[1]), tokens.dtype)]) if pad else tokens
    probabilities = model.predict(padded, batch_size=batch_size, verbose=0)[:len(tokens)]
    top_labels, top_scores = top_k(probabilities, 10)
    return match_to_truth(top_labels, top_scores, labels, table.categories, truth_matrix(table))


def validation_scores(model: keras.Model, prepared: Prepared, batch_size: int = 4096) -> dict[str, float]:
    """The validation objective (weighted PR@1 over the monitored sets), each set's PR@1, and GS
    F1 (threshold 0.5) and PR@1/3 on the validation split."""
    matched = _matched(model, prepared.validation_tokens, prepared.validation, prepared.labels, batch_size)
    scores = {"f1": gs_scores(matched, 0.5)["f1"], "pr@1": pr_at_k(matched, 1), "pr@3": pr_at_k(matched, 3)}
    objective = 0.0
    for name, (tokens, table, weight) in prepared.monitored.items():
        pr1 = scores["pr@1"] if table is prepared.validation else pr_at_k(
            _matched(model, tokens, table, prepared.labels, batch_size), 1)
        scores[f"pr@1 {name}"] = pr1
        objective += weight * pr1
    return {"objective": objective} | scores


RESUMABLE_CHANGES = ("epochs", "patience")  # settings a resumed run may change


class ValidationMonitor(keras.callbacks.Callback):
    """Score ``network`` (the probabilities, whatever Keras trains) on validation after each
    epoch, keep the best weights, stop after ``patience`` epochs without a better validation
    objective, and restore the best at the end. With a checkpoint, write the best weights when they
    improve and the resume state after every epoch."""

    def __init__(self, network: keras.Model, prepared: Prepared, patience: int, checkpoint: Checkpoint | None,
                 log: Callable[[str], None], state: dict | None = None):
        super().__init__()
        self.network, self.prepared, self.patience, self.checkpoint, self.log = network, prepared, patience, checkpoint, log
        self.best_objective, self.best_epoch, self.best_weights, self.history = -1.0, -1, None, []
        self.stopped = False
        self.backend = keras.backend.backend()  # each epoch records the backend that trained it
        self.state = state or {}  # config and data fingerprint, recorded with the resume state

    def resume_from(self, saved: dict) -> None:
        self.best_objective, self.best_epoch, self.history = saved["best_objective"], saved["best_epoch"], saved["history"]
        # Stopped early, it stays stopped unless a larger patience lets it go on.
        self.stopped = saved["stopped"] and saved["epoch"] - self.best_epoch >= self.patience
        if self.best_epoch > 0:
            self.checkpoint.load_best(self.network)
            self.best_weights = self.network.get_weights()

    def on_epoch_end(self, epoch: int, logs=None) -> None:
        scores = validation_scores(self.network, self.prepared)
        self.history.append({"epoch": epoch + 1, "loss": float((logs or {}).get("loss", np.nan)), **scores,
                             "backend": self.backend})
        per_set = ", ".join(f"{key[5:]} {value:.4f}" for key, value in scores.items() if key.startswith("pr@1 "))
        self.log(f"epoch {epoch + 1}: loss {self.history[-1]['loss']:.4f}  validation objective "
                 f"{scores['objective']:.4f} (PR@1 {per_set})  F1 {scores['f1']:.4f}")
        if scores["objective"] > self.best_objective:
            self.best_objective, self.best_epoch, self.best_weights = scores["objective"], epoch + 1, self.network.get_weights()
            if self.checkpoint is not None:
                self.checkpoint.save_best(self.network)
        elif epoch + 1 - self.best_epoch >= self.patience:
            self.model.stop_training = True
            self.stopped = True
        if self.checkpoint is not None:
            self.checkpoint.save_last(self.model, self.state | {
                "epoch": epoch + 1, "best_objective": self.best_objective, "best_epoch": self.best_epoch,
                "history": self.history, "stopped": self.stopped})

    def on_train_end(self, logs=None) -> None:
        if self.best_weights is not None:
            self.network.set_weights(self.best_weights)


def backend_and_device() -> str:
    """The Keras backend and the device it computes on, in words, e.g. ``keras 3.15.1, jax
    0.10.2 on 1 x gpu (NVIDIA H100 80GB HBM3)``."""
    backend = keras.backend.backend()
    devices: list[str] = []
    version = "?"
    try:
        if backend == "jax":
            import jax

            version = jax.__version__
            devices = [f"{d.platform} ({d.device_kind})" for d in jax.devices()]
        elif backend == "tensorflow":
            import tensorflow as tf

            version = tf.__version__
            gpus = tf.config.list_physical_devices("GPU")
            devices = [f"gpu ({tf.config.experimental.get_device_details(g).get('device_name', g.name)})" for g in gpus]
            devices = devices or ["cpu"]
        elif backend == "torch":
            import torch

            version = torch.__version__
            if torch.cuda.is_available():
                devices = [f"gpu ({torch.cuda.get_device_name(i)})" for i in range(torch.cuda.device_count())]
            devices = devices or ["cpu"]
    except Exception as exc:  # describing the device must never stop training
        devices = [f"unknown device ({exc})"]
    counts = Counter(devices)
    where = ", ".join(f"{n} x {d}" for d, n in counts.items()) or "no device found"
    return f"keras {keras.__version__}, {backend} {version} on {where}"


def train(prepared: Prepared, config: XMLQConfig, checkpoint: Path | None = None,
          log: Callable[[str], None] = print, verbose: int = 2, strategy=None,
          resume: bool = False) -> tuple[keras.Model, dict]:
    """Fit XML-Q; returns the network (best validation epoch) and a training summary.

    ``checkpoint`` is a directory (:class:`Checkpoint`), written after every epoch; with
    ``resume`` training goes on from it (same data and settings, ``epochs`` and ``patience``
    may grow) and ends as the uninterrupted run would have.

    With a ``strategy`` the variables are mirrored and every step's gradients are all-reduced,
    so all devices hold the same weights; ``config.batch_size`` is then the global batch, split
    across them: under TensorFlow a ``tf.distribute`` strategy (e.g. ``MultiWorkerMirroredStrategy``),
    under JAX a ``keras.distribution.DataParallel``, in force for the whole run.
    """
    keras_distribution = isinstance(strategy, keras.distribution.DataParallel)
    if strategy is not None and not keras_distribution and keras.backend.backend() != "tensorflow":
        raise ValueError(f"a tf.distribute strategy needs KERAS_BACKEND=tensorflow, not {keras.backend.backend()}")
    if keras_distribution and keras.backend.backend() != "jax":
        raise ValueError(f"Keras' DataParallel is wired for KERAS_BACKEND=jax, not {keras.backend.backend()}")
    with strategy.scope() if keras_distribution else contextlib.nullcontext():
        return _train(prepared, config, checkpoint, log, verbose, strategy if not keras_distribution else None,
                      resume)


def _train(prepared: Prepared, config: XMLQConfig, checkpoint: Path | None, log: Callable[[str], None],
           verbose: int, strategy, resume: bool) -> tuple[keras.Model, dict]:
    if resume and checkpoint is None:
        raise ValueError("resume needs a checkpoint directory")
    seed_everything(config.seed)
    started = time.perf_counter()
    store = Checkpoint(checkpoint) if checkpoint is not None else None
    record = {"config": asdict(config), "data": data_fingerprint(prepared)} if store is not None else {}
    saved = store.load_state() if resume else None
    if saved is not None:
        check_resumable(saved, record, store.directory)
    with strategy.scope() if strategy is not None else contextlib.nullcontext():
        network = build_xmlq(RESERVED + len(prepared.vocabulary), len(prepared.labels), PRESETS[config.preset],
                             rnn=config.rnn, seed=config.seed, initial_embeddings=prepared.initial_embeddings)
        trainable = compile_for(config, network, len(prepared.train_tokens))
        # Built here, not in the first step: the optimizer's state must exist before a checkpoint's
        # is loaded, and TensorFlow traces a step that creates variables twice (3-5 s a training).
        trainable.optimizer.build(trainable.trainable_variables)
        monitor = ValidationMonitor(network, prepared, config.patience, store, log, record)
        if saved is not None:
            monitor.resume_from(saved)
            store.restore(trainable, saved)
    initial_epoch = saved["epoch"] if saved is not None else 0
    if saved is not None:
        log(f"resumed from {store.directory} after epoch {initial_epoch} (best epoch {monitor.best_epoch})")
    if monitor.stopped or initial_epoch >= config.epochs:
        log("nothing left to train: " + ("early stopping had ended it" if monitor.stopped
                                          else f"{initial_epoch} of --epochs {config.epochs} done"))
        monitor.on_train_end()
    elif strategy is not None and is_multi_worker(strategy):
        from qcat.training.xmlq.distributed import fit_multi_worker, input_pipeline

        data = input_pipeline(prepared.train_tokens, prepared.train_labels, len(prepared.labels), config.batch_size,
                              config.seed, prepared.train_weights)
        fit_multi_worker(trainable, config, data, strategy, monitor, initial_epoch, loss_for(config, reduction=None))
    else:
        data = Batches(prepared.train_tokens, prepared.train_labels, len(prepared.labels), config.batch_size,
                       config.seed, prepared.train_weights, multiple=device_multiple())
        trainable.fit(data, epochs=config.epochs, initial_epoch=initial_epoch, verbose=verbose,
                      callbacks=[EpochShuffle(data), monitor], shuffle=False)  # Batches shuffles
    summary = {
        "config": asdict(config),
        "best_epoch": monitor.best_epoch,
        "validation": monitor.history[monitor.best_epoch - 1] if monitor.best_epoch > 0 else {},
        "history": monitor.history,
        "train_queries": len(prepared.train_tokens),
        "vocabulary": len(prepared.vocabulary),
        "labels": len(prepared.labels),
        "train_seconds": round(time.perf_counter() - started, 1),
        "backend": backend_and_device(),
    }
    if saved is not None:
        summary["resumed_after_epoch"] = initial_epoch
    return network, summary


def is_multi_worker(strategy) -> bool:
    if keras.backend.backend() != "tensorflow":
        return False
    import tensorflow as tf

    return isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)


def check_resumable(saved: dict, record: dict, where: Path) -> None:
    # Settings first: a changed setting that also changes the data (query_short_forms) is named.
    # A setting added after the checkpoint was made reads as its default (the behaviour then).
    old, new = asdict(XMLQConfig()) | saved.get("config", {}), record["config"]
    changed = sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k) and k not in RESUMABLE_CHANGES)
    if changed:
        raise CheckpointError(f"the checkpoint in {where} was made with other settings: "
                              + ", ".join(f"{k} {old.get(k)!r} (now {new.get(k)!r})" for k in changed))
    if saved.get("data") != record["data"]:
        raise CheckpointError(f"the checkpoint in {where} was made on other training data (vocabulary, labels or "
                              f"queries differ); train without --resume, or with the data it was made on")
