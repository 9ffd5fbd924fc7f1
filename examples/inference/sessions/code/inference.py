"""A handler that keeps state per stateful session (SAGEMAKER_TFS_SESSIONS=true; model:
half_plus_three, x -> y): each request's predictions are added to its session's history.

Open:   {"requestType": "NEW_SESSION"}: the container answers it (header
        X-Amzn-SageMaker-New-Session-Id: ID; Expires=...), this handler is not called
Use:    application/json {"instances": [1.0, 2.0]} with X-Amzn-SageMaker-Session-Id: ID
Answer: {"predictions": [3.5, 4.0], "seen": 2, "total": 7.5}: how many predictions the
        session has had, and their sum; without a session, {"predictions": [...]} alone
Close:  {"requestType": "CLOSE"} with X-Amzn-SageMaker-Session-Id: ID (the history is freed)
"""

import json

import requests


def handler(data, context):
    instances = json.load(data)["instances"]
    response = requests.post(context.rest_uri, json={"instances": instances}, timeout=60)
    if response.status_code != 200:
        raise ValueError(f"model server answered {response.status_code}: {response.text}")
    predictions = response.json()["predictions"]
    if context.session is None:  # a request outside any session
        return json.dumps({"predictions": predictions}), "application/json"
    # context.session: this session's own dict, kept between its requests
    history = context.session.setdefault("predictions", [])
    history.extend(predictions)
    answer = {"predictions": predictions, "seen": len(history), "total": sum(history)}
    return json.dumps(answer), "application/json"
