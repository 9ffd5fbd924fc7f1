"""The peer Ray Serve: one deployment with a FastAPI ingress (``@serve.ingress``), a route
per scenario, as Ray Serve's guides write model serving: JSON in and out, the raw request body
for the JPEG (Ray's image-classifier guide reads ``await request.body()``) and for the binary
tensor (a ``.npy`` in, a ``.npy`` answer). Ray's defaults: one replica, its default
``max_ongoing_requests``; a local Ray cluster started by ``serve.start``.

Usage (in the ray venv): python ray_server.py MODELS_DIR PORT
"""

# No "from __future__ import annotations": FastAPI must see the Request type itself.
import io
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
import ray  # noqa: E402
import tf_models  # noqa: E402
from fastapi import FastAPI, Request, Response  # noqa: E402
from ray import serve  # noqa: E402

app = FastAPI()


@serve.deployment
@serve.ingress(app)
class TFModels:
    def __init__(self, models_dir: str) -> None:
        self.models = tf_models.load_all(models_dir)

    @app.post("/predict")
    def predict(self, body: dict) -> dict:
        array = np.asarray(body["instances"], dtype=np.float32)
        return {"predictions": self.models[tf_models.SMALL].predict(array).tolist()}

    @app.post("/heavy")
    def heavy(self, body: dict) -> dict:
        array = np.asarray(body["instances"], dtype=np.float32)
        return {"predictions": self.models[tf_models.HEAVY].predict(array).tolist()}

    @app.post("/classify")
    async def classify(self, request: Request) -> dict:
        pixels = tf_models.jpeg_pixels(await request.body())
        return {"predictions": self.models[tf_models.IMAGE].predict(pixels).tolist()}

    @app.post("/tensor")
    async def tensor(self, request: Request) -> Response:
        array = np.load(io.BytesIO(await request.body()))
        out = io.BytesIO()
        np.save(out, self.models[tf_models.SMALL].predict(array))
        return Response(content=out.getvalue(), media_type="application/octet-stream")

    @app.post("/handlers")
    def handlers(self, body: dict) -> dict:
        scaled = tf_models.preprocess_values(body["values"])
        return tf_models.postprocess_predictions(self.models[tf_models.SMALL].predict(scaled))


if __name__ == "__main__":
    # The local cluster's processes talk over the loopback address (Ray would pick the
    # machine's first interface), nothing else differs from ray.init's defaults.
    ray.init(_node_ip_address="127.0.0.1")
    serve.start(http_options={"host": "127.0.0.1", "port": int(sys.argv[2])})
    serve.run(TFModels.bind(sys.argv[1]), route_prefix="/")
    while True:
        time.sleep(3600)
