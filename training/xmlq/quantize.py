"""Smaller XML-Q graphs: the exported ONNX network with its weights stored in int8 or float16.

- ``int8``: every weight matrix stored as int8 with one float32 scale per output channel
  (symmetric, per row of the embedding table, per output column of the Dense and GRU kernels,
  per filter of the Conv kernels), turned back into float32 by ``Cast`` and ``Mul`` nodes on
  constants, which onnxruntime folds when it loads the graph: a quarter of the file, float32
  arithmetic, the float network's speed (and its memory once loaded).
- ``int8-dynamic``: onnxruntime's dynamic quantization (``quantize_dynamic``, weights QInt8 per
  channel, activations quantized to uint8 on every call). In the graph Keras exports it covers
  the embedding (``Gather`` -> int8 table + ``DequantizeLinear`` of the looked-up rows, one scale
  for the whole table), the three ``Conv`` (``ConvInteger``) and the two Dense ``MatMul``
  (``MatMulInteger``). tf2onnx and jax2onnx export each GRU as a ``Loop`` node (a GRU cell per
  step), not an ONNX ``GRU`` op, and its kernels enter the loop as loop inputs, which
  ``quantize_dynamic`` leaves float: they are stored as in ``int8`` and the recurrence computes in
  float32. jax2onnx keeps the Conv kernels in Keras' ``[width, in, filters]`` layout (transposed
  in the graph): they get a scale per filter too. On the
  demo's small network it moved the top-1 label of 0.6% of validation queries (``int8``: 0.3%)
  and was 8-9% slower one query at a time (docs/benchmarks.md, issue 22).
- ``fp16``: every float32 weight of at least ``MIN_ELEMENTS`` stored as float16, followed by a
  ``Cast`` back to float32: half the file, the same float32 arithmetic (folded at load too).

Biases, BatchNorm and LayerNorm parameters stay float32 in the int8 kinds, and those under
``MIN_ELEMENTS`` in every kind.
:func:`top1_agreement` measures what matters for serving: the share of queries whose top-1
label is the float network's; ``qcat train xmlq --quantize`` refuses a graph below its gate.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

KINDS = ("none", "fp16", "int8", "int8-dynamic")  # from the most faithful to the least
MIN_ELEMENTS = 1024  # smaller tensors (biases, norms) weigh nothing and stay float32
BATCH = 4096


def quantize(network: bytes, kind: str) -> bytes:
    """The ONNX graph ``network`` with its weights stored as ``kind`` (``none``: unchanged)."""
    if kind == "none":
        return network
    if kind == "fp16":
        return to_fp16(network)
    if kind == "int8":
        return to_int8(network)
    if kind == "int8-dynamic":
        return to_int8_dynamic(network)
    raise ValueError(f"unknown quantization {kind!r}; expected one of {', '.join(KINDS)}")


def to_int8(network: bytes) -> bytes:
    import onnx

    model = onnx.load_from_string(network)
    _weights_to_int8(model)
    return model.SerializeToString()


def to_int8_dynamic(network: bytes) -> bytes:
    import logging

    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with tempfile.TemporaryDirectory(prefix="qcat-quantize-") as tmp:
        path = Path(tmp) / "int8.onnx"
        logging.disable(logging.WARNING)  # its advice to run shape-inference preprocessing: not needed here
        try:
            quantize_dynamic(onnx.load_from_string(network), path, weight_type=QuantType.QInt8, per_channel=True)
        finally:
            logging.disable(logging.NOTSET)
        model = onnx.load(path)
    _weights_to_int8(model)  # what quantize_dynamic left float: the GRU kernels
    return model.SerializeToString()


def _weights_to_int8(model) -> None:
    """Store every float32 initializer of at least ``MIN_ELEMENTS`` as int8 with a scale per output
    channel, turned back into float32 by ``Cast`` and ``Mul`` (constants onnxruntime folds at
    load; a ``DequantizeLinear`` it would not fold, and would run on every call)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    graph = model.graph
    per_row = {node.input[0] for node in graph.node if node.op_type == "Gather"}  # embedding: a scale per token
    per_row |= {node.input[1] for node in graph.node if node.op_type == "Conv"}  # [filters, in, 1, width]
    nodes = []
    for tensor in list(graph.initializer):
        # Matrices only: not the vectors (BatchNorm, LayerNorm) nor a GRU's stacked [2, 3 x units] biases.
        if not _large_float(tensor) or len(tensor.dims) < 2 or (len(tensor.dims) == 2 and tensor.dims[0] <= 2):
            continue
        weights = numpy_helper.to_array(tensor)
        if tensor.name in per_row:
            reduce = tuple(range(1, weights.ndim))
        else:  # a MatMul's [in, out] kernel (the Dense layers', the GRU kernels the loops read): a scale per
            # column; a Conv kernel in Keras' [width, in, out] layout (jax2onnx transposes it in the graph): per filter
            reduce = tuple(range(weights.ndim - 1))
        scale = np.abs(weights).max(axis=reduce, keepdims=True) / 127.0
        scale = np.where(scale > 0, scale, 1.0).astype(np.float32)
        quantized = np.clip(np.round(weights / scale), -127, 127).astype(np.int8)
        graph.initializer.remove(tensor)
        graph.initializer.extend([numpy_helper.from_array(quantized, f"{tensor.name}_int8"),
                                  numpy_helper.from_array(scale, f"{tensor.name}_scale")])
        nodes += [helper.make_node("Cast", [f"{tensor.name}_int8"], [f"{tensor.name}_unscaled"], to=TensorProto.FLOAT,
                                   name=f"{tensor.name}_to_float"),
                  helper.make_node("Mul", [f"{tensor.name}_unscaled", f"{tensor.name}_scale"], [tensor.name],
                                   name=f"{tensor.name}_scaled")]
    _prepend(graph, nodes)
    onnx.checker.check_model(model)


