"""A loaded SavedModel's signatures in typed form, and TF dtypes as TF Serving names them.

``ServableSignature`` is what the model server reads a SignatureDef into (the service's view of
a signature, built from metadata, is ``sagemaker_tfs.client.Signature``).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import tensorflow as tf
from tensorflow.core.framework import types_pb2
from tensorflow.core.protobuf import meta_graph_pb2

from sagemaker_tfs.model_server.errors import invalid_argument

DEFAULT_SIGNATURE = "serving_default"


def short_dtype_name(dtype: int) -> str:
    """TF's short dtype name as TF Serving prints it in messages: DT_FLOAT -> ``float``
    (``sagemaker_tfs.wire.tensors.dtype_name`` gives the enum name, ``DT_FLOAT``)."""
    return types_pb2.DataType.Name(dtype)[3:].lower()


def datatype_of(array: np.ndarray) -> int:
    """The TF dtype enum of a NumPy array (bytes/str/object arrays are DT_STRING)."""
    if array.dtype.kind in ("O", "S", "U"):
        return types_pb2.DT_STRING
    return tf.dtypes.as_dtype(array.dtype).as_datatype_enum


@dataclasses.dataclass(frozen=True)
class TensorSpec:
    """A signature input or output: graph tensor name, TF dtype enum, shape (None = unknown)."""

    name: str
    dtype: int
    shape: tuple[int, ...] | None


@dataclasses.dataclass(frozen=True)
class ServableSignature:
    """A SignatureDef in typed form, aliases sorted as TF Serving iterates its maps."""

    name: str
    method_name: str
    inputs: dict[str, TensorSpec]
    outputs: dict[str, TensorSpec]


def _tensor_spec(info: meta_graph_pb2.TensorInfo) -> TensorSpec:
    shape_proto = info.tensor_shape
    known = info.HasField("tensor_shape") and not shape_proto.unknown_rank
    shape = tuple(dim.size for dim in shape_proto.dim) if known else None
    return TensorSpec(info.name, info.dtype, shape)


def typed_signature(name: str, proto: meta_graph_pb2.SignatureDef) -> ServableSignature:
    """The SignatureDef ``proto``, stored under ``name`` in the MetaGraphDef, in typed form."""
    return ServableSignature(
        name=name,
        method_name=proto.method_name,
        inputs={alias: _tensor_spec(proto.inputs[alias]) for alias in sorted(proto.inputs)},
        outputs={alias: _tensor_spec(proto.outputs[alias]) for alias in sorted(proto.outputs)},
    )


def find_signature(signatures: dict[str, ServableSignature], name: str) -> ServableSignature:
    """The signature called ``name`` ("" means serving_default), or TF Serving's error."""
    key = name or DEFAULT_SIGNATURE
    signature = signatures.get(key)
    if signature is None:
        raise invalid_argument(f'Serving signature name: "{key}" not found in signature def')
    return signature


def signature_def_of(signature: ServableSignature) -> meta_graph_pb2.SignatureDef:
    """The SignatureDef proto of a typed signature (its tensor names, dtypes and shapes)."""
    proto = meta_graph_pb2.SignatureDef(method_name=signature.method_name)
    for target, specs in ((proto.inputs, signature.inputs), (proto.outputs, signature.outputs)):
        for alias, spec in specs.items():
            info = target[alias]
            info.name = spec.name
            info.dtype = spec.dtype
            if spec.shape is None:
                info.tensor_shape.unknown_rank = True
            else:
                for size in spec.shape:
                    info.tensor_shape.dim.add(size=size)
    return proto
