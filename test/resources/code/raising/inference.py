"""handler that raises: by content type, the kind of error the service must report."""

import json


def handler(data, context):
    body = data.read()
    if context.request_content_type == "application/json":
        return json.dumps({"parsed": json.loads(body)}), "application/json"
    if context.request_content_type == "text/plain":
        raise RuntimeError("handler exploded on purpose")
    return body, "application/octet-stream"
