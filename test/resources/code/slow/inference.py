"""handler that sleeps for the number of seconds in the body: for the timeout tests."""

import json
import time


def handler(data, context):
    seconds = float(data.read() or 0)
    time.sleep(seconds)
    return json.dumps({"slept": seconds}), "application/json"
