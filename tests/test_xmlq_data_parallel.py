"""``qcat train xmlq --distributed`` under JAX: Keras' DataParallel over two simulated CPU
devices (``XLA_FLAGS=--xla_force_host_platform_device_count=2``) trains the network the one-device
run trains, to the order of floating-point sums.

Tolerance: after 2 epochs (26 steps of 32 queries) every weight within 1e-4 of the one-device
run's (measured on 2026-11-26: 1.0e-5), each epoch's loss within a relative 1e-5 and its
validation scores equal. The two differ only in how the batch's sums are split
(each device sums its half, then the halves are added), and Adam divides each update by the
root of its second moment, which carries a near-zero gradient's rounding into the weight.

A backend and the device count are fixed when JAX starts, so the runs happen in a subprocess
(tests/xmlq_data_parallel_job.py, called by tests/xmlq_backend_job.py after its own runs: its
first run is the one-device run)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from test_cli import qcat

pytestmark = [pytest.mark.skipif(importlib.util.find_spec("jax") is None or importlib.util.find_spec("keras") is None,
                                 reason="jax or keras is not installed (pip install 'jax[cpu]' keras): "
                                        "the JAX backend's DataParallel is not tested")]

TESTS = Path(__file__).parent
ROOT = TESTS.parent
TWO_DEVICES = {"KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu", "CUDA_VISIBLE_DEVICES": "",
               "XLA_FLAGS": "--xla_force_host_platform_device_count=2", "TF_CPP_MIN_LOG_LEVEL": "3"}


@pytest.fixture(scope="module")
def runs(jax_run) -> Path:
    """The two-device runs of tests/xmlq_backend_job.py (session fixture ``jax_run``, tests/conftest.py:
    the job that tests/test_xmlq_backends.py reads, run once on two simulated devices as TWO_DEVICES sets them)."""
    return jax_run / "data-parallel"


@pytest.mark.slow
def test_two_devices_hold_the_replicated_variables(runs) -> None:
    devices = json.loads((runs / "devices.json").read_text())
    assert len(devices["devices"]) == 2 and devices["mesh"] == {"batch": 2}
    assert devices["described"].startswith("distributed: data parallel over 2 devices (")
    assert devices["validation_queries"] % 2 == 1  # an odd set: predicted padded to the devices, then cut


@pytest.mark.slow
def test_two_devices_train_what_one_device_trains(runs) -> None:
    histories = json.loads((runs / "histories.json").read_text())
    one, parallel = histories["one"], histories["parallel"]
    assert len(one) == len(parallel) == 2
    for a, b in zip(one, parallel):
        assert b["loss"] == pytest.approx(a["loss"], rel=1e-5)
        assert {k: v for k, v in b.items() if k != "loss"} == {k: v for k, v in a.items() if k != "loss"}
    with np.load(runs / "one.npz") as first, np.load(runs / "parallel.npz") as second:
        assert len(first.files) == len(second.files) > 10
        for key in first.files:
            np.testing.assert_allclose(second[key], first[key], rtol=0, atol=1e-4, err_msg=key)


@pytest.mark.slow
def test_distributed_under_jax_needs_a_batch_that_splits_across_the_devices(tmp_path, data_dir) -> None:
    result = qcat("train", "xmlq", "--distributed", "--log", data_dir / "bestbuy_clicks_sample.csv", "--taxonomy",
                  data_dir / "bestbuy_categories_2016.json.gz", "--min-clicks", "1", "--batch-size", "33",
                  "--out", tmp_path / "xmlq", env=TWO_DEVICES)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert result.stderr.strip().splitlines()[-1] == (
        "qcat: error: --distributed: the batch size (33) must be a multiple of the 2 devices, so that every batch "
        "splits evenly across them")


@pytest.mark.slow
@pytest.mark.heavy  # 40 s: the command end to end; the two-device equality above runs by default
def test_distributed_under_jax_trains_and_exports_from_the_command_line(tmp_path, data_dir) -> None:
    """438 training queries in batches of 64 over 2 devices (the last batch of 54 splits evenly)."""
    from qcat.classifier import load_model

    flags = ["train", "xmlq", "--distributed", "--log", data_dir / "bestbuy_clicks_sample.csv", "--taxonomy",
             data_dir / "bestbuy_categories_2016.json.gz", "--min-clicks", "1", "--batch-size", "64", "--epochs", "1",
             "--out", tmp_path / "xmlq"]
    # not test_cli.qcat: its 120 s are too few for training, calibrating and exporting on a loaded machine
    result = subprocess.run([sys.executable, "-m", "qcat.cli", *map(str, flags)], capture_output=True, text=True,
                            timeout=600, env={**os.environ, **TWO_DEVICES})
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert lines[0] == "distributed: data parallel over 2 devices (cpu:0, cpu:1)"
    assert lines[1].startswith("training on keras ") and ", jax " in lines[1] and lines[1].endswith("on 2 x cpu (cpu)")
    assert "dataset: 438 train queries" in result.stdout
    model = load_model(tmp_path / "xmlq")
    assert model.metrics["best_epoch"] == 1 and model.metrics["history"][0]["backend"] == "jax"


def test_one_device_needs_no_batch_multiple_and_data_parallel_is_refused_outside_jax() -> None:
    """Without a Keras distribution in force a batch may be any size (the trainer's batches and
    prediction pad to a multiple of 1), and DataParallel is asked for under JAX alone: under this
    process's backend it is refused, naming the backend, before any device is listed."""
    import keras

    from qcat.training.xmlq.distributed import data_parallel, device_multiple

    assert keras.distribution.distribution() is None and device_multiple() == 1
    if keras.backend.backend() != "jax":
        with pytest.raises(ValueError, match=f"wired for KERAS_BACKEND=jax, not {keras.backend.backend()}$"):
            data_parallel(32)
