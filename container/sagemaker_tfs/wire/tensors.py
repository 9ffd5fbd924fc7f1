"""TensorProto <-> NumPy conversion without TensorFlow and without per-element Python loops.

One codec for the whole project: the Python service (with the messages of
``sagemaker_tfs.wire.protos``) and the model server (with ``tensorflow_serving.apis``'
messages) both use it. Reading only touches fields, so it works on either message class;
writing returns a message of ``sagemaker_tfs.wire.protos`` or its serialized bytes, which any
TensorProto class can parse.

Requests are written as ``tensor_content`` (raw little-endian bytes) and read with
``np.frombuffer``. TF Serving answers with the typed ``*_val`` fields (``float_val``...):
those are read with one ``np.asarray`` over the repeated field, and written
(``tensor_chunks``) as packed fields built from the NumPy buffer. DT_STRING has no raw form
and travels as ``string_val``, the one inherent per-element case. Whole Predict messages
are written and read in place, without TensorProto messages, by
:mod:`sagemaker_tfs.wire.predict_messages`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from google.protobuf.message import Message

from sagemaker_tfs.wire import protos


class TensorConversionError(ValueError):
    """A tensor cannot be converted (unsupported dtype, wrong size...)."""


@dataclass(frozen=True)
class _DtypeInfo:
    """How one TensorFlow dtype maps to NumPy and to TensorProto's typed value field."""

    enum: int
    numpy: np.dtype
    val_field: str
    val_is_bits: bool = False  # half_val holds the raw 16-bit patterns of half/bfloat16


def _dt(name: str) -> int:
    return protos.DataType.values_by_name[name].number


def _build_dtype_table() -> dict[int, _DtypeInfo]:
    entries = [
        ("DT_FLOAT", np.float32, "float_val", False),
        ("DT_DOUBLE", np.float64, "double_val", False),
        ("DT_HALF", np.float16, "half_val", True),
        ("DT_INT8", np.int8, "int_val", False),
        ("DT_INT16", np.int16, "int_val", False),
        ("DT_INT32", np.int32, "int_val", False),
        ("DT_INT64", np.int64, "int64_val", False),
        ("DT_UINT8", np.uint8, "int_val", False),
        ("DT_UINT16", np.uint16, "int_val", False),
        ("DT_UINT32", np.uint32, "uint32_val", False),
        ("DT_UINT64", np.uint64, "uint64_val", False),
        ("DT_BOOL", np.bool_, "bool_val", False),
        ("DT_COMPLEX64", np.complex64, "scomplex_val", False),
        ("DT_COMPLEX128", np.complex128, "dcomplex_val", False),
        ("DT_STRING", np.object_, "string_val", False),
    ]
    table = {}
    for name, numpy_type, field, bits in entries:
        enum = _dt(name)
        table[enum] = _DtypeInfo(enum, np.dtype(numpy_type), field, bits)
    return table


_BY_ENUM = _build_dtype_table()
_BY_NUMPY = {info.numpy: info for info in _BY_ENUM.values() if info.numpy != np.object_}
DT_STRING = _dt("DT_STRING")
DT_INVALID = _dt("DT_INVALID")
DT_BFLOAT16 = _dt("DT_BFLOAT16")


def _add_bfloat16() -> _DtypeInfo | None:
    """bfloat16's entry, made the first time a bfloat16 tensor or array is met: importing
    ml_dtypes (shipped with TensorFlow's wheels, without TensorFlow) took 0.5-1 s of every
    gunicorn worker's start, where no model of most users has such an input (issue 55's
    restart time). None without ml_dtypes: bfloat16 is then refused as unsupported."""
    try:
        from ml_dtypes import bfloat16
    except ImportError:  # pragma: no cover - ml_dtypes comes with tensorflow
        return None
    info = _DtypeInfo(DT_BFLOAT16, np.dtype(bfloat16), "half_val", True)
    _BY_ENUM[DT_BFLOAT16] = info
    _BY_NUMPY[info.numpy] = info
    return info


def dtype_info(enum: int) -> _DtypeInfo | None:
    """How TensorFlow dtype ``enum`` maps to NumPy and TensorProto (None: unsupported)."""
    info = _BY_ENUM.get(enum)
    if info is None and enum == DT_BFLOAT16:
        return _add_bfloat16()
    return info


