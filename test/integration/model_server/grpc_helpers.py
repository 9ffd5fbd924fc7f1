"""gRPC client helpers shared by the model server integration tests."""

from __future__ import annotations

import grpc
import numpy as np
from tensorflow.core.framework import tensor_pb2, types_pb2
from tensorflow_serving.apis import (
    model_service_pb2_grpc,
    predict_pb2,
    prediction_service_pb2_grpc,
)


def channel(target: str) -> grpc.Channel:
    return grpc.insecure_channel(
        target,
        options=[
            ("grpc.max_send_message_length", -1),
            ("grpc.max_receive_message_length", -1),
        ],
    )


def prediction_stub(target: str) -> prediction_service_pb2_grpc.PredictionServiceStub:
    return prediction_service_pb2_grpc.PredictionServiceStub(channel(target))


def model_stub(target: str) -> model_service_pb2_grpc.ModelServiceStub:
    return model_service_pb2_grpc.ModelServiceStub(channel(target))


def float_tensor(values: list | np.ndarray) -> tensor_pb2.TensorProto:
    """A DT_FLOAT TensorProto built by hand (float_val), independent of the server's codec."""
    array = np.asarray(values, dtype=np.float32)
    proto = tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT)
    for size in array.shape:
        proto.tensor_shape.dim.add().size = size
    proto.float_val.extend(array.reshape(-1).tolist())
    return proto


def predict_request(
    model: str,
    inputs: dict[str, tensor_pb2.TensorProto],
    signature: str = "",
    version: int | None = None,
    label: str | None = None,
) -> predict_pb2.PredictRequest:
    request = predict_pb2.PredictRequest()
    request.model_spec.name = model
    if signature:
        request.model_spec.signature_name = signature
    if version is not None:
        request.model_spec.version.value = version
    if label is not None:
        request.model_spec.version_label = label
    for alias, proto in inputs.items():
        request.inputs[alias].CopyFrom(proto)
    return request


def output_array(proto: tensor_pb2.TensorProto) -> np.ndarray:
    """Decode an output with TensorFlow's own decoder (independent of the server's)."""
    import tensorflow as tf

    return tf.make_ndarray(proto)
