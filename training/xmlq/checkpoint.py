"""The XML-Q trainer's checkpoint directory: what ``--resume`` reads back (the trainer,
:mod:`qcat.training.xmlq.train`, decides whether a checkpoint fits the data and settings)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import keras
import numpy as np


class CheckpointError(ValueError):
    """A checkpoint that is missing, damaged or made for other data or settings."""


class Checkpoint:
    """The trainer's checkpoint directory.

    - ``best.weights.h5``: the network at the best validation epoch, its weights only (Keras
      weights, which load into the network under any backend, e.g. to export it elsewhere;
      no optimizer state, which a network compiled for training would otherwise carry: the
      paper preset's file is a third of ``last.npz``);
    - ``last.npz``: everything the next epoch needs, written after every epoch: the
      trained model's variables (weights, BatchNorm statistics, dropout and SNM random
      states) and the optimizer's (step count, Adam moments), by variable path;
    - ``state.json``: epochs done, the monitor's history and best epoch, whether early
      stopping fired, the config and a fingerprint of the training data.

    ``--resume`` restores all three, so a resumed run goes on exactly as one that never
    stopped (same shuffles, same learning rate, same random draws)."""

    BEST, LAST, STATE = "best.weights.h5", "last.npz", "state.json"

    def __init__(self, directory: Path):
        self.directory = Path(directory)

    @property
    def best(self) -> Path:
        return self.directory / self.BEST

    def exists(self) -> bool:
        return all((self.directory / name).is_file() for name in (self.BEST, self.LAST, self.STATE))

    def save_best(self, network: keras.Model) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        partial = self.directory / f"partial.{self.BEST}"
        weights_only(network).save_weights(partial)
        os.replace(partial, self.best)

    def load_best(self, network: keras.Model) -> None:
        """Assign the best epoch's weights to ``network`` (its optimizer, if any, is left as it is)."""
        weights_only(network).load_weights(self.best)

    def save_last(self, trainable: keras.Model, state: dict) -> None:
        """Write the resume state; each file is replaced whole (a crash leaves the old one)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        arrays, names = {}, {}
        for group, variables in _resume_variables(trainable).items():
            names[group] = [v.path for v in variables]
            for i, v in enumerate(variables):
                arrays[f"{group}/{i}"] = v.numpy()
        partial = self.directory / "partial.last.npz"
        with open(partial, "wb") as handle:
            np.savez(handle, **arrays)
        os.replace(partial, self.directory / self.LAST)
        partial = self.directory / "partial.state.json"
        partial.write_text(json.dumps(state | {"variables": names}, indent=1))
        os.replace(partial, self.directory / self.STATE)

    def load_state(self) -> dict:
        if not self.exists():
            raise CheckpointError(f"no checkpoint to resume in {self.directory} (it needs {self.BEST}, {self.LAST} "
                                  f"and {self.STATE}, written after each epoch)")
        try:
            return json.loads((self.directory / self.STATE).read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise CheckpointError(f"{self.directory / self.STATE}: {exc}") from None

    def restore(self, trainable: keras.Model, state: dict) -> None:
        """Assign the saved variables to ``trainable`` and its optimizer (built here if not yet)."""
        if not trainable.optimizer.built:
            trainable.optimizer.build(trainable.trainable_variables)
        with np.load(self.directory / self.LAST) as arrays:
            for group, variables in _resume_variables(trainable).items():
                saved = state["variables"].get(group, [])
                if len(saved) != len(variables):
                    raise CheckpointError(f"{self.directory}: the checkpoint has {len(saved)} {group} variables, "
                                          f"this model {len(variables)}")
                for i, v in enumerate(variables):
                    value = arrays[f"{group}/{i}"]
                    if tuple(value.shape) != tuple(v.shape):
                        raise CheckpointError(f"{self.directory}: {saved[i]} has shape {value.shape}, this "
                                              f"model's {v.path} {tuple(v.shape)}")
                    v.assign(value)


def weights_only(network: keras.Model) -> keras.Model:
    """``network``'s layers as a model of their own, never compiled: saving it writes the
    network's variables and no optimizer (Keras saves a compiled model's optimizer with its
    weights). The file has the network's layout, so it loads into the network or a new one."""
    return keras.Model(network.inputs, network.outputs, name=network.name)


def _resume_variables(trainable: keras.Model) -> dict:
    return {"model": list(trainable.variables), "optimizer": list(trainable.optimizer.variables)}
