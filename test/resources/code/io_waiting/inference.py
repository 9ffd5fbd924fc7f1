"""input_handler + output_handler that log each run to runs.log beside this file; the
input_handler waits (up to 60 s) for a file named go there before it returns, so that a test
can kill the model server the request's context names in between."""

import os
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def log(line):
    with open(os.path.join(HERE, "runs.log"), "a") as runs:
        runs.write(line + "\n")


def input_handler(data, context):
    log(f"input {context.rest_uri}")
    deadline = time.monotonic() + 60
    while not os.path.exists(os.path.join(HERE, "go")) and time.monotonic() < deadline:
        time.sleep(0.05)
    return data.read().decode("utf-8")


def output_handler(response, context):
    log(f"output {context.rest_uri}")
    return response.content, "application/json"
