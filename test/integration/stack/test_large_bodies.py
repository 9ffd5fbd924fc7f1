"""Bodies of asynchronous inference's size on every path of the host stack, and the limits.

SageMaker's asynchronous inference posts bodies of up to 1 GB to ``/invocations``: a 200 MB
``.npy`` (nginx buffers it in a file, the service sends it over the streamed gRPC Predict), a
100 MB ``.npz`` and a 50 MB CSV (over the njs limit, so the service converts it and posts it
to the model server's REST API) get their correct answers, and an ``inference.py`` handler
reads a 200 MB body whole. ``SAGEMAKER_TFS_MAX_BODY_MB`` and ``SAGEMAKER_TFS_MAX_TEXT_BODY_MB``
lower the limits; beyond them, a 413 JSON names the limit.
(The memory these bodies cost: test/perf/bench_large_bodies.py.)
"""

from __future__ import annotations

import hashlib
import io
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import requests
from whole_stack import RunningStack, running_stack

pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]

REPO_ROOT = Path(__file__).resolve().parents[3]
MODEL = REPO_ROOT / "test" / "resources" / "models" / "half_plus_three"
MB = 1 << 20
NPY = "application/x-npy"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    root = tmp_path_factory.mktemp("large_bodies")
    with running_stack(MODEL.parent, root) as running:
        yield running


DIGEST_HANDLER = """
import hashlib
import json


def handler(data, context):
    body = data.read()
    digest = hashlib.sha256(body).hexdigest()
    answer = {"bytes": len(body), "sha256": digest, "content_length": context.content_length}
    return json.dumps(answer), "application/json"
"""


@pytest.fixture(scope="module")
def limited_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    root = tmp_path_factory.mktemp("limited_bodies")
    env = {"SAGEMAKER_TFS_MAX_BODY_MB": "8", "SAGEMAKER_TFS_MAX_TEXT_BODY_MB": "2"}
    with running_stack(MODEL.parent, root, env) as running:
        yield running


def npy_bytes(array: np.ndarray) -> bytes:
    stream = io.BytesIO()
    np.save(stream, array)
    return stream.getvalue()


def post(stack: RunningStack, body: bytes, content_type: str, **headers: str) -> requests.Response:
    return requests.post(
        stack.url + "/invocations",
        data=body,
        headers={"Content-Type": content_type, **headers},
        timeout=500,
    )


def test_200_mb_npy_in_npy_out(stack: RunningStack) -> None:
    x = (np.arange(200 * MB // 4) % 4093).astype(np.float32)
    response = post(stack, npy_bytes(x), NPY, Accept=NPY)
    assert response.status_code == 200, response.text[:300]
    assert response.headers["Content-Type"] == NPY
    y = np.load(io.BytesIO(response.content))
    assert y.shape == x.shape and y.dtype == np.float32
    np.testing.assert_array_equal(y, x * np.float32(0.5) + np.float32(3.0))


def test_100_mb_npz_in_npz_out(stack: RunningStack) -> None:
    """np.savez's stored member, read in place by the service, streamed both ways."""
    x = (np.arange(100 * MB // 4) % 4091).astype(np.float32)
    body = io.BytesIO()
    np.savez(body, x=x)
    npz = "application/x-npz"
    response = post(stack, body.getvalue(), npz, Accept=npz)
    assert response.status_code == 200, response.text[:300]
    assert response.headers["Content-Type"] == npz
    with np.load(io.BytesIO(response.content)) as answer:
        (name,) = answer.files
        np.testing.assert_array_equal(answer[name], x * np.float32(0.5) + np.float32(3.0))


def test_50_mb_csv_in_json_out(stack: RunningStack) -> None:
    values = (np.arange(5_200_000) % 1000).astype(np.float32) / 8
    text = "\n".join(f"{value:.6f}" for value in values) + "\n"
    assert len(text) > 50 * MB
    response = post(stack, text.encode(), "text/csv", Accept="application/json")
    assert response.status_code == 200, response.text[:300]
    predictions = np.array(json.loads(response.content)["predictions"], np.float32)
    np.testing.assert_array_equal(predictions, values * np.float32(0.5) + np.float32(3.0))


def test_csv_between_the_njs_and_the_text_limit_is_served(limited_stack: RunningStack) -> None:
    """1.5 MB: more than njs converts (256 KB), less than the text limit (2 MB here)."""
    text = "1.0\n" * (1536 * 1024 // 4)
    response = post(limited_stack, text.encode(), "text/csv")
    assert response.status_code == 200, response.text[:300]
    assert response.json()["predictions"] == [3.5] * (1536 * 1024 // 4)


@pytest.mark.parametrize("content_type", ["application/json", "text/csv", "application/jsonlines"])
def test_text_over_its_limit_is_413_naming_the_way_around(
    limited_stack: RunningStack, content_type: str
) -> None:
    body = b"[" + b"1.0," * (3 * MB // 4) + b"1.0]"
    response = post(limited_stack, body, content_type)
    assert response.status_code == 413
    error = response.json()["error"]
    assert "converted up to 2 MB (SAGEMAKER_TFS_MAX_TEXT_BODY_MB)" in error
    assert "application/x-npy" in error


def test_chunked_text_over_its_limit_is_413_from_the_service(limited_stack: RunningStack) -> None:
    """No Content-Length: njs cannot judge the size first; the service refuses it."""
    pieces = iter([b"1.0\n" * (MB // 4)] * 3)
    response = post(limited_stack, pieces, "text/csv")  # type: ignore[arg-type]
    assert response.status_code == 413
    assert "SAGEMAKER_TFS_MAX_TEXT_BODY_MB" in response.json()["error"]


def test_text_over_its_limit_as_npy_is_served(limited_stack: RunningStack) -> None:
    x = np.ones(3 * MB // 4, np.float32)
    response = post(limited_stack, npy_bytes(x), NPY, Accept=NPY)
    assert response.status_code == 200, response.text[:300]
    assert np.all(np.load(io.BytesIO(response.content)) == 3.5)


def test_body_over_the_configured_limit_is_413(limited_stack: RunningStack) -> None:
    response = post(limited_stack, npy_bytes(np.ones(9 * MB // 4, np.float32)), NPY)
    assert response.status_code == 413
    assert response.headers["Content-Type"] == "application/json"
    assert response.json() == {
        "error": "Request body is larger than 8 MB (SAGEMAKER_TFS_MAX_BODY_MB)"
    }
    assert post(limited_stack, b"1.0", "text/csv").json() == {"predictions": [3.5]}


def test_200_mb_to_an_inference_py_handler(tmp_path: Path) -> None:
    """The handler reads the whole body from ``data``, as sent."""
    shutil.copytree(MODEL, tmp_path / "model" / "half_plus_three")
    (tmp_path / "model" / "code").mkdir()
    (tmp_path / "model" / "code" / "inference.py").write_text(DIGEST_HANDLER)
    (tmp_path / "work").mkdir()
    body = np.random.default_rng(5).integers(0, 256, 200 * MB, np.uint8).tobytes()
    with running_stack(tmp_path / "model", tmp_path / "work") as stack:
        response = post(stack, body, "application/octet-stream")
    assert response.status_code == 200, response.text[:300]
    assert response.json() == {
        "bytes": len(body),
        "sha256": hashlib.sha256(body).hexdigest(),
        "content_length": len(body),
    }
