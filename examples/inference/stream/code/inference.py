"""A bidirectional stream handler (model: half_plus_three), served at
/invocations-bidirectional-stream as a WebSocket.

stream_handler(messages, context) gets the client's messages as they arrive (str for a text
message, bytes for a binary one) and yields its answers, each sent as it is yielded: a str as
text, bytes as binary. It runs once per connection, in a thread of its own; the connection
closes with 1000 when it returns, 1011 when it raises.

Text:    {"instances": [1.0, 2.0]}          ->  {"predictions": [3.5, 4.0]}
Binary:  float32 values (little-endian)     ->  their predictions, float32
Text:    {"instances": [...], "id": "a7"}   ->  the same, with "id": "a7" (a client's tag)
"""

import json

import numpy as np
from sagemaker_tfs import client


def predict(context, values):
    """y for x through the model server's gRPC Predict (context.channel, already open)."""
    return client.predict(context, {"x": values.astype(np.float32)})["y"]


def stream_handler(messages, context):
    for message in messages:
        if isinstance(message, bytes):
            yield predict(context, np.frombuffer(message, dtype="<f4")).astype("<f4").tobytes()
            continue
        request = json.loads(message)
        answer = {"predictions": predict(context, np.asarray(request["instances"])).tolist()}
        if "id" in request:
            answer["id"] = request["id"]
        yield json.dumps(answer)
