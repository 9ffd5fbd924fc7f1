"""The generated image models served over REST: JPEG bytes in (b64), MobileNetV2, detector."""

from __future__ import annotations

import base64
import io
import json
from typing import Any

import numpy as np
import pytest
from model_server_process import start_server, stop_server
from PIL import Image
from rest_helpers import RestClient, model_config

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory, test_models: Any):
    names = ["jpeg_classifier", "mobilenet_v2", "detector"]
    test_models.ensure(names)
    tmp = tmp_path_factory.mktemp("rest_models")
    config = tmp / "models.config"
    config.write_text(model_config([{"name": n, "base_path": test_models(n)} for n in names]))
    handle = start_server([f"--model_config_file={config}"], tmp / "server.log")
    yield RestClient(handle.rest_url)
    stop_server(handle)


def jpeg_b64(seed: int, size: tuple[int, int]) -> str:
    pixels = np.random.default_rng(seed).integers(0, 256, (*size, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="JPEG")
    return base64.b64encode(buffer.getvalue()).decode()


def test_jpeg_classifier_takes_b64_jpeg_bytes(client: RestClient) -> None:
    instances = [{"b64": jpeg_b64(1, (300, 200))}, {"b64": jpeg_b64(2, (64, 64))}]
    response = client.post(
        "/v1/models/jpeg_classifier:predict", json.dumps({"instances": instances})
    )
    assert response.status_code == 200, response.text
    predictions = response.json()["predictions"]
    assert len(predictions) == 2
    for row in predictions:
        assert sorted(row) == ["classes", "probabilities"]
        assert isinstance(row["classes"], int)
        assert len(row["probabilities"]) == 10
        assert abs(sum(row["probabilities"]) - 1.0) < 1e-5
        assert row["classes"] == int(np.argmax(row["probabilities"]))
    assert response.text.startswith('{\n    "predictions": [{\n            "classes": ')


def test_jpeg_classifier_rejects_bytes_that_are_not_jpeg(client: RestClient) -> None:
    body = json.dumps({"instances": [{"b64": base64.b64encode(b"not a jpeg").decode()}]})
    response = client.post("/v1/models/jpeg_classifier:predict", body)
    assert response.status_code == 400
    assert response.headers["Content-Type"] == "application/json"
    assert "error" in response.json()


def test_mobilenet_v2_on_one_224x224x3_image(client: RestClient) -> None:
    image = np.random.default_rng(3).random((1, 224, 224, 3), dtype=np.float32)
    response = client.post(
        "/v1/models/mobilenet_v2:predict", json.dumps({"instances": image.tolist()})
    )
    assert response.status_code == 200, response.text
    (row,) = response.json()["predictions"]
    assert len(row) == 1000
    assert abs(sum(row) - 1.0) < 1e-3


def test_detector_returns_three_yolo_shaped_outputs(client: RestClient) -> None:
    image = np.zeros((1, 512, 512, 3), dtype=np.float32)
    response = client.post("/v1/models/detector:predict", json.dumps({"inputs": image.tolist()}))
    assert response.status_code == 200, response.text
    outputs = response.json()["outputs"]
    shapes = {name: np.asarray(value).shape for name, value in outputs.items()}
    assert shapes == {
        "output_0": (1, 16, 16, 255),
        "output_1": (1, 32, 32, 255),
        "output_2": (1, 64, 64, 255),
    }
