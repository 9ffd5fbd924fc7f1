"""A bidirectional stream handler (model: half_plus_three), served at
/invocations-bidirectional-stream as a WebSocket.

stream_handler(messages, context) gets the client's messages as they arrive (str for a text
message, bytes for a binary one) and yields its answers, each sent as it is yielded: a str as
text, bytes as binary. It runs once per connection, in a thread of its own; the connection
closes with 1000 when it returns, 1011 when it raises.

Text:    {"instances": [1.0, 2.0]}          ->  {"predictions": [3.5, 4.0]}
Text:    {"instances": [...], "id": "a7"}   ->  the same, with "id": "a7" (a client's tag)
Binary:  float32 values (little-endian)     ->  their predictions, float32

A client of SageMaker's InvokeEndpointWithBidirectionalStream that sets no DataType sends
every message as binary: it opens the stream with ModelQueryString "binary=json", which
reaches the handler as context.query_string, and its binary messages are then read as the
JSON above, answered as binary JSON.
"""

import json
from urllib.parse import parse_qs

import numpy as np
from sagemaker_tfs import client


def predict(context, values):
    """y for x through the model server's gRPC Predict (context.channel, already open)."""
    return client.predict(context, {"x": values.astype(np.float32)})["y"]


def answer_json(context, text):
    request = json.loads(text)
    answer = {"predictions": predict(context, np.asarray(request["instances"])).tolist()}
    if "id" in request:
        answer["id"] = request["id"]
    return json.dumps(answer)


def answer_floats(context, data):
    if len(data) % 4:
        raise ValueError(
            f"a binary message holds float32 values: {len(data)} bytes is not a multiple of 4"
        )
    return predict(context, np.frombuffer(data, dtype="<f4")).astype("<f4").tobytes()


def stream_handler(messages, context):
    options = parse_qs(context.query_string or "")
    binary_json = options.get("binary") == ["json"]
    for message in messages:
        if isinstance(message, str):
            yield answer_json(context, message)
        elif binary_json:
            yield answer_json(context, message.decode("utf-8")).encode("utf-8")
        else:
            yield answer_floats(context, message)
