"""Inputs whose rank the graph's kernels need exactly: the one shape check before a run.

TF Serving's Predict does not compare a fed tensor's shape with the signature's; the graph
decides. TensorFlow's oneDNN kernels (on by default on x86 CPUs, 2-3x faster on convolutions)
do not always decide gracefully: a convolution fed a tensor of the wrong rank fails a CHECK
and aborts the process (``tensor_format.h: Check failed: index >= 0 && index <
num_total_dims``) where TensorFlow's Eigen kernel answers INVALID_ARGUMENT ("convolution
input must be 4-dimensional"). So a signature input from which such a kernel can be reached
(in the graph, or in a function the graph calls) must come with the rank its signature
records; every other input is fed whatever shape it has, as TF Serving feeds it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import tensorflow as tf
from tensorflow.core.framework import function_pb2

# Kernels that need a fixed input rank and whose oneDNN version aborts on another one.
RANK_STRICT_OPS = frozenset(
    {
        "Conv2D",
        "Conv3D",
        "DepthwiseConv2dNative",
        "Conv2DBackpropInput",
        "Conv3DBackpropInputV2",
        "MaxPool",
        "MaxPoolV2",
        "MaxPool3D",
        "AvgPool",
        "AvgPool3D",
        "FusedBatchNorm",
        "FusedBatchNormV2",
        "FusedBatchNormV3",
        "LRN",
    }
)
_CALL_OPS = frozenset({"PartitionedCall", "StatefulPartitionedCall"})


def _function_ops(library: Iterable[function_pb2.FunctionDef]) -> dict[str, set[str]]:
    """Function name -> the op types it runs, called functions included."""
    direct: dict[str, set[str]] = {}
    calls: dict[str, set[str]] = {}
    for function in library:
        name = function.signature.name
        direct[name] = {node.op for node in function.node_def}
        calls[name] = {
            attr.func.name
            for node in function.node_def
            for attr in node.attr.values()
            if attr.HasField("func")
        }
    resolved: dict[str, set[str]] = {}
    for name in direct:
        seen, stack, ops = set(), [name], set()
        while stack:
            current = stack.pop()
            if current in seen or current not in direct:
                continue
            seen.add(current)
            ops |= direct[current]
            stack.extend(calls[current])
        resolved[name] = ops
    return resolved


def _strict_op_reached(
    graph: tf.Graph, tensor_name: str, function_ops: Mapping[str, set[str]]
) -> str | None:
    """The first rank-strict op type the tensor flows into, or None."""
    seen: set[str] = set()
    try:
        stack = [graph.as_graph_element(tensor_name).op]
    except (KeyError, ValueError, TypeError):  # a signature naming no tensor of the graph
        return None
    while stack:
        op = stack.pop()
        if op.name in seen:
            continue
        seen.add(op.name)
        if op.type in RANK_STRICT_OPS:
            return op.type
        if op.type in _CALL_OPS:
            strict = function_ops.get(op.get_attr("f").name, set()) & RANK_STRICT_OPS
            if strict:
                return min(strict)
        stack.extend(consumer for output in op.outputs for consumer in output.consumers())
    return None


def rank_strict_inputs(
    graph: tf.Graph, signatures: Mapping[str, Mapping[str, str]]
) -> dict[str, dict[str, str]]:
    """Signature -> alias -> the rank-strict op type the input reaches, for the inputs
    (``signatures``: signature -> alias -> tensor name) that reach one."""
    function_ops = _function_ops(graph.as_graph_def().library.function)
    strict: dict[str, dict[str, str]] = {}
    for key, inputs in signatures.items():
        for alias, tensor_name in inputs.items():
            op_type = _strict_op_reached(graph, tensor_name, function_ops)
            if op_type is not None:
                strict.setdefault(key, {})[alias] = op_type
    return strict