def to_fp16(network: bytes) -> bytes:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    model = onnx.load_from_string(network)
    graph = model.graph
    casts = []
    for tensor in list(graph.initializer):
        if not _large_float(tensor):
            continue
        half = numpy_helper.from_array(numpy_helper.to_array(tensor).astype(np.float16), f"{tensor.name}_fp16")
        graph.initializer.remove(tensor)
        graph.initializer.append(half)
        casts.append(helper.make_node("Cast", [half.name], [tensor.name], to=TensorProto.FLOAT,
                                      name=f"{tensor.name}_to_float"))
    _prepend(graph, casts)
    onnx.checker.check_model(model)
    return model.SerializeToString()


def _large_float(tensor) -> bool:
    from onnx import TensorProto

    return tensor.data_type == TensorProto.FLOAT and int(np.prod(tensor.dims)) >= MIN_ELEMENTS


def _prepend(graph, nodes: list) -> None:
    """Put ``nodes`` first (ONNX wants nodes in topological order; these read only initializers)."""
    existing = list(graph.node)
    del graph.node[:]
    graph.node.extend(nodes + existing)


def top1(network: bytes, token_ids: np.ndarray) -> np.ndarray:
    """The top-1 output column of ``network`` for each row of token ids (onnxruntime, CPU)."""
    from qcat.models.xmlq import new_session, onnxruntime_options

    session = new_session(network, onnxruntime_options())  # as the bundle serves it
    name = session.get_inputs()[0].name
    return np.concatenate([session.run(None, {name: token_ids[start:start + BATCH].astype(np.int32)})[0].argmax(axis=1)
                           for start in range(0, len(token_ids), BATCH)] or [np.zeros(0, dtype=np.int64)])


def agreement(reference: np.ndarray, candidate: np.ndarray) -> float:
    """The share of rows whose top-1 labels are equal (1.0 for no rows)."""
    if len(reference) != len(candidate):
        raise ValueError(f"{len(reference)} reference rows against {len(candidate)}")
    return float(np.mean(reference == candidate)) if len(reference) else 1.0


def top1_agreement(reference: bytes, candidate: bytes, token_ids: np.ndarray) -> float:
    """The share of ``token_ids`` rows on which ``candidate`` ranks the same label first as ``reference``."""
    return agreement(top1(reference, token_ids), top1(candidate, token_ids))


class AgreementError(ValueError):
    """The quantized network's top-1 labels agree with the float network's too rarely."""


def quantized_model(model, kind: str, query_sets: dict, min_agreement: float):
    """``model`` (an :class:`qcat.models.xmlq.XMLQModel`) with its network quantized to ``kind``, checked on
    the queries of ``query_sets`` (name -> queries) together: refused (:class:`AgreementError`)
    when the top-1 agreement is below ``min_agreement``. The config and metrics record the
    quantization, the agreement (overall and per set), the number of queries and both sizes of
    ``model.onnx``."""
    from dataclasses import replace

    from qcat.models.query_encoding import encode, token_index

    record = {"kind": kind, "float_bytes": len(model.network)}
    if kind == "none":
        return replace(model, config=model.config | {"quantize": kind}, metrics=model.metrics | {"quantization": record})
    network = quantize(model.network, kind)
    index = token_index(model.vocabulary)
    distinct = list(dict.fromkeys(q for queries in query_sets.values() for q in queries))
    reference, candidate = top1(model.network, encode(distinct, index)), top1(network, encode(distinct, index))
    share = agreement(reference, candidate)
    row = {q: i for i, q in enumerate(distinct)}
    per_set = {}
    for name, queries in query_sets.items():
        rows = np.array([row[q] for q in queries], dtype=np.int64)
        per_set[name] = {"top1_agreement": round(agreement(reference[rows], candidate[rows]), 6), "queries": len(rows)}
    record |= {"bytes": len(network), "top1_agreement": round(share, 6), "queries": len(distinct),
               "min_agreement": min_agreement, "per_set": per_set}
    if share < min_agreement:
        raise AgreementError(f"--quantize {kind}: the quantized network's top-1 label agrees with the float "
                             f"network's on {share:.2%} of {len(distinct):,} validation queries, below "
                             f"--min-agreement {min_agreement:g}; try "
                             + " or ".join(f"--quantize {k}" for k in KINDS[KINDS.index(kind) - 1::-1]))
    return replace(model, network=network, config=model.config | {"quantize": kind},
                   metrics=model.metrics | {"quantization": record})


def describe_quantization(record: dict) -> str:
    """One line for the training log."""
    if record["kind"] == "none":
        return f"model.onnx {record['float_bytes'] / 2**20:.1f} MiB (float32, --quantize none)"
    return (f"model.onnx {record['bytes'] / 2**20:.1f} MiB ({record['kind']}; float32 {record['float_bytes'] / 2**20:.1f} "
            f"MiB), top-1 agreement with float {record['top1_agreement']:.2%} on {record['queries']:,} validation "
            f"queries (gate {record['min_agreement']:g}; "
            + ", ".join(f"{name} {r['top1_agreement']:.2%}" for name, r in record["per_set"].items()) + ")")
