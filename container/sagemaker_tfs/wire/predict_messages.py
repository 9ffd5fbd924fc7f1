"""Serialized PredictRequest and PredictResponse, written and read without protobuf copies.

Tensors are nearly all of a Predict message: 31 MB for ten 512x512 float images, 55 MB for a
detector's outputs. Going through protobuf messages copies each tensor three or four times
(into the message, out of it, into the serialized bytes), and each copy of tens of MB into
fresh memory costs tens of milliseconds. Predict messages have a simple shape:

    PredictRequest:  1 model_spec, 2 inputs (map<string, TensorProto>), 3 output_filter
    PredictResponse: 1 outputs (map<string, TensorProto>), 2 model_spec
    map entry:       1 key, 2 value

so this module writes them as one ``bytes`` joined from small headers and the NumPy buffers
themselves (one copy), and reads them as NumPy views of the received bytes (no copy). The
bytes are ordinary protobuf: any client or server parses them, and a field this reader does
not expect makes it fall back to protobuf's parser.

Requests carry numeric tensors as ``tensor_content``; responses use the typed ``*_val``
fields as TF Serving does (``float_val`` and ``double_val`` are packed little-endian values,
laid out exactly like ``tensor_content``, so they are viewed in place too).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
from google.protobuf.message import DecodeError, Message

from sagemaker_tfs.wire import protos, tensors
from sagemaker_tfs.wire.tensors import TensorConversionError

__all__ = [
    "DecodeError",
    "decode_predict_request",
    "decode_predict_response",
    "encode_predict_request",
    "encode_predict_response",
]

_Chunk = bytes | memoryview  # pieces joined into one message

_VARINT, _LEN = 0, 2  # protobuf wire types
# Field numbers (tensorflow_serving/apis/predict.proto and tensorflow/core/framework/tensor.proto)
_REQUEST_SPEC, _REQUEST_INPUTS, _REQUEST_FILTER = 1, 2, 3
_RESPONSE_OUTPUTS, _RESPONSE_SPEC = 1, 2
_ENTRY_KEY, _ENTRY_VALUE = 1, 2
_TENSOR_DTYPE, _TENSOR_SHAPE, _TENSOR_VERSION, _TENSOR_CONTENT = 1, 2, 3, 4
# packed float_val (5) / double_val (6) hold the raw little-endian values, like tensor_content
_RAW_VAL_FIELDS = {5: np.dtype(np.float32), 6: np.dtype(np.float64)}


# ---------------------------------------------------------------- writing


def _length_delimited(number: int, chunks: list[_Chunk]) -> list[_Chunk]:
    """Field ``number`` (wire type LEN) whose value is the concatenation of ``chunks``."""
    size = sum(len(chunk) for chunk in chunks)
    return [tensors.varint((number << 3) | _LEN), tensors.varint(size), *chunks]


def _request_tensor(value: object) -> list[_Chunk]:
    """A TensorProto with ``tensor_content`` (DT_STRING: ``string_val``) for a request."""
    array = np.asarray(value)
    dtype = tensors.tf_dtype(array.dtype)
    if dtype == tensors.DT_STRING:
        return [tensors.to_tensor_proto(array).SerializeToString()]
    header = tensors.tensor_header(array, dtype).SerializeToString()
    return [header, *_length_delimited(_TENSOR_CONTENT, [tensors.raw_bytes(array)])]


def _tensor_map(number: int, tensors_by_name: Mapping[str, list[_Chunk]]) -> list[_Chunk]:
    chunks: list[_Chunk] = []
    for name, tensor in tensors_by_name.items():
        key = _length_delimited(_ENTRY_KEY, [name.encode("utf-8")])
        chunks += _length_delimited(number, [*key, *_length_delimited(_ENTRY_VALUE, tensor)])
    return chunks


def encode_predict_request(
    model_spec: Message, inputs: Mapping[str, object], output_filter: Iterable[str] = ()
) -> bytes:
    """A serialized PredictRequest; each input array is copied once, into the result."""
    chunks = _length_delimited(_REQUEST_SPEC, [model_spec.SerializeToString()])
    chunks += _tensor_map(
        _REQUEST_INPUTS, {name: _request_tensor(value) for name, value in inputs.items()}
    )
    for name in output_filter:
        chunks += _length_delimited(_REQUEST_FILTER, [name.encode("utf-8")])
    return b"".join(chunks)


def encode_predict_response(
    model_spec: Message, outputs: Mapping[str, object], as_tensor_content: bool = False
) -> bytes:
    """A serialized PredictResponse as TF Serving writes it: typed ``*_val`` fields, or
    ``tensor_content`` (``--enable_serialization_as_tensor_content``)."""
    return b"".join(predict_response_chunks(model_spec, outputs, as_tensor_content))


def predict_response_chunks(
    model_spec: Message, outputs: Mapping[str, object], as_tensor_content: bool = False
) -> list[_Chunk]:
    """``encode_predict_response`` before the join: headers and views of the output buffers."""
    encode = _request_tensor if as_tensor_content else tensors.tensor_chunks
    chunks = _tensor_map(
        _RESPONSE_OUTPUTS, {name: encode(value) for name, value in outputs.items()}
    )
    chunks += _length_delimited(_RESPONSE_SPEC, [model_spec.SerializeToString()])
    return chunks


# ---------------------------------------------------------------- reading


class _Unexpected(ValueError):
    """The bytes are not laid out as expected: use protobuf's parser instead."""


