"""handler over REST; echoes the Context so the tests can check every field."""

import json

import requests


def handler(data, context):
    payload = data.read().decode("utf-8")
    response = requests.post(context.rest_uri, data=payload, timeout=30)
    if response.status_code != 200:
        raise ValueError(response.text)
    fields = dict(context._asdict())
    fields["channel"] = type(context.channel).__name__
    body = {"predictions": response.json()["predictions"], "context": fields}
    return json.dumps(body), "application/json"
