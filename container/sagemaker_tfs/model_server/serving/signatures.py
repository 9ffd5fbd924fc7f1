"""A loaded SavedModel's signatures in typed form, and TF dtypes as TF Serving names them.

``ServableSignature`` is what the model server reads a SignatureDef into: its tensors are
``GraphTensor``s, which hold the graph's tensor names (``x:0``) that a session feeds and
fetches. Everyone else (the service, the client) sees a signature by aliases only, as
GetModelMetadata describes it: ``sagemaker_tfs.wire.signatures.Signature``.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping

import numpy as np
import tensorflow as tf
from tensorflow.core.framework import types_pb2
from tensorflow.core.protobuf import meta_graph_pb2
from tensorflow_serving.apis import get_model_metadata_pb2

from sagemaker_tfs.model_server.errors import invalid_argument
from sagemaker_tfs.wire.signatures import shape_of

DEFAULT_SIGNATURE = "serving_default"


def short_dtype_name(dtype: int) -> str:
    """TF's short dtype name as TF Serving prints it in messages: DT_FLOAT -> ``float``
    (``sagemaker_tfs.wire.tensors.dtype_name`` gives the enum name, ``DT_FLOAT``)."""
    return types_pb2.DataType.Name(dtype)[3:].lower()


def datatype_of(array: np.ndarray) -> int:
    """The TF dtype enum of a NumPy array (bytes/str/object arrays are DT_STRING)."""
    return _datatype_of_dtype(array.dtype)


@functools.lru_cache(maxsize=64)
def _datatype_of_dtype(dtype: np.dtype) -> int:
    """By dtype, computed once (``tf.dtypes.as_dtype`` takes microseconds each request)."""
    if dtype.kind in ("O", "S", "U"):
        return types_pb2.DT_STRING
    return tf.dtypes.as_dtype(dtype).as_datatype_enum


@dataclasses.dataclass(frozen=True)
class GraphTensor:
    """A signature input or output in the graph: its tensor's name there (``x:0``), TF dtype
    enum, shape (None = unknown rank)."""

    name: str
    dtype: int
    shape: tuple[int, ...] | None


@dataclasses.dataclass(frozen=True)
class ServableSignature:
    """A SignatureDef in typed form, aliases sorted as TF Serving iterates its maps."""

    name: str
    method_name: str
    inputs: dict[str, GraphTensor]
    outputs: dict[str, GraphTensor]


def _graph_tensor(info: meta_graph_pb2.TensorInfo) -> GraphTensor:
    """The shape read by the rule the service reads it by (``wire.signatures.shape_of``)."""
    return GraphTensor(info.name, info.dtype, shape_of(info))


def typed_signature(name: str, proto: meta_graph_pb2.SignatureDef) -> ServableSignature:
    """The SignatureDef ``proto``, stored under ``name`` in the MetaGraphDef, in typed form."""
    return ServableSignature(
        name=name,
        method_name=proto.method_name,
        inputs={alias: _graph_tensor(proto.inputs[alias]) for alias in sorted(proto.inputs)},
        outputs={alias: _graph_tensor(proto.outputs[alias]) for alias in sorted(proto.outputs)},
    )


class SignatureTable:
    """A version's signatures: typed for running, as SignatureDefs for GetModelMetadata."""

    def __init__(self, signature_defs: Mapping[str, meta_graph_pb2.SignatureDef]) -> None:
        self._signature_defs = dict(signature_defs)
        self._signatures = {
            key: typed_signature(key, proto) for key, proto in self._signature_defs.items()
        }

    def signature(self, name: str) -> ServableSignature:
        """The signature called ``name`` ("" means serving_default), or TF Serving's error."""
        key = name or DEFAULT_SIGNATURE
        signature = self._signatures.get(key)
        if signature is None:
            raise invalid_argument(f'Serving signature name: "{key}" not found in signature def')
        return signature

    def signature_def_map(self) -> get_model_metadata_pb2.SignatureDefMap:
        result = get_model_metadata_pb2.SignatureDefMap()
        for key, proto in self._signature_defs.items():
            result.signature_def[key].CopyFrom(proto)
        return result


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
