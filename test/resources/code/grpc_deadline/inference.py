"""handler calling the ``sleeper`` model with ``sagemaker_tfs.client.predict`` and no timeout of
its own: it answers how the call ended and after how long (the deadline tests)."""

import json
import time

import grpc
import numpy as np
from sagemaker_tfs.client import predict


def handler(data, context):
    seconds = float(data.read() or 0)
    started = time.monotonic()
    try:
        outputs = predict(context, {"seconds": np.array([seconds], np.float32)})
        ended = {"slept": outputs["seconds"].tolist()}
    except grpc.RpcError as error:
        ended = {"code": error.code().name}
    ended["after"] = round(time.monotonic() - started, 2)
    return json.dumps(ended), "application/json"
