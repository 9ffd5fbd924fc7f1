"""sagemaker_tfs.wire.predict_messages: Predict messages written and read in place, checked against
protobuf (TensorFlow Serving's own generated classes) in both directions."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from google.protobuf.message import DecodeError
from sagemaker_tfs.wire import predict_messages, protos, tensors
from tensorflow_serving.apis import predict_pb2
from test_tensors import NUMERIC, sample


def packed_val_proto(array: np.ndarray) -> object:
    """float_val / double_val filled from the array, as TF Serving's AsProtoField does."""
    proto = tf.make_tensor_proto(array)
    proto.ClearField("tensor_content")
    getattr(proto, "float_val" if array.dtype == np.float32 else "double_val").extend(
        array.ravel().tolist()
    )
    return proto


def predict_response_bytes(outputs: dict[str, object]) -> bytes:
    response = predict_pb2.PredictResponse()
    response.model_spec.name = "m"
    response.model_spec.version.value = 7
    for name, proto in outputs.items():
        response.outputs[name].CopyFrom(proto)
    return response.SerializeToString()


def test_predict_response_is_decoded_without_copying_tensor_content() -> None:
    big = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    data = predict_response_bytes(
        {
            "content": tf.make_tensor_proto(big),
            "values": tf.make_tensor_proto([1.5, 2.5, 3.5], dtype=tf.float32),  # float_val
            "strings": tf.make_tensor_proto([b"a", b"bc"]),
            "scalar": tf.make_tensor_proto(np.int64(-5)),
            "half": tf.make_tensor_proto(np.ones((2, 2), np.float16)),
            "filled": tf.make_tensor_proto(2.0, shape=[2, 3], dtype=tf.float64),  # one value
            "packed_doubles": packed_val_proto(np.linspace(0, 1, 6).reshape(3, 2)),
            "packed_floats": packed_val_proto(np.linspace(0, 1, 8, dtype=np.float32)),
        }
    )
    decoded = predict_messages.decode_predict_response(data)
    reference = protos.PredictResponse.FromString(data)
    assert sorted(decoded) == sorted(reference.outputs)
    for name, proto in reference.outputs.items():
        expected = tensors.to_ndarray(proto)
        assert decoded[name].dtype == expected.dtype, name
        np.testing.assert_array_equal(decoded[name], expected)
    for view in ("content", "packed_doubles", "packed_floats"):
        assert np.shares_memory(decoded[view], np.frombuffer(data, np.uint8)), view


def test_predict_response_with_unexpected_layout_uses_protobuf() -> None:
    data = predict_response_bytes({"x": tf.make_tensor_proto(np.ones(3, np.float32))})
    with pytest.raises((DecodeError, tensors.TensorConversionError)):
        predict_messages.decode_predict_response(data[:-3])


def spec(name: str = "m", version: int | None = 3, signature: str = "sig") -> object:
    model_spec = protos.ModelSpec(name=name, signature_name=signature)
    if version is not None:
        model_spec.version.value = version
    return model_spec


@pytest.mark.parametrize("dtype", NUMERIC, ids=lambda d: np.dtype(d).name)
def test_request_parses_with_tensorflow_serving_classes(dtype: type) -> None:
    array = sample(dtype)
    data = predict_messages.encode_predict_request(spec(), {"x": array, "n": [1, 2]}, ["out"])
    request = predict_pb2.PredictRequest.FromString(data)
    assert (request.model_spec.name, request.model_spec.version.value) == ("m", 3)
    assert request.model_spec.signature_name == "sig"
    assert list(request.output_filter) == ["out"]
    decoded = tf.make_ndarray(request.inputs["x"])
    assert decoded.dtype == array.dtype
    np.testing.assert_array_equal(decoded, array)
    np.testing.assert_array_equal(tf.make_ndarray(request.inputs["n"]), [1, 2])


def test_request_round_trip_reads_inputs_in_place() -> None:
    image = np.arange(2 * 4 * 4 * 3, dtype=np.float32).reshape(2, 4, 4, 3)
    strings = np.array([b"jpeg", b"\xff\x00"], dtype=object)
    big_endian = np.arange(5, dtype=">i4")
    data = predict_messages.encode_predict_request(
        spec(version=None), {"image": image, "bytes": strings, "be": big_endian}, ["a", "b"]
    )
    model_spec, inputs, output_filter = predict_messages.decode_predict_request(data)
    assert model_spec.name == "m" and model_spec.WhichOneof("version_choice") is None
    assert output_filter == ["a", "b"]
    np.testing.assert_array_equal(inputs["image"], image)
    assert inputs["image"].dtype == np.float32
    assert np.shares_memory(inputs["image"], np.frombuffer(data, np.uint8))
    assert list(inputs["bytes"]) == [b"jpeg", b"\xff\x00"]
    np.testing.assert_array_equal(inputs["be"], big_endian)


