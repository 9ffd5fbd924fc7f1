"""seed001_grpc's handler with the project's helper: the gRPC part is one line."""

import io
import json

import numpy as np
from PIL import Image
from sagemaker_tfs.client import predict

HEIGHT = 224
WIDTH = 224


def handler(data, context):
    if context.request_content_type != "application/x-image":
        raise ValueError(f"Unsupported content type: {context.request_content_type}")
    img = Image.open(io.BytesIO(data.read())).convert("RGB").resize((WIDTH, HEIGHT))
    batch = np.asarray(img, dtype=np.float32)[np.newaxis]
    outputs = predict(context, {"input_1": batch})
    return json.dumps({"predictions": outputs["predictions"].tolist()}), "application/json"
