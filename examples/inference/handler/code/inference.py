"""One handler(data, context) that calls the model server itself, over REST, and answers in
the type the client asks for (model: half_plus_three, x -> y).

Requests: application/json {"instances": [1.0, 2.0]}, or text/csv "1.0\n2.0\n"
Answer:   Accept: text/csv -> "3.5\n4.0\n"; otherwise -> {"predictions": [3.5, 4.0]}
"""

import json

import requests


def _read_values(data, content_type):
    if content_type == "application/json":
        return json.load(data)["instances"]
    if content_type == "text/csv":
        return [float(value) for value in data.read().decode("utf-8").replace(",", " ").split()]
    raise ValueError(f"unsupported content type {content_type}")


def handler(data, context):
    values = _read_values(data, context.request_content_type)
    # context.rest_uri names the model, the version asked for and the method (:predict)
    response = requests.post(context.rest_uri, json={"instances": values}, timeout=60)
    if response.status_code != 200:
        # a handler owns its answer: pass the model server's error on (as a 500)
        raise ValueError(f"model server answered {response.status_code}: {response.text}")
    predictions = response.json()["predictions"]
    if context.accept_header == "text/csv":
        return "".join(f"{y}\n" for y in predictions), "text/csv"
    return json.dumps({"predictions": predictions}), "application/json"
