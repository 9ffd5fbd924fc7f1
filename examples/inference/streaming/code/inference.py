"""A handler that streams its answer (model: half_plus_three, x -> y): the instances are
predicted a batch at a time, and each batch's predictions go to the client as soon as the
model server has answered them, as server-sent events or JSON lines.

Request: application/json {"instances": [1.0, 2.0, 5.0], "batch_size": 2}
Answer:  Accept: text/event-stream -> one event per batch, then an "end" event:
             data: {"predictions": [3.5, 4.0]}       (each event ends with a blank line)
             data: {"predictions": [5.5]}
             event: end
             data: {"count": 3}
         otherwise, application/jsonlines -> one line per batch: {"predictions": [3.5, 4.0]}
A batch the model server refuses after the first: the answer is cut short (no end event).
"""

import json

import requests


def _predictions(instances, batch_size, rest_uri):
    """The predictions of each batch, asked for when the client is ready for them."""
    for start in range(0, len(instances), batch_size):
        batch = instances[start : start + batch_size]
        response = requests.post(rest_uri, json={"instances": batch}, timeout=60)
        if response.status_code != 200:
            raise ValueError(f"model server answered {response.status_code}: {response.text}")
        yield response.json()["predictions"]


def _events(batches):
    count = 0
    for predictions in batches:
        count += len(predictions)
        yield f"data: {json.dumps({'predictions': predictions})}\n\n"
    yield f"event: end\ndata: {json.dumps({'count': count})}\n\n"


def _json_lines(batches):
    for predictions in batches:
        yield json.dumps({"predictions": predictions}) + "\n"


def handler(data, context):
    request = json.load(data)  # read before streaming: a bad body is still a 400
    batch_size = int(request.get("batch_size", 1))
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    batches = _predictions(request["instances"], batch_size, context.rest_uri)
    if context.accept_header == "text/event-stream":
        return _events(batches), "text/event-stream"
    return _json_lines(batches), "application/jsonlines"
