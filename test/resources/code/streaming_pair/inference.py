"""input_handler + output_handler whose answer is streamed: one JSON line per prediction."""

import json


def input_handler(data, context):
    return data.read()


def output_handler(response, context):
    predictions = response.json()["predictions"]
    return (json.dumps({"y": y}) + "\n" for y in predictions), "application/jsonlines"