def dtype_name(enum: int) -> str:
    """``DT_FLOAT`` for 1, or ``DT_<number>`` if unknown."""
    value = protos.DataType.values_by_number.get(enum)
    return value.name if value is not None else f"DT_{enum}"


def numpy_dtype(enum: int) -> np.dtype:
    """The NumPy dtype of a TensorFlow dtype (``object`` for DT_STRING)."""
    info = dtype_info(enum)
    if info is None:
        raise TensorConversionError(f"unsupported tensor dtype {dtype_name(enum)}")
    return info.numpy


def tf_dtype(dtype: np.dtype) -> int:
    """The TensorFlow dtype enum of a NumPy dtype; bytes/str/object arrays are DT_STRING."""
    dtype = np.dtype(dtype)
    if dtype.kind in "OSU":
        return DT_STRING
    info = _BY_NUMPY.get(dtype.newbyteorder("=") if dtype.byteorder == ">" else dtype)
    if info is None and dtype.name == "bfloat16":  # ml_dtypes is imported: the array has one
        info = _add_bfloat16()
    if info is None:
        raise TensorConversionError(f"unsupported array dtype {dtype}")
    return info.enum


def _string_values(array: np.ndarray) -> list[bytes]:
    """Flatten a bytes/str/object array to the ``string_val`` list."""
    flat = array.ravel()
    if array.dtype.kind == "S":
        return flat.tolist()
    values = flat.tolist()
    if array.dtype.kind == "U":
        return [value.encode("utf-8") for value in values]
    try:
        return [
            value.encode("utf-8") if isinstance(value, str) else bytes(value) for value in values
        ]
    except TypeError as error:
        raise TensorConversionError(f"DT_STRING elements must be bytes or str: {error}") from None


def tensor_header(array: np.ndarray, dtype: int) -> Message:
    """A TensorProto with the dtype and shape of ``array`` and no values yet."""
    header = protos.TensorProto(dtype=dtype)
    for size in array.shape:
        header.tensor_shape.dim.add(size=size)
    return header


def to_tensor_proto(array: np.ndarray | object, dtype: int | None = None) -> Message:
    """Make a TensorProto of ``array``; ``dtype`` (a DataType enum) casts it first if given."""
    array = np.asarray(array)
    enum = tf_dtype(array.dtype) if dtype is None else dtype
    proto = tensor_header(array, enum)
    if enum == DT_STRING:
        proto.string_val.extend(_string_values(array))
        return proto
    target = numpy_dtype(enum).newbyteorder("<")
    try:
        raw = np.ascontiguousarray(array, dtype=target)
    except (TypeError, ValueError) as error:
        raise TensorConversionError(
            f"cannot convert {array.dtype} array to {dtype_name(enum)}: {error}"
        ) from None
    proto.tensor_content = raw.tobytes()
    return proto


# ------------------------------------------ TF Serving's response layout: typed *_val fields

_MAX_VARINT_BYTES = 10
_VARINT, _LEN = 0, 2  # protobuf wire types


def varint(value: int) -> bytes:
    """One protobuf varint (for tags and lengths)."""
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _varints(values: np.ndarray) -> bytes:
    """Protobuf varints of a uint64 array, vectorised over elements (<= 10 byte passes)."""
    values = values.astype(np.uint64, copy=False)
    lengths = np.ones(values.size, dtype=np.int64)
    rest = values >> np.uint64(7)
    while rest.any():
        lengths += rest != 0
        rest >>= np.uint64(7)
    starts = np.cumsum(lengths) - lengths
    out = np.empty(int(lengths.sum()), dtype=np.uint8)
    rest = values.copy()
    for position in range(_MAX_VARINT_BYTES):
        active = lengths > position
        if not active.any():
            break
        low = (rest[active] & np.uint64(0x7F)).astype(np.uint8)
        continuation = (lengths[active] > position + 1).astype(np.uint8) << 7
        out[starts[active] + position] = low | continuation
        rest >>= np.uint64(7)
    return out.tobytes()


def raw_bytes(array: np.ndarray) -> memoryview:
    """The array's values as little-endian bytes in C order; a view when already laid out so."""
    little = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<"))
    return little.reshape(-1).view(np.uint8).data


