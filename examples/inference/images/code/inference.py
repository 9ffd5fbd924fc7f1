"""JPEG images in, the best class of each out, with input_handler + output_handler.

Model: jpeg_classifier (made by test/models/make_test_models.py): its input ``image_bytes``
takes encoded JPEG bytes and decodes them in the graph; its outputs are ``classes`` and
``probabilities``. TF Serving's REST API takes bytes as {"b64": "<base64>"}.

Requests:
  Content-Type: application/x-image (or image/jpeg), the JPEG file as the body
  Content-Type: application/json, {"images": ["<base64 JPEG>", ...]}
Answer:  {"predictions": [{"class": 3, "probability": 0.41}, ...]}, one per image
"""

import base64
import json

IMAGE_TYPES = ("application/x-image", "image/jpeg")


def input_handler(data, context):
    if context.request_content_type in IMAGE_TYPES:
        images = [base64.b64encode(data.read()).decode("ascii")]
    elif context.request_content_type == "application/json":
        images = json.load(data)["images"]  # already base64 text
    else:
        raise ValueError(f"unsupported content type {context.request_content_type}")
    return json.dumps({"instances": [{"image_bytes": {"b64": image}} for image in images]})


def output_handler(response, context):
    predictions = response.json()["predictions"]
    best = [
        {"class": p["classes"], "probability": p["probabilities"][p["classes"]]}
        for p in predictions
    ]
    return json.dumps({"predictions": best}), "application/json"
