"""The handlers scenario on this stack: the same pre/post-processing as the peers' servers
(``tf_models.preprocess_values`` / ``postprocess_predictions``), as a user's inference.py."""

import json

import numpy as np

THRESHOLD = 4.0


def input_handler(data, context):
    values = np.asarray(json.load(data)["values"], dtype=np.float32)
    scaled = (values - values.mean()) / (values.std() + 1e-6) + 2.0
    return json.dumps({"instances": scaled.tolist()})


def output_handler(response, context):
    if response.status_code != 200:
        raise ValueError(response.content.decode("utf-8"))
    values = np.asarray(response.json()["predictions"], dtype=np.float32).reshape(-1).tolist()
    labels = ["high" if v > THRESHOLD else "low" for v in values]
    return json.dumps({"predictions": values, "labels": labels}), "application/json"