def test_request_written_by_protobuf_is_read_the_same() -> None:
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "m"
    request.model_spec.version_label = "stable"
    request.inputs["content"].CopyFrom(tf.make_tensor_proto(np.ones((2, 3), np.float32)))
    request.inputs["values"].CopyFrom(tf.make_tensor_proto([1, 2, 3], dtype=tf.int32))
    request.inputs["empty"].CopyFrom(tf.make_tensor_proto(np.zeros((0, 4), np.float64)))
    request.output_filter.append("y")
    model_spec, inputs, output_filter = predict_messages.decode_predict_request(
        request.SerializeToString()
    )
    assert model_spec.version_label == "stable" and output_filter == ["y"]
    np.testing.assert_array_equal(inputs["content"], np.ones((2, 3), np.float32))
    np.testing.assert_array_equal(inputs["values"], np.array([1, 2, 3], np.int32))
    assert inputs["empty"].shape == (0, 4)


def test_bad_requests_raise() -> None:
    data = predict_messages.encode_predict_request(spec(), {"x": np.ones(4, np.float32)})
    with pytest.raises(DecodeError):
        predict_messages.decode_predict_request(data[:-3])
    with pytest.raises(DecodeError):
        predict_messages.decode_predict_request(b"\xff\xff\xff")
    short = protos.TensorProto(dtype=1, tensor_content=b"\x00" * 7)
    short.tensor_shape.dim.add(size=2)
    request = protos.PredictRequest(model_spec=spec())
    request.inputs["x"].CopyFrom(short)
    with pytest.raises(tensors.TensorConversionError, match="7 bytes"):
        predict_messages.decode_predict_request(request.SerializeToString())
    negative = protos.TensorProto(dtype=1, tensor_content=b"")
    negative.tensor_shape.dim.add(size=-1)
    request.inputs["x"].CopyFrom(negative)
    with pytest.raises(tensors.TensorConversionError, match="Invalid tensor shape"):
        predict_messages.decode_predict_request(request.SerializeToString())


@pytest.mark.parametrize("dtype", NUMERIC + [np.bytes_], ids=lambda d: np.dtype(d).name)
def test_response_is_the_message_tensorflow_serving_writes(dtype: type) -> None:
    """The same fields as a PredictResponse built from tensor_chunks (TF Serving's layout)."""
    array = sample(dtype) if dtype is not np.bytes_ else np.array([[b"a", b"bc"]])
    data = predict_messages.encode_predict_response(spec(), {"y": array, "s": np.float64(2.5)})
    response = predict_pb2.PredictResponse.FromString(data)
    expected = predict_pb2.PredictResponse()
    expected.model_spec.CopyFrom(predict_pb2.PredictResponse().model_spec.FromString(
        spec().SerializeToString()))  # fmt: skip
    expected.outputs["y"].MergeFromString(b"".join(tensors.tensor_chunks(array)))
    expected.outputs["s"].MergeFromString(b"".join(tensors.tensor_chunks(np.float64(2.5))))
    assert response == expected
    assert not response.outputs["y"].tensor_content
    decoded = predict_messages.decode_predict_response(data)
    np.testing.assert_array_equal(
        decoded["y"], array.astype(object) if dtype is np.bytes_ else array
    )
    assert decoded["s"].shape == () and decoded["s"] == 2.5


def test_response_floats_are_read_in_place() -> None:
    outputs = {"boxes": np.random.default_rng(1).random((3, 100, 4), dtype=np.float32)}
    data = predict_messages.encode_predict_response(spec(), outputs)
    assert len(predict_pb2.PredictResponse.FromString(data).outputs["boxes"].float_val) == 1200
    decoded = predict_messages.decode_predict_response(data)
    np.testing.assert_array_equal(decoded["boxes"], outputs["boxes"])
    assert np.shares_memory(decoded["boxes"], np.frombuffer(data, np.uint8))
    assert not decoded["boxes"].flags.writeable
