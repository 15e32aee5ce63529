"""Trains XML-Q on the Best Buy sample under JAX twice, once on one device and once with
Keras' DataParallel over every device JAX sees, and writes what
tests/test_xmlq_data_parallel.py compares (run it with
``XLA_FLAGS=--xla_force_host_platform_device_count=2`` for two simulated CPU devices).

    KERAS_BACKEND=jax python tests/xmlq_data_parallel_job.py OUT_DIR

writes to OUT_DIR: ``devices.json`` (the devices, the mesh of the trained variables, the
validation queries), ``one.npz`` and ``parallel.npz`` (the trained weights) and
``histories.json`` (both runs' epochs: loss and validation scores)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import keras
import numpy as np
from xmlq_backend_job import tiny_prepared

from qcat.training.xmlq.distributed import data_parallel, describe_data_parallel
from qcat.training.xmlq.train import XMLQConfig, train


def main(out: Path) -> None:
    config = XMLQConfig(epochs=2, batch_size=32, min_token_count=1)
    _, prepared = tiny_prepared(config)  # whole batches of 32: both runs see the same batches
    one, one_summary = train(prepared, config, log=lambda message: None, verbose=0)
    data_parallel_run(out, prepared, config, one, one_summary)


def data_parallel_run(out: Path, prepared, config: XMLQConfig, one, one_summary: dict) -> None:
    """Trains as ``one`` was trained (one device) with DataParallel over every device, and writes
    both (tests/xmlq_backend_job.py calls it with its first run)."""
    assert keras.backend.backend() == "jax", keras.backend.backend()
    quiet = {"log": lambda message: None, "verbose": 0}
    distribution = data_parallel(config.batch_size)
    parallel, parallel_summary = train(prepared, config, strategy=distribution, **quiet)
    mesh = parallel.weights[0].value.sharding.mesh
    out.mkdir(parents=True, exist_ok=True)
    (out / "devices.json").write_text(json.dumps({
        "devices": [str(d) for d in keras.distribution.list_devices()], "mesh": dict(mesh.shape),
        "described": describe_data_parallel(distribution),
        "validation_queries": len(prepared.validation_tokens)}))
    np.savez(out / "one.npz", *one.get_weights())
    np.savez(out / "parallel.npz", *parallel.get_weights())
    (out / "histories.json").write_text(json.dumps({"one": one_summary["history"],
                                                    "parallel": parallel_summary["history"]}))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