def _read_varint(data: memoryview, position: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, position
        shift += 7
        if shift > 63:
            raise _Unexpected("varint too long")


def _fields(data: memoryview, start: int, end: int) -> list[tuple[int, int, int, int]]:
    """(field number, wire type, value or offset, length) of each field in ``data[start:end]``.

    Only varint and length-delimited fields occur in the messages read here.
    """
    fields = []
    position = start
    while position < end:
        key, position = _read_varint(data, position)
        number, wire_type = key >> 3, key & 7
        if wire_type == _VARINT:
            value, position = _read_varint(data, position)
            fields.append((number, wire_type, value, 0))
        elif wire_type == _LEN:
            length, position = _read_varint(data, position)
            fields.append((number, wire_type, position, length))
            position += length
        else:
            raise _Unexpected(f"wire type {wire_type}")
    if position != end:
        raise _Unexpected("truncated message")
    return fields


def _tensor(data: bytes, view: memoryview, start: int, end: int) -> np.ndarray:
    """The TensorProto at ``data[start:end]``; raw numeric values are viewed in place."""
    dtype, shape, raw = tensors.DT_INVALID, (), None
    for number, wire_type, value, length in _fields(view, start, end):
        if number == _TENSOR_DTYPE and wire_type == _VARINT:
            dtype = value
        elif number == _TENSOR_SHAPE and wire_type == _LEN:
            dims = protos.TensorShapeProto.FromString(view[value : value + length]).dim
            shape = tuple(dim.size for dim in dims)
        elif number == _TENSOR_CONTENT and wire_type == _LEN:
            raw = (value, length, None)
        elif number in _RAW_VAL_FIELDS and wire_type == _LEN and raw is None:
            raw = (value, length, _RAW_VAL_FIELDS[number])
        elif number != _TENSOR_VERSION:  # other *_val fields: protobuf and tensors decode them
            return tensors.to_ndarray(protos.TensorProto.FromString(view[start:end]))
    numpy_type = _numeric_type(dtype)
    if numpy_type is None or raw is None or (raw[2] is not None and raw[2] != numpy_type):
        return tensors.to_ndarray(protos.TensorProto.FromString(view[start:end]))
    if any(size < 0 for size in shape):
        raise TensorConversionError(f"Invalid tensor shape: {list(shape)}")
    offset, length, _ = raw
    count = int(np.prod(shape, dtype=np.int64))
    if length != count * numpy_type.itemsize:
        if raw[2] is not None:  # a float_val shorter than the shape: TensorFlow's fill rule
            return tensors.to_ndarray(protos.TensorProto.FromString(view[start:end]))
        raise TensorConversionError(
            f"tensor_content has {length} bytes, shape {list(shape)} of "
            f"{tensors.dtype_name(dtype)} needs {count * numpy_type.itemsize}"
        )
    array = np.frombuffer(data, dtype=numpy_type.newbyteorder("<"), count=count, offset=offset)
    return array.reshape(shape)


def _numeric_type(dtype: int) -> np.dtype | None:
    if dtype == tensors.DT_STRING:
        return None
    try:
        return tensors.numpy_dtype(dtype)
    except TensorConversionError:
        return None


def _map_entry(data: bytes, view: memoryview, start: int, end: int) -> tuple[str, np.ndarray]:
    key, value = "", None
    for number, wire_type, offset, length in _fields(view, start, end):
        if number == _ENTRY_KEY and wire_type == _LEN:
            key = bytes(view[offset : offset + length]).decode("utf-8")
        elif number == _ENTRY_VALUE and wire_type == _LEN:
            value = (offset, offset + length)
        else:
            raise _Unexpected(f"map entry field {number}")
    if value is None:
        return key, tensors.to_ndarray(protos.TensorProto())
    return key, _tensor(data, view, *value)


def decode_predict_request(data: bytes) -> tuple[Message, dict[str, np.ndarray], list[str]]:
    """(model_spec, inputs, output_filter) of a serialized PredictRequest.

    Numeric inputs are read-only views of ``data``. Raises DecodeError if ``data`` is not a
    PredictRequest and TensorConversionError for a tensor that contradicts its shape.
    """
    try:
        view = memoryview(data)
        spec, inputs, output_filter = protos.ModelSpec(), {}, []
        for number, wire_type, offset, length in _fields(view, 0, len(view)):
            if wire_type != _LEN:
                raise _Unexpected(f"request field {number}")
            if number == _REQUEST_SPEC:
                spec.MergeFromString(view[offset : offset + length])
            elif number == _REQUEST_INPUTS:
                name, array = _map_entry(data, view, offset, offset + length)
                inputs[name] = array
            elif number == _REQUEST_FILTER:
                output_filter.append(bytes(view[offset : offset + length]).decode("utf-8"))
            else:
                raise _Unexpected(f"request field {number}")
        return spec, inputs, output_filter
    except (_Unexpected, IndexError, UnicodeDecodeError):
        request = protos.PredictRequest.FromString(data)
        inputs = {name: tensors.to_ndarray(proto) for name, proto in request.inputs.items()}
        return request.model_spec, inputs, list(request.output_filter)


def decode_predict_response(data: bytes) -> dict[str, np.ndarray]:
    """The outputs of a serialized PredictResponse; numeric tensors are views of ``data``."""
    try:
        view = memoryview(data)
        outputs = {}
        for number, wire_type, offset, length in _fields(view, 0, len(view)):
            if number == _RESPONSE_OUTPUTS and wire_type == _LEN:
                name, array = _map_entry(data, view, offset, offset + length)
                outputs[name] = array
        return outputs
    except (_Unexpected, IndexError, UnicodeDecodeError):
        response = protos.PredictResponse.FromString(data)
        return {name: tensors.to_ndarray(proto) for name, proto in response.outputs.items()}
