"""CSV in and out with input_handler + output_handler (model: half_plus_three, x -> y).

Request (text/csv):  one or more values per line, e.g. "1.0\n2.0,5.0\n"
Answer (text/csv):   one prediction per line, in input order: "3.5\n4.0\n5.5\n"
"""

import csv
import io
import json


def input_handler(data, context):
    if context.request_content_type != "text/csv":
        raise ValueError(f"expected text/csv, got {context.request_content_type}")
    text = io.TextIOWrapper(data, encoding="utf-8")  # not UTF-8: the client gets a 400
    values = [float(field) for row in csv.reader(text) for field in row if field.strip()]
    return json.dumps({"instances": values})


def output_handler(response, context):
    predictions = response.json()["predictions"]
    return "".join(f"{y}\n" for y in predictions), "text/csv"
