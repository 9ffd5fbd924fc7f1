"""handler answering which version it reached: over REST (context.rest_uri) and over gRPC
(sagemaker_tfs.client, which takes the version from context.model_version)."""

import json

import numpy as np
import requests
from sagemaker_tfs.client import predict


def handler(data, context):
    values = json.loads(data.read())
    rest = requests.post(context.rest_uri, json={"instances": values}, timeout=30)
    rest.raise_for_status()
    grpc_outputs = predict(context, {"x": np.asarray(values, dtype=np.float32)})
    body = {
        "model_version": context.model_version,
        "rest_uri": context.rest_uri,
        "rest": rest.json()["predictions"],
        "grpc": grpc_outputs["y"].tolist(),
    }
    return json.dumps(body), "application/json"
