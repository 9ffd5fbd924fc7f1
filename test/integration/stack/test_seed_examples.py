"""The seed documents' handlers (test/examples) served by the whole stack, compared with
in-process inference of the same test models."""

from __future__ import annotations

import io
import json
import pickle
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from test_fast_path import InProcess, image_stream, jpeg
from whole_stack import RunningStack, running_stack

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def in_process(test_models) -> InProcess:
    test_models.ensure(["jpeg_classifier", "mobilenet_v2", "detector"])
    return InProcess(test_models.root)


@pytest.fixture
def serve_example(test_models, tmp_path: Path):
    """``serve_example(example, model)``: the model and the example's code/ in one model dir."""

    @contextmanager
    def serve(example: str, model: str) -> Iterator[RunningStack]:
        model_dir = tmp_path / "model"
        model_dir.mkdir()
        (model_dir / model).symlink_to(test_models(model), target_is_directory=True)
        shutil.copytree(EXAMPLES / example / "code", model_dir / "code")
        work_dir = tmp_path / "work"
        work_dir.mkdir()
        with running_stack(model_dir, work_dir) as stack:
            yield stack

    return serve


def handler_pixels(data: bytes) -> np.ndarray:
    """Seed 001's pre-processing: PIL RGB, resize to 224x224 (PIL's default filter), uint8."""
    image = Image.open(io.BytesIO(data)).convert("RGB").resize((224, 224))
    return np.asarray(image, dtype=np.uint8).astype(np.float32)[np.newaxis]


def test_seed000_length_prefixed_jpeg_stream_over_grpc(serve_example, in_process) -> None:
    import cv2

    images = [jpeg(512, 512, seed=30 + i) for i in range(3)]
    with serve_example("seed000_image_stream", "detector") as stack:
        response = stack.post(
            image_stream(images), "application/octet-stream", Accept="application/x-npy"
        )
        assert response.status_code == 200, response.text
        served = pickle.loads(response.content)  # the seed answers a pickled array
        wrong_type = stack.post(image_stream(images), "image/jpeg", Accept="application/x-npy")
        assert wrong_type.status_code >= 400
        assert "Unsupported content type: image/jpeg" in wrong_type.json()["error"]
    decoded = [
        cv2.cvtColor(
            cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB
        )
        for data in images
    ]
    batch = np.stack(decoded).astype(np.float32) / 255.0
    outputs = in_process("detector", images=batch)
    expected = np.concatenate([outputs[f"output_{i}"].ravel() for i in range(3)])
    assert served.shape == expected.shape == (3 * (16 * 16 + 32 * 32 + 64 * 64) * 255,)
    np.testing.assert_allclose(served, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("example", ["seed001_rest", "seed001_grpc", "client_helper"])
def test_seed001_handlers(serve_example, in_process, example: str) -> None:
    image = jpeg(300, 240, seed=40)
    with serve_example(example, "mobilenet_v2") as stack:
        response = stack.post(image, "application/x-image", Accept="application/json")
        assert response.status_code == 200, response.text
        served = np.array(json.loads(response.content)["predictions"])
    expected = in_process("mobilenet_v2", input_1=handler_pixels(image))["predictions"]
    np.testing.assert_allclose(served, expected, rtol=1e-4, atol=1e-6)


def test_seed002_base64_input_handler(serve_example, in_process) -> None:
    image = jpeg(150, 120, seed=50)
    with serve_example("seed002_b64", "jpeg_classifier") as stack:
        response = stack.post(image, "application/x-image", Accept="application/json")
        assert response.status_code == 200, response.text
        assert response.headers["Content-Type"].startswith("application/json")
        prediction = json.loads(response.content)["predictions"][0]
        refused = stack.post(b"{}", "text/plain", Accept="application/json")
        assert refused.status_code >= 400
        assert 'Unsupported content type "text/plain"' in refused.json()["error"]
    expected = in_process("jpeg_classifier", image_bytes=np.array([image], dtype=object))
    assert prediction["classes"] == int(expected["classes"][0])
    np.testing.assert_allclose(prediction["probabilities"], expected["probabilities"][0], rtol=1e-5)