def _packed_values(flat: np.ndarray, info: _DtypeInfo) -> bytes | memoryview:
    """The elements of ``flat`` as the payload of their packed ``*_val`` field."""
    if info.val_is_bits:  # half_val: the 16-bit patterns, as varints
        return _varints(flat.view(np.uint16))
    if info.numpy.kind == "c":  # scomplex_val/dcomplex_val: (real, imaginary) pairs
        flat = flat.view(flat.real.dtype)
    if flat.dtype.kind == "f":  # float_val/double_val: fixed width, the raw bytes (a view)
        return raw_bytes(flat)
    if flat.dtype.kind == "i":  # negative ints are 10-byte varints of their 64-bit form
        return _varints(flat.astype(np.int64).view(np.uint64))
    return _varints(flat.astype(np.uint64))


def tensor_chunks(array: np.ndarray) -> list[bytes | memoryview]:
    """A serialized TensorProto of ``array`` in the layout TF Serving answers with, in pieces
    to be joined; float and double values are a view of the array, not a copy.

    TF Serving fills the typed ``*_val`` fields (``Tensor::AsProtoField``), not
    ``tensor_content``, and clients read them (``response.outputs[k].float_val``). A packed
    repeated field is a tag, a length and the values, so it is built from the NumPy buffer
    instead of being appended element by element.
    """
    array = np.asarray(array)
    enum = tf_dtype(array.dtype)
    header = tensor_header(array, enum)
    if enum == DT_STRING:
        header.string_val.extend(_string_values(array))
        return [header.SerializeToString()]
    if array.size == 0:
        return [header.SerializeToString()]
    info = dtype_info(enum)
    assert info is not None  # tf_dtype knew it
    payload = _packed_values(np.ascontiguousarray(array).reshape(-1), info)
    number = protos.TensorProto.DESCRIPTOR.fields_by_name[info.val_field].number
    tag = varint((number << 3) | _LEN)
    return [header.SerializeToString(), tag, varint(len(payload)), payload]


def shape_of(proto: Message) -> tuple[int, ...]:
    """The shape of a TensorProto (``unknown_rank`` gives a scalar)."""
    return tuple(dim.size for dim in proto.tensor_shape.dim)


def _from_val_field(proto: Message, info: _DtypeInfo, count: int) -> np.ndarray:
    values = getattr(proto, info.val_field)
    if info.val_is_bits:
        flat = np.asarray(values, dtype=np.uint16).view(info.numpy)
    elif info.numpy.kind == "c":
        pairs = np.asarray(values, dtype=np.float32 if info.numpy.itemsize == 8 else np.float64)
        flat = pairs.view(info.numpy)
    else:
        flat = np.asarray(values, dtype=info.numpy)
    if flat.size == count:
        return flat
    if flat.size == 0:
        return np.zeros(count, dtype=info.numpy)
    if flat.size > count:
        raise TensorConversionError(
            f"tensor has {flat.size} values in {info.val_field} but its shape holds {count}"
        )
    # TensorFlow's rule: missing trailing values repeat the last one given.
    return np.concatenate([flat, np.full(count - flat.size, flat[-1], dtype=info.numpy)])


def to_ndarray(proto: Message) -> np.ndarray:
    """Make a NumPy array of a TensorProto (DT_STRING gives an object array of bytes)."""
    info = dtype_info(proto.dtype)
    if info is None:
        raise TensorConversionError(f"unsupported tensor dtype {dtype_name(proto.dtype)}")
    shape = shape_of(proto)
    if any(size < 0 for size in shape):
        raise TensorConversionError(f"Invalid tensor shape: {list(shape)}")
    count = int(np.prod(shape, dtype=np.int64))
    if info.enum == DT_STRING:
        flat = np.empty(len(proto.string_val), dtype=object)
        flat[:] = list(proto.string_val)
        if flat.size != count:
            flat = _pad_strings(flat, count)
        return flat.reshape(shape)
    if proto.tensor_content:
        content = proto.tensor_content
        expected = count * info.numpy.itemsize
        if len(content) != expected:
            raise TensorConversionError(
                f"tensor_content has {len(content)} bytes, shape {list(shape)} of "
                f"{dtype_name(info.enum)} needs {expected}"
            )
        return np.frombuffer(content, dtype=info.numpy.newbyteorder("<")).reshape(shape)
    return _from_val_field(proto, info, count).reshape(shape)


def _pad_strings(flat: np.ndarray, count: int) -> np.ndarray:
    if flat.size > count:
        raise TensorConversionError(f"tensor has {flat.size} strings but its shape holds {count}")
    padded = np.empty(count, dtype=object)
    padded[: flat.size] = flat
    padded[flat.size :] = flat[-1] if flat.size else b""
    return padded
