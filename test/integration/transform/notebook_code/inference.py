"""The batch-transform notebook's handlers (seed 002), plus what its JSON-lines variant needs.

``application/x-image``: the notebook's ``input_handler`` unchanged (base64 of the body as
``{"instances": [{"b64": ...}]}``). ``application/jsonlines``: each line is already an
instance (``{"b64": ...}``), so a MultiRecord body of N lines is one request of N instances.
With ``Accept: application/jsonlines`` the answer is one prediction per line (so Batch
Transform's AssembleWith Line gives one output line per input record); otherwise the model
server's answer is passed on unmodified, as in the notebook.
"""

import base64
import json


def input_handler(data, context):
    if context.request_content_type == "application/x-image":
        payload = data.read()
        encoded_image = base64.b64encode(payload).decode("utf-8")
        instance = [{"b64": encoded_image}]
        return json.dumps({"instances": instance})
    if context.request_content_type == "application/jsonlines":
        lines = data.read().decode("utf-8").splitlines()
        return json.dumps({"instances": [json.loads(line) for line in lines if line.strip()]})
    _return_error(
        415, 'Unsupported content type "{}"'.format(context.request_content_type or "Unknown")
    )


def output_handler(response, context):
    if response.status_code != 200:
        _return_error(response.status_code, response.content.decode("utf-8"))
    if context.accept_header == "application/jsonlines":
        predictions = response.json()["predictions"]
        lines = "".join(json.dumps(p, separators=(",", ":")) + "\n" for p in predictions)
        return lines, "application/jsonlines"
    return response.content, context.accept_header


def _return_error(code, message):
    raise ValueError(f"Error: {str(code)}, {message}")
