"""input_handler + output_handler: CSV in, TF Serving JSON out, with a marker to prove it ran."""

import json


def input_handler(data, context):
    if context.request_content_type == "text/csv":
        values = [float(x) for x in data.read().decode("utf-8").split(",")]
        return json.dumps({"instances": values})
    if context.request_content_type == "application/json":
        return data.read().decode("utf-8")
    raise ValueError(f"unsupported content type {context.request_content_type}")


def output_handler(response, context):
    if response.status_code != 200:
        raise ValueError(response.content.decode("utf-8"))
    predictions = response.json()["predictions"]
    body = {"predictions": predictions, "handler": "io_pair", "model": context.model_name}
    return json.dumps(body), "application/json"
