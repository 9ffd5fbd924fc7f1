"""The work every peer's server does around the same SavedModels: loading them with
TensorFlow as their users do (``tf.saved_model.load`` and the ``serving_default`` signature),
decoding a JPEG with Pillow, and the pre/post-processing pair of the handlers scenario. Each
peer server imports this module, so that the peers differ only by their framework.

Runs in the peers' venvs (no sagemaker_tfs import): TensorFlow, NumPy and Pillow only.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

# The stack runs its model server with one OpenMP thread and TensorFlow's default pools; the
# peers keep TensorFlow's defaults (what their users get).

SMALL, HEAVY, IMAGE = "half_plus_three", "compute_heavy", "mobilenet_v2"
MODEL_VERSIONS = {SMALL: "123", HEAVY: "1", IMAGE: "1"}
# The handlers scenario: what input_handler does to the client's values, the label threshold
THRESHOLD = 4.0


class SavedModel:
    """One SavedModel's serving_default signature, called with NumPy inputs."""

    def __init__(self, models_dir: str, name: str) -> None:
        loaded = tf.saved_model.load(str(Path(models_dir) / name / MODEL_VERSIONS[name]))
        self._keep = loaded
        self.function = loaded.signatures["serving_default"]
        self.input_name = next(iter(self.function.structured_input_signature[1]))

    def __call__(self, array: np.ndarray) -> dict[str, np.ndarray]:
        outputs = self.function(**{self.input_name: tf.constant(array)})
        return {name: tensor.numpy() for name, tensor in outputs.items()}

    def predict(self, array: np.ndarray) -> np.ndarray:
        """The one output (each of these models has one)."""
        return next(iter(self(array).values()))


def load_all(models_dir: str) -> dict[str, SavedModel]:
    return {name: SavedModel(models_dir, name) for name in (SMALL, HEAVY, IMAGE)}


def jpeg_pixels(data: bytes) -> np.ndarray:
    """One JPEG -> a batch of one float32 RGB image, as the stack's image path does it."""
    from PIL import Image

    with Image.open(io.BytesIO(data)) as image:
        return np.asarray(image.convert("RGB"), dtype=np.float32)[None]


def preprocess_values(values: list[float]) -> np.ndarray:
    """The handlers scenario's input side: the client's values, centred and scaled."""
    array = np.asarray(values, dtype=np.float32)
    return (array - array.mean()) / (array.std() + 1e-6) + 2.0


def postprocess_predictions(predictions: np.ndarray) -> dict:
    """The output side: predictions with a label each."""
    values = predictions.reshape(-1).tolist()
    return {"predictions": values, "labels": ["high" if v > THRESHOLD else "low" for v in values]}
