"""JSON in and out with input_handler + output_handler (model: half_plus_three, x -> y).

Request:  {"values": [1.0, 2.0, 5.0]}
Answer:   {"model": "half_plus_three", "y": [3.5, 4.0, 5.5]}
"""

import json


def input_handler(data, context):
    """The body of the TF Serving REST request that the service posts to context.rest_uri."""
    if context.request_content_type != "application/json":
        raise ValueError(f"expected application/json, got {context.request_content_type}")
    values = json.load(data)["values"]  # a body that is not JSON: the client gets a 400
    return json.dumps({"instances": values})


def output_handler(response, context):
    """The model server's answer (a requests.Response); called only for a 2xx."""
    predictions = response.json()["predictions"]
    return json.dumps({"model": context.model_name, "y": predictions}), "application/json"
