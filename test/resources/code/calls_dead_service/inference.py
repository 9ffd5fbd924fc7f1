"""handler calling an unrelated service that is down: each run is counted in runs.log beside
this file, so the test can check the handler ran once and its own error came back."""

import os

import requests

RUNS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "runs.log")


def handler(data, context):
    with open(RUNS, "a") as runs:
        runs.write(f"{context.rest_uri}\n")
    try:
        requests.get("http://127.0.0.1:9/", timeout=5)  # discard: nothing listens
    except requests.ConnectionError as error:
        raise RuntimeError(f"the feature store is down: {error}") from None
    return "unreachable", "text/plain"
