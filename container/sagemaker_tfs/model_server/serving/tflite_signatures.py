"""A TFLite model's SignatureDefs, found as TF Serving's TFLite session finds them.

TF Serving (``tflite_session.cc``) does not read the interpreter's own signature runners.
It reads ``tensorflow.SignatureDef``s from the model's metadata entry
``signature_defs_metadata``: a FlexBuffer map from signature key to the serialized
SignatureDef (``tflite::GetSignatureDefMap``). Each signature input must name one of the
interpreter's input tensors and each output one of its outputs; a name with a ``:0`` suffix
also matches the tensor named without it (TFLite's legacy names), and is served by that name.
A model without such an entry (as every model today's converter writes) gets one generated
signature, ``serving_default``, whose inputs and outputs are the interpreter's input and
output tensors keyed by their TFLite names.

FlexBuffer values are read as TF Serving's C++ reads them: a root that is not a map holds no
signatures, a value that is not a string reads as empty bytes (an empty SignatureDef). A
buffer that cannot be read at all fails the load as an unparsable signature does.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import tensorflow as tf
from flatbuffers import flexbuffers
from google.protobuf.message import DecodeError
from tensorflow.core.protobuf import meta_graph_pb2
from tensorflow.lite.python import schema_py_generated as schema

from sagemaker_tfs.model_server.errors import Code, ServingError
from sagemaker_tfs.model_server.serving.classify_regress import PREDICT_METHOD
from sagemaker_tfs.model_server.serving.signatures import DEFAULT_SIGNATURE

logger = logging.getLogger(__name__)

SIGNATURE_DEFS_METADATA = "signature_defs_metadata"
LEGACY_SUFFIX = ":0"
UNPARSABLE = "Cannot parse signature def found in flatbuffer."
GENERATING = "No signature def found in TFLite model. Generating one."

# TFLite tensor name -> (its TensorInfo, its interpreter index): the interpreter's inputs or
# its outputs.
TensorMap = dict[str, tuple[meta_graph_pb2.TensorInfo, int]]


def tensor_map(details: Iterable[dict[str, Any]], kind: str) -> TensorMap:
    """The interpreter's input (``kind`` "Input") or output ("Output") tensors by name, each
    with its TensorInfo: name, dtype and the shape the model records (-1 where free)."""
    tensors: TensorMap = {}
    for detail in details:
        name = detail["name"]
        if not name:
            raise ServingError(
                Code.INTERNAL, f"{kind} name missing for tensor index: {detail['index']}"
            )
        if name in tensors:
            raise ServingError(
                Code.ALREADY_EXISTS, f"{kind} tensor name: {name} has multiple indices"
            )
        info = meta_graph_pb2.TensorInfo(
            name=name, dtype=tf.dtypes.as_dtype(detail["dtype"]).as_datatype_enum
        )
        shape = detail.get("shape_signature")
        if shape is None or len(shape) != len(detail["shape"]):
            shape = detail["shape"]
        for size in shape:
            info.tensor_shape.dim.add(size=int(size))
        tensors[name] = (info, int(detail["index"]))
    return tensors


def serving_signatures(
    model: bytes, inputs: TensorMap, outputs: TensorMap
) -> dict[str, meta_graph_pb2.SignatureDef]:
    """The signatures the model serves: those of its metadata, their tensor names checked
    (and legacy names fixed), else the generated ``serving_default``."""
    stored = read_signature_defs(model)
    if not stored:
        logger.warning("%s", GENERATING)
        return {DEFAULT_SIGNATURE: generated_signature(inputs, outputs)}
    for signature in stored.values():
        _fix_tensor_names(signature.inputs, inputs, "input")
        _fix_tensor_names(signature.outputs, outputs, "output")
    return stored


def generated_signature(inputs: TensorMap, outputs: TensorMap) -> meta_graph_pb2.SignatureDef:
    """``serving_default`` as TF Serving builds it for a model without SignatureDefs."""
    signature = meta_graph_pb2.SignatureDef(method_name=PREDICT_METHOD)
    for name, (info, _) in inputs.items():
        signature.inputs[name].CopyFrom(info)
    for name, (info, _) in outputs.items():
        signature.outputs[name].CopyFrom(info)
    return signature


def _fix_tensor_names(
    infos: Any, tensors: TensorMap, kind: str  # a proto map: alias -> TensorInfo
) -> None:
    for alias in sorted(infos):
        info = infos[alias]
        if info.name in tensors:
            continue
        legacy = info.name.removesuffix(LEGACY_SUFFIX)
        if legacy != info.name and legacy in tensors:
            info.name = legacy
            continue
        raise ServingError(Code.INTERNAL, f"Signature {kind} {alias} references an unknown tensor")


def read_signature_defs(model: bytes) -> dict[str, meta_graph_pb2.SignatureDef]:
    """The SignatureDefs of every ``signature_defs_metadata`` entry (a later entry's key
    replaces an earlier one's, as in TF Serving); empty when there is none."""
    signatures: dict[str, meta_graph_pb2.SignatureDef] = {}
    for buffer in _signature_buffers(model):
        for key, serialized in _flexbuffer_strings(buffer):
            signature = meta_graph_pb2.SignatureDef()
            try:
                signature.ParseFromString(serialized)
            except DecodeError:
                raise _invalid_signature_defs() from None
            signatures[key] = signature
    return signatures


def _signature_buffers(model: bytes) -> Iterator[bytes]:
    """The data of the model's buffers that its ``signature_defs_metadata`` entries name."""
    root = schema.Model.GetRootAs(model, 0)
    for position in range(root.MetadataLength()):
        metadata = root.Metadata(position)
        if metadata.Name() != SIGNATURE_DEFS_METADATA.encode():
            continue
        index = metadata.Buffer()
        if index >= root.BuffersLength():
            raise _invalid_signature_defs()
        data = root.Buffers(index).DataAsNumpy()
        yield data.tobytes() if isinstance(data, np.ndarray) else b""


def _flexbuffer_strings(buffer: bytes) -> list[tuple[str, bytes]]:
    """(key, value bytes) of a FlexBuffer map, read as TF Serving's C++ reads them."""
    try:
        root = flexbuffers.GetRoot(buffer)
        if not root.IsMap:
            return []
        entries = root.AsMap
        return [
            (key.AsKey, _string_bytes(value))
            for key, value in zip(entries.Keys, entries.Values, strict=True)
        ]
    except (ValueError, IndexError, KeyError, TypeError, UnicodeDecodeError, struct.error):
        raise _invalid_signature_defs() from None


def _string_bytes(value: flexbuffers.Ref) -> bytes:
    """A string's (or key's) bytes; any other value reads as empty, as in C++."""
    if value.IsString or value.IsKey:
        return bytes(value.AsStringBytes)
    return b""


def _invalid_signature_defs() -> ServingError:
    return ServingError(
        Code.INVALID_ARGUMENT, f"Invalid SignatureDefs found in TfLite model: {UNPARSABLE}"
    )
