"""Trains XML-Q on the Best Buy sample under whatever ``KERAS_BACKEND`` this process has and
writes what tests/test_xmlq_backends.py compares (a backend is chosen before Keras is
imported, so a test needs a process of its own for each backend).

    python tests/xmlq_backend_job.py OUT_DIR

writes to OUT_DIR: ``backend.txt``; ``run1.npz`` and ``run2.npz`` (the weights of two
seeded 2-epoch runs); ``uninterrupted/`` (run 1's checkpoint) and ``resumed/`` (1 epoch,
then resumed to 2) with ``histories.json``; ``snm/`` (the checkpoint of 1 SNM epoch);
``bundle/`` (run 1 exported to ONNX) with ``tokens.npy`` and ``probabilities.npy`` (this
backend's scores of those tokens). Under JAX with several devices (``XLA_FLAGS=
--xla_force_host_platform_device_count=2``) also ``data-parallel/``: run 1 trained again with
Keras' DataParallel over them (tests/xmlq_data_parallel_job.py, tests/test_xmlq_data_parallel.py)."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402

from qcat.models.query_encoding import encode, token_index  # noqa: E402
from qcat.taxonomy import load_taxonomy  # noqa: E402
from qcat.training.clicklogs.clicklog import ingest  # noqa: E402
from qcat.training.data.dataset import Dataset  # noqa: E402
from qcat.training.xmlq.export import bundle_model  # noqa: E402
from qcat.training.xmlq.train import XMLQConfig, backend_and_device, prepare, train  # noqa: E402

DATA = Path(__file__).parent / "data"


def tiny_prepared(config: XMLQConfig):
    taxonomy = load_taxonomy(DATA / "bestbuy_categories_2016.json.gz")
    result = ingest(DATA / "bestbuy_clicks_sample.csv", taxonomy, min_clicks=1)
    dataset = Dataset.from_table(result.table, result.taxonomy)
    prepared = prepare(dataset, config)
    # Whole batches only: a last, smaller batch would cost JAX a second compilation per run.
    whole = len(prepared.train_tokens) // config.batch_size * config.batch_size
    prepared.train_tokens, prepared.train_labels = prepared.train_tokens[:whole], prepared.train_labels[:whole]
    return dataset, prepared


def main(out: Path) -> None:
    quiet = {"log": lambda message: None, "verbose": 0}
    (out / "backend.txt").write_text(f"{keras.backend.backend()}\n{backend_and_device()}\n")
    config = XMLQConfig(epochs=2, batch_size=32, min_token_count=1)
    dataset, prepared = tiny_prepared(config)
    first, summary = train(prepared, config, checkpoint=out / "uninterrupted", **quiet)
    np.savez(out / "run1.npz", *first.get_weights())
    second, _ = train(prepared, config, **quiet)
    np.savez(out / "run2.npz", *second.get_weights())
    one = replace(config, epochs=1)
    train(prepared, one, checkpoint=out / "resumed", **quiet)
    _, resumed = train(prepared, config, checkpoint=out / "resumed", resume=True, **quiet)
    (out / "histories.json").write_text(json.dumps({"uninterrupted": summary["history"],
                                                    "resumed": resumed["history"]}))
    snm = replace(one, loss="snm")
    train(prepared, snm, checkpoint=out / "snm", **quiet)
    tokens = encode(list(dataset.table.queries), token_index(prepared.vocabulary))  # every query of the sample
    np.save(out / "tokens.npy", tokens)
    np.save(out / "probabilities.npy", first.predict(tokens, batch_size=4096, verbose=0))
    bundle_model(first, prepared.vocabulary, prepared.labels, dataset.taxonomy, {}, {}).save(out / "bundle")
    if keras.backend.backend() == "jax" and len(keras.distribution.list_devices()) > 1:
        from xmlq_data_parallel_job import data_parallel_run

        data_parallel_run(out / "data-parallel", prepared, config, first, summary)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
