"""XML-Q quantization: int8 and fp16 graphs, the top-1 agreement gate, quantized bundles."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
onnx = pytest.importorskip("onnx")
from conftest import XMLQ_CLI_FLAGS  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from test_cli import qcat  # noqa: E402

from qcat.training.xmlq.quantize import agreement, quantize, top1, top1_agreement  # noqa: E402


def last_token_network(table: np.ndarray) -> bytes:
    """A hand-made network: the scores of a query are the ``table`` row of its last token id."""
    last = helper.make_node("Gather", ["tokens", "nine"], ["last"], axis=1)
    scores = helper.make_node("Gather", ["table", "last"], ["scores"], axis=0)
    graph = helper.make_graph(
        [last, scores], "last_token", [helper.make_tensor_value_info("tokens", TensorProto.INT32, [None, 10])],
        [helper.make_tensor_value_info("scores", TensorProto.FLOAT, [None, table.shape[1]])],
        [numpy_helper.from_array(table.astype(np.float32), "table"), numpy_helper.from_array(np.array(9, np.int64), "nine")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)]).SerializeToString()


def test_agreement_is_the_share_of_equal_top_labels() -> None:
    rng = np.random.default_rng(0)
    table = rng.random((64, 32))
    tokens = np.zeros((200, 10), dtype=np.int32)
    tokens[:, 9] = rng.integers(0, 64, 200)
    assert top1(last_token_network(table), tokens).tolist() == table[tokens[:, 9]].argmax(axis=1).tolist()
    # Another network whose rows 0..15 rank a different label first: the share of queries
    # ending in another token agrees.
    other = table.copy()
    other[:16, :] = -other[:16, :]
    expected = np.mean(tokens[:, 9] >= 16)
    assert top1_agreement(last_token_network(table), last_token_network(other), tokens) == pytest.approx(expected)
    assert agreement(np.array([0, 1, 2, 3]), np.array([0, 1, 0, 3])) == 0.75
    assert agreement(np.array([], dtype=int), np.array([], dtype=int)) == 1.0
    with pytest.raises(ValueError):
        quantize(last_token_network(table), "int4")


def test_int8_scales_each_embedding_row_on_its_own() -> None:
    rng = np.random.default_rng(2)
    table = rng.random((64, 32)) * 0.5
    table[np.arange(64), rng.integers(0, 32, 64)] = 1.0
    table *= 10.0 ** rng.uniform(-3, 3, (64, 1))  # one scale for the table would round the small rows to 0
    tokens = np.zeros((64, 10), dtype=np.int32)
    tokens[:, 9] = np.arange(64)
    network = last_token_network(table)
    int8 = quantize(network, "int8")
    assert top1(int8, tokens).tolist() == table.argmax(axis=1).tolist()
    assert len(int8) < 0.4 * len(network) and len(quantize(network, "fp16")) < 0.6 * len(network)


TRAIN = ["train", "xmlq", "--epochs", "1", *XMLQ_CLI_FLAGS[6:]]  # --batch-size 32 --min-token-count 1


@pytest.fixture(scope="module")
def trained(tmp_path_factory, xmlq_cli_run):
    """A float XML-Q bundle trained for one epoch on the Best Buy click sample, its checkpoint beside it
    (``qcat train xmlq`` with TRAIN's settings, run once a session: tests/conftest.py)."""
    root = tmp_path_factory.mktemp("quantize")
    for name in ("xmlq", "xmlq.checkpoints"):
        shutil.copytree(xmlq_cli_run / name, root / name)
    return root, [str(a) for a in XMLQ_CLI_FLAGS[:6]]


@pytest.mark.slow
def test_fp16_and_int8_graphs_are_smaller_and_score_close_to_float(trained) -> None:
    from qcat.classifier import load_model

    root, _ = trained
    model = load_model(root / "xmlq")
    assert model.metrics["quantization"] == {"kind": "none", "float_bytes": len(model.network)}
    tokens = np.random.default_rng(1).integers(0, len(model.vocabulary) + 3, (300, 10)).astype(np.int32)
    scores = model.probabilities(tokens)
    for kind, size, tolerance in (("fp16", 0.55, 1e-3), ("int8", 0.4, 0.05), ("int8-dynamic", 0.4, 0.05)):
        network = quantize(model.network, kind)
        assert len(network) < size * len(model.network), kind
        quantized = type(model)(labels=model.labels, taxonomy=model.taxonomy, vocabulary=model.vocabulary,
                                network=network, config={}, metrics={})
        np.testing.assert_allclose(quantized.probabilities(tokens), scores, atol=tolerance)
        assert top1_agreement(model.network, network, tokens) > 0.9, kind
        one, batch = quantized.predict_one("apple ipod nano case", 5), quantized.predict(["apple ipod nano case"], 5)
        assert one.labels.tolist() == batch.labels.tolist()


def test_min_agreement_above_one_is_a_flag_error(tmp_path) -> None:
    result = qcat("train", "xmlq", "--quantize", "int8", "--min-agreement", "1.01", "--out", tmp_path / "x")
    assert result.returncode == 2 and "--min-agreement" in result.stderr and "1.01" in result.stderr


def damaged(network: bytes) -> bytes:
    """``network`` with the logits' kernel negated: its top label becomes about its last."""
    model = onnx.load_from_string(network)
    kernel = [node for node in model.graph.node if node.op_type == "MatMul"][-1].input[1]
    tensor = next(t for t in model.graph.initializer if t.name == kernel)
    tensor.CopyFrom(numpy_helper.from_array(-numpy_helper.to_array(tensor), kernel))
    return model.SerializeToString()


@pytest.mark.slow
def test_resume_quantizes_a_finished_run_and_the_gate_refuses_a_bad_graph(trained, monkeypatch, capsys) -> None:
    from qcat.classifier import load_model
    from qcat.cli import main
    from qcat.training.xmlq import quantize as module

    root, data = trained
    shutil.move(root / "xmlq", root / "float")  # a finished run: the bundle moved away, the checkpoint kept
    resume = [*TRAIN, *data, "--out", str(root / "xmlq"), "--resume"]
    with monkeypatch.context() as patch:
        patch.setattr(module, "quantize", lambda network, kind: damaged(network))
        assert main([*resume, "--quantize", "int8"]) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "agrees with the float network's on" in error[0] and "--quantize fp16" in error[0]
    assert not (root / "xmlq").exists() and (root / "xmlq.checkpoints" / "best.weights.h5").is_file()

    assert main([*resume, "--quantize", "int8", "--min-agreement", "0.5"]) == 0
    model = load_model(root / "xmlq")
    record = model.metrics["quantization"]
    assert model.config["quantize"] == "int8" and record["kind"] == "int8"
    assert 0.5 <= record["top1_agreement"] <= 1 and record["queries"] > 0 and record["min_agreement"] == 0.5
    assert record["per_set"]["log"]["queries"] == record["queries"]  # a log's one validation set
    assert record["bytes"] == (root / "xmlq" / "model.onnx").stat().st_size < record["float_bytes"]
    # Exported again from the checkpoint: the same weights, node names numbered a little differently.
    assert record["float_bytes"] == pytest.approx((root / "float" / "model.onnx").stat().st_size, rel=0.01)
    assert model.calibration is not None  # fitted on the quantized network
    result = qcat("classify", "--model", root / "xmlq", "--json", "apple ipod nano case")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.splitlines()[0])["categories"]
