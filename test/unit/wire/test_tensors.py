"""sagemaker_tfs.wire.tensors against TensorFlow's own make_tensor_proto / make_ndarray."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import tensorflow as tf
from sagemaker_tfs.wire import protos, tensors

NUMERIC = [
    np.float16,
    np.float32,
    np.float64,
    np.int8,
    np.int16,
    np.int32,
    np.int64,
    np.uint8,
    np.uint16,
    np.uint32,
    np.uint64,
    np.bool_,
    np.complex64,
    np.complex128,
    ml_dtypes.bfloat16,
]


def sample(dtype: type, shape: tuple[int, ...] = (2, 3, 4)) -> np.ndarray:
    rng = np.random.default_rng(7)
    values = rng.integers(0, 100, size=shape)
    if np.dtype(dtype).kind == "b":
        return values % 2 == 0
    if np.dtype(dtype).kind == "c":
        return (values + 1j * values[::-1]).astype(dtype)
    return values.astype(dtype)


def as_ours(tf_proto: object) -> object:
    return protos.TensorProto.FromString(tf_proto.SerializeToString())


def as_tf(our_proto: object) -> object:
    return tf.make_tensor_proto(0).FromString(our_proto.SerializeToString())


@pytest.mark.parametrize("dtype", NUMERIC, ids=lambda d: np.dtype(d).name)
def test_our_proto_decodes_with_tensorflow(dtype: type) -> None:
    array = sample(dtype)
    proto = tensors.to_tensor_proto(array)
    assert proto.tensor_content  # raw buffer, not *_val
    decoded = tf.make_ndarray(as_tf(proto))
    assert decoded.dtype == array.dtype
    np.testing.assert_array_equal(decoded, array)


@pytest.mark.parametrize("dtype", NUMERIC, ids=lambda d: np.dtype(d).name)
def test_tensorflow_proto_decodes_with_ours(dtype: type) -> None:
    array = sample(dtype)
    decoded = tensors.to_ndarray(as_ours(tf.make_tensor_proto(array)))
    assert decoded.dtype == array.dtype
    np.testing.assert_array_equal(decoded, array)


@pytest.mark.parametrize(
    "dtype", [d for d in NUMERIC if d is not ml_dtypes.bfloat16], ids=lambda d: np.dtype(d).name
)
def test_typed_val_fields_decode(dtype: type) -> None:
    """TF Serving may answer with float_val, int_val, half_val... instead of tensor_content."""
    array = sample(dtype, (3, 2))
    tf_proto = tf.make_tensor_proto(array)
    reference = tf.make_ndarray(tf_proto)
    values_proto = as_ours(tf_proto)
    values_proto.ClearField("tensor_content")
    info = tensors.dtype_info(values_proto.dtype)
    assert info is not None
    values_proto.ClearField(info.val_field)
    field = getattr(values_proto, info.val_field)
    if info.val_is_bits:
        field.extend(array.view(np.uint16).ravel().tolist())
    elif np.dtype(dtype).kind == "c":
        field.extend(array.view(array.real.dtype).ravel().tolist())
    else:
        field.extend(array.ravel().tolist())
    np.testing.assert_array_equal(tensors.to_ndarray(values_proto), reference)


def test_single_val_is_broadcast_like_tensorflow() -> None:
    tf_proto = tf.make_tensor_proto(2.5, shape=[2, 2], dtype=tf.float32)
    assert list(tf_proto.float_val) == [2.5]
    np.testing.assert_array_equal(tensors.to_ndarray(as_ours(tf_proto)), tf.make_ndarray(tf_proto))


def test_strings_roundtrip_both_ways() -> None:
    array = np.array([[b"a", b"\xff\x00jpeg"], [b"", b"xyz"]], dtype=object)
    ours = tensors.to_tensor_proto(array)
    np.testing.assert_array_equal(tf.make_ndarray(as_tf(ours)), array)
    theirs = tf.make_tensor_proto(array)
    np.testing.assert_array_equal(tensors.to_ndarray(as_ours(theirs)), array)
    text = tensors.to_tensor_proto(np.array(["hé", "x"]))
    assert list(text.string_val) == ["hé".encode(), b"x"]


def test_explicit_dtype_casts() -> None:
    proto = tensors.to_tensor_proto(np.array([[1, 2]], dtype=np.int64), dtype=1)
    assert proto.dtype == 1
    np.testing.assert_array_equal(tf.make_ndarray(as_tf(proto)), np.array([[1.0, 2.0]], np.float32))


def test_big_endian_input_is_written_little_endian() -> None:
    array = np.arange(4, dtype=">i4")
    np.testing.assert_array_equal(tf.make_ndarray(as_tf(tensors.to_tensor_proto(array))), array)


def test_scalar_and_empty_tensors() -> None:
    for array in (np.float32(3.0), np.zeros((0, 3), np.float32)):
        decoded = tensors.to_ndarray(tensors.to_tensor_proto(array))
        assert decoded.shape == np.shape(array)


def test_bad_tensors_raise_clear_errors() -> None:
    bad = protos.TensorProto(dtype=1, tensor_content=b"\x00" * 7)
    bad.tensor_shape.dim.add(size=2)
    with pytest.raises(tensors.TensorConversionError, match="7 bytes"):
        tensors.to_ndarray(bad)
    with pytest.raises(tensors.TensorConversionError, match="unsupported"):
        tensors.to_ndarray(protos.TensorProto(dtype=20))  # DT_RESOURCE
    with pytest.raises(tensors.TensorConversionError, match="unsupported array dtype"):
        tensors.to_tensor_proto(np.array(["2020-01-01"], dtype="datetime64[D]"))
    with pytest.raises(tensors.TensorConversionError, match="DT_FLOAT"):
        tensors.to_tensor_proto(np.array([b"x"]), dtype=1)


def test_float_answers_refer_to_the_array_instead_of_copying_it() -> None:
    array = np.arange(12, dtype=np.float32).reshape(3, 4)
    *_, values = tensors.tensor_chunks(array)
    assert np.shares_memory(np.frombuffer(values, np.uint8), array)
    parsed = tf.make_ndarray(
        as_tf(protos.TensorProto.FromString(b"".join(tensors.tensor_chunks(array))))
    )
    np.testing.assert_array_equal(parsed, array)
