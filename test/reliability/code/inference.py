"""The fuzz suite's inference.py: a well-behaved pass-through.

JSON bodies are parsed (so a bad body raises JSONDecodeError, RecursionError or the ValueError
of a 5000-digit integer, which the service answers 400) and sent on unchanged; any other body
goes to the model server as one base64 string, which it refuses with a 4xx. The model
server's error answers reach the client with their status and body (``output_handler`` sees
successes only), so the fuzz test sees any 5xx of the model server.
"""

import base64
import json


def input_handler(data, context):
    body = data.read()
    if context.request_content_type == "application/json":
        json.loads(body)
        return body
    return json.dumps({"instances": [{"b64": base64.b64encode(body[:4096]).decode("ascii")}]})


def output_handler(response, context):
    return response.content, "application/json"
