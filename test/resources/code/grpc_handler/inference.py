"""handler over gRPC: predict through context.channel and again through context.grpc_port."""

import json

import grpc
import numpy as np
from sagemaker_tfs.wire import protos


def _predict(channel, context, values):
    request = protos.PredictRequest()
    request.model_spec.name = context.model_name
    request.model_spec.signature_name = "serving_default"
    tensor = request.inputs["x"]
    tensor.dtype = protos.DataType.values_by_name["DT_FLOAT"].number
    tensor.tensor_shape.dim.add(size=len(values))
    tensor.float_val.extend(values)
    stub = protos.PredictionServiceStub(channel)
    response = stub.Predict(request, timeout=30)
    output = response.outputs["y"]
    if output.tensor_content:
        return np.frombuffer(output.tensor_content, dtype=np.float32).tolist()
    return list(output.float_val)


def handler(data, context):
    values = [float(v) for v in json.loads(data.read())]
    through_context = _predict(context.channel, context, values)
    with grpc.insecure_channel(f"127.0.0.1:{context.grpc_port}") as channel:
        through_port = _predict(channel, context, values)
    body = {"channel": through_context, "port": through_port, "grpc_uri": context.grpc_uri}
    return json.dumps(body), "application/json"
