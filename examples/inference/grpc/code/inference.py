"""A handler that calls the model server's gRPC Predict itself (model: half_plus_three).

The stack's Python environment has grpcio, NumPy and TF Serving's messages
(sagemaker_tfs.wire.protos), so no TensorFlow is needed. context.grpc_port is the model
server's gRPC port; context.channel is a channel to it, already open, and
sagemaker_tfs.client.predict(context, {"x": array}) does all of the below in one line.

Request:  {"instances": [1.0, 2.0, 5.0]}
Answer:   {"predictions": [3.5, 4.0, 5.5]}
"""

import functools
import json

import grpc
import numpy as np
from sagemaker_tfs.wire import protos
from sagemaker_tfs.wire.tensors import to_ndarray, to_tensor_proto


@functools.cache
def _stub(port):
    """One channel per model server port, opened on first use and kept for every request."""
    return protos.PredictionServiceStub(grpc.insecure_channel(f"127.0.0.1:{port}"))


def handler(data, context):
    instances = np.asarray(json.load(data)["instances"], dtype=np.float32)
    request = protos.PredictRequest()
    request.model_spec.name = context.model_name
    request.model_spec.signature_name = "serving_default"
    if context.model_version is not None:  # tfs-model-version=N in the custom attributes
        request.model_spec.version.value = int(context.model_version)
    request.inputs["x"].CopyFrom(to_tensor_proto(instances))
    # a grpc.RpcError (bad input, model server down) reaches the client as a 500
    response = _stub(context.grpc_port).Predict(request, timeout=60)
    predictions = to_ndarray(response.outputs["y"])
    return json.dumps({"predictions": predictions.tolist()}), "application/json"
