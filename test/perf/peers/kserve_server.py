"""The peer KServe: its Python model server with custom ``kserve.Model`` classes, as KServe's
custom-model examples write them (``load`` in ``__init__``, sync ``predict``; the handlers
model's work in ``preprocess``/``postprocess``), started by ``kserve.ModelServer().start``
with its defaults (one worker process). V1 (``{"instances": ...}``) and V2 (Open Inference
Protocol, with its binary tensor extension) are both served on the HTTP port.

Usage (in the kserve venv): python kserve_server.py MODELS_DIR --http_port PORT
"""

from __future__ import annotations

import base64
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import kserve  # noqa: E402
import numpy as np  # noqa: E402
import tf_models  # noqa: E402
from kserve import InferOutput, InferRequest, InferResponse  # noqa: E402


class TensorModel(kserve.Model):
    """A SavedModel taking one numeric tensor: V1 instances or a V2 tensor."""

    def __init__(self, name: str, models_dir: str, model: str) -> None:
        super().__init__(name)
        self.models_dir, self.model_name = models_dir, model
        self.load()

    def load(self) -> bool:
        self.saved_model = tf_models.SavedModel(self.models_dir, self.model_name)
        self.ready = True
        return self.ready

    def predict(self, payload, headers=None):  # type: ignore[no-untyped-def]
        if isinstance(payload, InferRequest):
            request_input = payload.inputs[0]
            result = self.saved_model.predict(request_input.as_numpy())
            output = InferOutput(name="y", shape=list(result.shape), datatype="FP32")
            output.set_data_from_numpy(result)
            return InferResponse(
                model_name=self.name, infer_outputs=[output], response_id=payload.id or "",
                use_binary_outputs=payload.use_binary_outputs,
            )  # fmt: skip
        array = np.asarray(payload["instances"], dtype=np.float32)
        return {"predictions": self.saved_model.predict(array).tolist()}


class ImageModel(kserve.Model):
    """MobileNetV2 on ``{"instances": [{"image_bytes": {"b64": ...}}]}``, KServe's image input."""

    def __init__(self, name: str, models_dir: str) -> None:
        super().__init__(name)
        self.models_dir = models_dir
        self.load()

    def load(self) -> bool:
        self.saved_model = tf_models.SavedModel(self.models_dir, tf_models.IMAGE)
        self.ready = True
        return self.ready

    def preprocess(self, payload, headers=None):  # type: ignore[no-untyped-def]
        data = base64.b64decode(payload["instances"][0]["image_bytes"]["b64"])
        return tf_models.jpeg_pixels(data)

    def predict(self, payload, headers=None):  # type: ignore[no-untyped-def]
        return {"predictions": self.saved_model.predict(payload).tolist()}


class HandlersModel(TensorModel):
    """half_plus_three with the handlers scenario's pre/post-processing."""

    def preprocess(self, payload, headers=None):  # type: ignore[no-untyped-def]
        return tf_models.preprocess_values(payload["values"])

    def predict(self, payload, headers=None):  # type: ignore[no-untyped-def]
        return self.saved_model.predict(payload)

    def postprocess(self, result, headers=None, response_headers=None):  # type: ignore[no-untyped-def]
        return tf_models.postprocess_predictions(result)


if __name__ == "__main__":
    models_dir = sys.argv.pop(1)
    models = [
        TensorModel(tf_models.SMALL, models_dir, tf_models.SMALL),
        TensorModel(tf_models.HEAVY, models_dir, tf_models.HEAVY),
        ImageModel(tf_models.IMAGE, models_dir),
        HandlersModel("handlers", models_dir, tf_models.SMALL),
    ]
    kserve.ModelServer().start(models)
