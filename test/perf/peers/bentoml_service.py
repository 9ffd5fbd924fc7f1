"""The peer BentoML (1.4): one ``@bentoml.service`` class holding the SavedModels, an
``@bentoml.api`` per scenario, typed as BentoML's docs type them: JSON lists for tensors,
``PIL.Image.Image`` for the image (multipart upload), a file (``pathlib.Path``) for the
binary tensor in and out (BentoML's binary form; NumPy arrays would travel as JSON), and
plain Python service code for the handlers scenario. Served with ``bentoml serve`` and
BentoML's defaults (one worker process; sync APIs run in its thread pool).

Usage (in the bentoml venv, MODELS_DIR in SAGEMAKER_TFS_PEER_MODELS):
    bentoml serve bentoml_service:TFModels --port PORT
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Annotated

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bentoml  # noqa: E402
import numpy as np  # noqa: E402
import tf_models  # noqa: E402
from bentoml.validators import ContentType  # noqa: E402
from PIL.Image import Image  # noqa: E402

NpyFile = Annotated[Path, ContentType("application/octet-stream")]
# BentoML sends a returned file after the API returns: old answers are removed later.
ANSWERS = tempfile.mkdtemp(prefix="bentoml-peer-answers-")


def _remove_old_answers(age_seconds: float = 60.0) -> None:
    now = time.time()
    for path in Path(ANSWERS).iterdir():
        with contextlib.suppress(OSError):
            if now - path.stat().st_mtime > age_seconds:
                path.unlink()


@bentoml.service(traffic={"timeout": 300})
class TFModels:
    def __init__(self) -> None:
        self.models = tf_models.load_all(os.environ["SAGEMAKER_TFS_PEER_MODELS"])

    @bentoml.api
    def predict(self, instances: list[float]) -> dict:
        array = np.asarray(instances, dtype=np.float32)
        return {"predictions": self.models[tf_models.SMALL].predict(array).tolist()}

    @bentoml.api
    def heavy(self, instances: list[list[float]]) -> dict:
        array = np.asarray(instances, dtype=np.float32)
        return {"predictions": self.models[tf_models.HEAVY].predict(array).tolist()}

    @bentoml.api
    def classify(self, image: Image) -> dict:
        pixels = np.asarray(image.convert("RGB"), dtype=np.float32)[None]
        return {"predictions": self.models[tf_models.IMAGE].predict(pixels).tolist()}

    @bentoml.api
    def tensor(self, npy: NpyFile) -> NpyFile:
        result = self.models[tf_models.SMALL].predict(np.load(npy))
        _remove_old_answers()
        handle, name = tempfile.mkstemp(suffix=".npy", dir=ANSWERS)
        with os.fdopen(handle, "wb") as out:
            np.save(out, result)
        return Path(name)

    @bentoml.api
    def handlers(self, values: list[float]) -> dict:
        scaled = tf_models.preprocess_values(values)
        return tf_models.postprocess_predictions(self.models[tf_models.SMALL].predict(scaled))
