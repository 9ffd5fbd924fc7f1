"""The built-in binary content types through the whole stack (nginx -> service -> gRPC -> model
server), checked against in-process inference of the same SavedModels."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import requests
from payload_bytes import npy_bytes
from PIL import Image
from whole_stack import RunningStack, running_stack

MODELS = ("jpeg_classifier", "mobilenet_v2", "detector", "detector_uint8")
pytestmark = pytest.mark.slow


def jpeg(width: int, height: int, seed: int = 0, fmt: str = "JPEG") -> bytes:
    rng = np.random.default_rng(seed)
    pixels = rng.integers(0, 255, (height, width, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format=fmt)
    return buffer.getvalue()


def image_stream(images: list[bytes]) -> bytes:
    return b"".join(len(image).to_bytes(4, "big") + image for image in images)


def pixels(data: bytes, size: tuple[int, int]) -> np.ndarray:
    """The service's documented conversion: RGB, bilinear resize, float32 0-255."""
    image = Image.open(io.BytesIO(data)).convert("RGB")
    if image.size != size:
        image = image.resize(size, Image.Resampling.BILINEAR)
    return np.asarray(image, dtype=np.float32)


class InProcess:
    """The same SavedModels loaded in the test process with TensorFlow (the reference)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._signatures: dict[str, object] = {}

    def __call__(self, model: str, **inputs: np.ndarray) -> dict[str, np.ndarray]:
        import tensorflow as tf

        if model not in self._signatures:
            loaded = tf.saved_model.load(str(self.root / model / "1"))
            self._signatures[model] = (loaded, loaded.signatures["serving_default"])
        _, signature = self._signatures[model]
        outputs = signature(**{name: tf.constant(value) for name, value in inputs.items()})
        return {name: value.numpy() for name, value in outputs.items()}


# The default gevent worker, and the threaded worker that docs/performance.md suggests for
# large answers (grpcio's own threads, no hand-off through gevent's hub).
WORKERS = {
    "gevent": {},
    "gthread": {"SAGEMAKER_GUNICORN_WORKER_CLASS": "gthread", "SAGEMAKER_GUNICORN_THREADS": "4"},
}


@pytest.fixture(scope="module", params=sorted(WORKERS))
def stack(
    request: pytest.FixtureRequest, test_models, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningStack]:
    model_dir = tmp_path_factory.mktemp("fast_path_models")
    for name in MODELS:
        (model_dir / name).symlink_to(test_models(name), target_is_directory=True)
    work_dir = tmp_path_factory.mktemp("fast_path_work")
    with running_stack(model_dir, work_dir, env=WORKERS[request.param]) as running:
        yield running


@pytest.fixture(scope="module")
def in_process(test_models) -> InProcess:
    test_models.ensure(MODELS)
    return InProcess(test_models.root)


def invoke(
    stack: RunningStack, model: str, body: bytes, content_type: str, accept: str
) -> requests.Response:
    return stack.post(
        body,
        content_type,
        Accept=accept,
        **{"X-Amzn-SageMaker-Custom-Attributes": f"tfs-model-name={model}"},
    )


def npz(response: requests.Response) -> dict[str, np.ndarray]:
    with np.load(io.BytesIO(response.content), allow_pickle=False) as archive:
        return {name: archive[name] for name in archive.files}


def test_jpeg_to_float_model_matches_in_process(stack: RunningStack, in_process) -> None:
    image = jpeg(320, 200, seed=1)
    response = invoke(stack, "mobilenet_v2", image, "image/jpeg", "application/x-npy")
    assert response.status_code == 200, response.text
    assert response.headers["Content-Type"] == "application/x-npy"
    served = np.load(io.BytesIO(response.content), allow_pickle=False)
    expected = in_process("mobilenet_v2", input_1=pixels(image, (224, 224))[np.newaxis])
    np.testing.assert_allclose(served, expected["predictions"], rtol=1e-4, atol=1e-6)

    as_json = invoke(stack, "mobilenet_v2", image, "application/x-image", "application/json")
    assert as_json.status_code == 200, as_json.text
    np.testing.assert_allclose(
        np.array(json.loads(as_json.content)["predictions"]), served, rtol=1e-5, atol=1e-7
    )


def test_png_and_csv(stack: RunningStack, in_process) -> None:
    image = jpeg(224, 224, seed=2, fmt="PNG")
    response = invoke(stack, "mobilenet_v2", image, "image/png", "text/csv")
    assert response.status_code == 200, response.text
    assert response.headers["Content-Type"].startswith("text/csv")
    served = np.loadtxt(io.StringIO(response.text), delimiter=",", ndmin=2)
    expected = in_process("mobilenet_v2", input_1=pixels(image, (224, 224))[np.newaxis])
    np.testing.assert_allclose(served, expected["predictions"], rtol=1e-5, atol=1e-7)


def test_npy_in_npy_out(stack: RunningStack, in_process) -> None:
    batch = np.random.default_rng(3).uniform(0, 255, (2, 224, 224, 3)).astype(np.float64)
    response = invoke(
        stack, "mobilenet_v2", npy_bytes(batch), "application/x-npy", "application/x-npy"
    )
    assert response.status_code == 200, response.text
    served = np.load(io.BytesIO(response.content), allow_pickle=False)
    expected = in_process("mobilenet_v2", input_1=batch.astype(np.float32))
    np.testing.assert_allclose(served, expected["predictions"], rtol=1e-4, atol=1e-6)


def test_image_stream_to_detector_npz_and_json(stack: RunningStack, in_process) -> None:
    images = [jpeg(512, 512, seed=10 + i) for i in range(3)]
    body = image_stream(images)
    response = invoke(stack, "detector", body, "application/x-image-stream", "application/x-npz")
    assert response.status_code == 200, response.text
    served = npz(response)
    batch = np.stack([pixels(image, (512, 512)) for image in images])
    expected = in_process("detector", images=batch)
    assert sorted(served) == ["output_0", "output_1", "output_2"]
    for name, value in expected.items():
        assert served[name].shape == value.shape
        np.testing.assert_allclose(served[name], value, rtol=1e-5, atol=1e-5)

    as_json = invoke(stack, "detector", body, "application/x-image-stream", "application/json")
    assert as_json.status_code == 200, as_json.text
    rows = json.loads(as_json.content)["predictions"]
    assert len(rows) == 3 and sorted(rows[0]) == ["output_0", "output_1", "output_2"]
    np.testing.assert_allclose(np.array(rows[2]["output_1"]), served["output_1"][2], rtol=1e-6)


def test_a_uint8_model_gets_the_decoded_pixels(stack: RunningStack, in_process) -> None:
    """The same network taking uint8 input gets the pixels as decoded (a request 4x smaller
    than float32), so it answers what the float32 one answers."""
    images = [jpeg(512, 512, seed=20 + i) for i in range(2)]
    body = image_stream(images)
    stream = "application/x-image-stream"
    served = npz(invoke(stack, "detector_uint8", body, stream, "application/x-npz"))
    as_float = npz(invoke(stack, "detector", body, stream, "application/x-npz"))
    batch = np.stack([pixels(image, (512, 512)) for image in images]).astype(np.uint8)
    expected = in_process("detector_uint8", images=batch)
    for name, value in expected.items():
        np.testing.assert_allclose(served[name], value, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(served[name], as_float[name], rtol=1e-5, atol=1e-5)


def test_output_filter_sends_only_the_outputs_asked_for(stack: RunningStack) -> None:
    images = [jpeg(512, 512, seed=30 + i) for i in range(2)]
    body = image_stream(images)
    whole = npz(invoke(stack, "detector", body, "application/x-image-stream", "application/x-npz"))
    attributes = "tfs-model-name=detector,tfs-output-filter=output_0; output_1"
    headers = {"Accept": "application/x-npz", "X-Amzn-SageMaker-Custom-Attributes": attributes}
    response = stack.post(body, "application/x-image-stream", **headers)
    assert response.status_code == 200, response.text
    served = npz(response)
    assert sorted(served) == ["output_0", "output_1"]
    for name, value in served.items():
        np.testing.assert_array_equal(value, whole[name])

    headers["X-Amzn-SageMaker-Custom-Attributes"] = "tfs-model-name=detector,tfs-output-filter=x"
    unknown = stack.post(body, "application/x-image-stream", **headers)
    assert unknown.status_code == 400
    assert "output tensor alias not found in signature: x" in unknown.json()["error"]


def test_jpeg_bytes_model_gets_the_bytes(stack: RunningStack, in_process) -> None:
    images = [jpeg(100 + 20 * i, 90, seed=20 + i) for i in range(3)]
    response = invoke(
        stack, "jpeg_classifier", image_stream(images), "application/x-image-stream",
        "application/x-npz",
    )  # fmt: skip
    assert response.status_code == 200, response.text
    served = npz(response)
    expected = in_process("jpeg_classifier", image_bytes=np.array(images, dtype=object))
    np.testing.assert_array_equal(served["classes"], expected["classes"])
    np.testing.assert_allclose(served["probabilities"], expected["probabilities"], rtol=1e-5)

    single = invoke(stack, "jpeg_classifier", images[0], "image/jpeg", "application/jsonlines")
    assert single.status_code == 200, single.text
    assert b"\n" not in single.content
    assert json.loads(single.content)["predictions"][0]["classes"] == int(served["classes"][0])


def pickled_npy() -> bytes:
    return npy_bytes(np.array([{"a": 1}], dtype=object))


BAD_REQUESTS = [
    ("truncated stream", "detector", image_stream([jpeg(64, 64)])[:-5],
     "application/x-image-stream", "application/x-npz", 400, "Truncated image stream"),
    ("not an image", "mobilenet_v2", b"this is text", "image/jpeg", "application/json", 400,
     "Image 0 cannot be decoded"),
    ("pickled npy", "mobilenet_v2", pickled_npy(), "application/x-npy", "application/x-npy", 400,
     "Pickled object arrays are not accepted"),
    ("wrong dtype", "mobilenet_v2", npy_bytes(np.array([["a"]])), "application/x-npy",
     "application/x-npy", 400, "expects DT_FLOAT, got an array of <U1"),
    # Not checked by the service (TF Serving would not): the model server refuses a rank that
    # would abort TensorFlow's oneDNN convolution.
    ("wrong rank", "mobilenet_v2", npy_bytes(np.zeros((1, 3), np.float32)), "application/x-npy",
     "application/x-npy", 400, "needs a 4-dimensional input: got shape [1, 3]"),
    ("empty body", "mobilenet_v2", b"", "image/jpeg", "application/json", 400, "Empty request"),
    ("unsupported type", "mobilenet_v2", b"x", "application/octet-stream", "application/json",
     415, "Unsupported Media Type: application/octet-stream"),
    ("unknown model", "nope", jpeg(8, 8), "image/jpeg", "application/json", 404,
     "Servable not found for request: Latest(nope)"),
    ("npy of three outputs", "detector", image_stream([jpeg(512, 512)]),
     "application/x-image-stream", "application/x-npy", 406, "returns 3 outputs"),
    ("unacceptable accept", "mobilenet_v2", jpeg(8, 8), "image/jpeg", "text/html", 406,
     "Not Acceptable: text/html"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("model", "body", "content_type", "accept", "status", "message"),
    [case[1:] for case in BAD_REQUESTS],
    ids=[case[0] for case in BAD_REQUESTS],
)
def test_bad_input_gets_a_clear_error_and_the_stack_keeps_serving(
    stack: RunningStack,
    model: str,
    body: bytes,
    content_type: str,
    accept: str,
    status: int,
    message: str,
) -> None:
    response = invoke(stack, model, body, content_type, accept)
    assert response.status_code == status, response.text
    assert response.headers["Content-Type"].startswith("application/json")
    assert message in response.json()["error"]
    good = invoke(stack, "detector", jpeg(32, 32), "image/jpeg", "application/x-npz")
    assert good.status_code == 200, good.text
    assert npz(good)["output_0"].shape == (1, 16, 16, 255)
