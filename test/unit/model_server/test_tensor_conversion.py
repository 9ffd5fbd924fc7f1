"""The model server's TensorProto <-> NumPy conversion (``sagemaker_tfs.wire.tensors`` used with
TensorFlow's message classes), checked against TensorFlow's own converters."""

from __future__ import annotations

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from sagemaker_tfs.model_server.errors import ServingError  # noqa: E402
from sagemaker_tfs.model_server.serving.warmup import tensor_to_array  # noqa: E402
from sagemaker_tfs.wire.tensors import tensor_chunks  # noqa: E402


def array_to_tensor(array: np.ndarray):
    """A Predict output as the model server writes it, parsed by TensorFlow's own class."""
    return tf.make_tensor_proto(0).FromString(b"".join(tensor_chunks(array)))


ARRAYS = [
    np.array([[-1, 300, -(2**31)]], dtype=np.int32),
    np.array([-(2**63), 2**63 - 1, 0], dtype=np.int64),
    np.array([2**64 - 1], dtype=np.uint64),
    np.array([1 + 2j], dtype=np.complex64),
    np.arange(12, dtype=np.float32).reshape(3, 4),
    np.array([1.5, -2.25], dtype=np.float64),
    np.array([[1, -2]], dtype=np.int32),
    np.array([2**40], dtype=np.int64),
    np.array([0, 255], dtype=np.uint8),
    np.array([True, False]),
    np.array([0.5, 1.0], dtype=np.float16),
    np.array([b"a", b"\xff\x00"], dtype=object),
    np.zeros((0, 3), dtype=np.float32),
]


@pytest.mark.parametrize("array", ARRAYS, ids=lambda a: f"{a.dtype}{a.shape}")
def test_round_trip_matches_tensorflow(array: np.ndarray) -> None:
    ours = array_to_tensor(array)
    theirs = tf.make_tensor_proto(array)
    assert ours.dtype == theirs.dtype
    assert ours.tensor_shape == theirs.tensor_shape
    np.testing.assert_array_equal(tf.make_ndarray(ours), array)
    np.testing.assert_array_equal(tensor_to_array(theirs), array)


@pytest.mark.parametrize("array", ARRAYS, ids=lambda a: f"{a.dtype}{a.shape}")
def test_outputs_use_typed_val_fields_like_tf_serving(array: np.ndarray) -> None:
    """TF Serving answers with *_val fields (AsProtoField); compare with a field-by-field
    encoding built through the protobuf API."""
    ours = array_to_tensor(array)
    assert not ours.tensor_content
    expected = tf.make_tensor_proto(array)
    expected.ClearField("tensor_content")
    field = {
        np.dtype(np.float32): "float_val",
        np.dtype(np.float64): "double_val",
        np.dtype(np.int32): "int_val",
        np.dtype(np.uint8): "int_val",
        np.dtype(np.int64): "int64_val",
        np.dtype(np.uint64): "uint64_val",
        np.dtype(np.bool_): "bool_val",
        np.dtype(np.float16): "half_val",
        np.dtype(np.complex64): "scomplex_val",
        np.dtype(object): "string_val",
    }[array.dtype]
    values = array.reshape(-1)
    if array.dtype == np.float16:
        values = values.view(np.uint16)
    if array.dtype == np.complex64:
        values = values.view(np.float32)
    expected.ClearField(field)
    getattr(expected, field).extend(values.tolist())
    assert ours == expected


def test_repeated_fields_and_broadcast_of_last_value() -> None:
    proto = tf.make_tensor_proto([7.0], dtype=tf.float32, shape=[2, 2])  # float_val: [7.0]
    assert not proto.tensor_content
    np.testing.assert_array_equal(tensor_to_array(proto), np.full((2, 2), 7.0))
    ints = tf.make_tensor_proto(np.array([1, 2, 3], dtype=np.int64))
    ints.ClearField("tensor_content")
    ints.int64_val.extend([1, 2, 3])
    np.testing.assert_array_equal(tensor_to_array(ints), [1, 2, 3])


def test_wrong_content_length_is_invalid_argument() -> None:
    proto = tf.make_tensor_proto(np.zeros(4, dtype=np.float32))
    proto.tensor_shape.dim[0].size = 5
    with pytest.raises(ServingError, match=r"tensor_content has 16 bytes, shape \[5\] .* 20"):
        tensor_to_array(proto)
