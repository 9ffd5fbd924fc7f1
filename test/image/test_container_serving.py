"""One container of the image under test (conftest.py says what is substituted), started with
``scripts/start.sh`` on a read-only model directory, called through ``scripts/curl.sh`` and
HTTP: content types, custom attributes, the binary fast path, errors, crashed children."""

from __future__ import annotations

import io
import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import requests
from image_scripts import REPO_ROOT, Container, Image, run_script, start_container
from local_ports import free_port
from PIL import Image as PILImage
from sdk_offline import sdk_client_answers

pytestmark = pytest.mark.slow
ATTRIBUTES = "X-Amzn-SageMaker-Custom-Attributes"
WORK_DIR = "/tmp/sagemaker-tfs"  # serve's work directory inside the image


@pytest.fixture(scope="module")
def container(image_under_test: Image, bin_dir: Path, models_dir: Path) -> Iterator[Container]:
    env = {"SAGEMAKER_TFS_DEFAULT_MODEL_NAME": "half_plus_three"}
    started = start_container(image_under_test, bin_dir, free_port(), models_dir, env)
    print(f"start.sh until /ping 200: {started.ready_after:.1f}s")
    yield started
    stopped = started.stop()
    assert stopped.returncode == 0, stopped.stderr


def post(container: Container, body: bytes | str, content_type: str, **headers: str):
    return container.invoke(body, content_type, **headers)


def npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def test_curl_script_examples_all_answer(container: Container) -> None:
    result = run_script("curl.sh", "--port", str(container.port), env=container.env, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("-- HTTP 200") == 7
    assert '"predictions": [3.5, 4.0, 5.5' in result.stdout


@pytest.mark.parametrize(
    ("content_type", "body", "expected"),
    [
        ("application/json", '{"instances": [1.0, 2.0, 5.0]}', [3.5, 4.0, 5.5]),
        ("application/json", "[[1.0], [2.0]]", [[3.5], [4.0]]),
        ("application/jsonlines", "[1.0, 2.0]\n[5.0, 6.0]\n", [[3.5, 4.0], [5.5, 6.0]]),
        ("text/csv", "1.0,2.0\n5.0,6.0\n", [[3.5, 4.0], [5.5, 6.0]]),
    ],
)
def test_json_jsonlines_and_csv(container: Container, content_type, body, expected) -> None:
    response = post(container, body, content_type)
    assert response.status_code == 200, response.text
    assert response.json()["predictions"] == expected


@pytest.mark.parametrize(
    ("accept", "content_type"),
    [
        ("application/jsonlines", "application/jsonlines"),
        ("application/json, application/jsonlines", "application/json"),
    ],
)
def test_accept_lists_answer_one_line(container: Container, accept: str, content_type) -> None:
    response = post(container, "[1.0, 2.0]", "application/json", Accept=accept)
    assert response.status_code == 200, response.text
    assert response.headers["Content-Type"] == content_type
    assert "\n" not in response.text
    assert json.loads(response.text) == {"predictions": [[3.5, 4.0]]}


def test_custom_attributes_pick_model_version_and_method(container: Container) -> None:
    other = post(
        container, "[2.0]", "application/json", **{ATTRIBUTES: "tfs-model-name=half_plus_two"}
    )
    assert other.json()["predictions"] == [[3.0]]
    version = {ATTRIBUTES: "tfs-model-name=half_plus_two,tfs-model-version=124"}
    assert post(container, "[2.0]", "application/json", **version).json()["predictions"] == [[3.0]]
    older = {ATTRIBUTES: "tfs-model-name=half_plus_two,tfs-model-version=123"}  # all served
    assert post(container, "[2.0]", "application/json", **older).json()["predictions"] == [[3.0]]
    missing = {ATTRIBUTES: "tfs-model-name=half_plus_two,tfs-model-version=122"}
    response = post(container, "[2.0]", "application/json", **missing)
    assert response.status_code == 404 and "122" in response.json()["error"]
    regress = {ATTRIBUTES: "tfs-model-name=half_plus_two,tfs-method=regress"}
    body = '{"signature_name": "regress_x_to_y", "examples": [{"x": 4.0}]}'
    response = post(container, body, "application/json", **regress)
    assert response.status_code == 200, response.text
    assert response.json()["results"] == [pytest.approx(4.0)]


def test_npy_in_npy_out(container: Container) -> None:
    values = np.array([1.0, 2.0, 5.0], dtype=np.float32)
    response = post(container, npy(values), "application/x-npy", Accept="application/x-npy")
    assert response.status_code == 200, response.text
    assert response.headers["Content-Type"] == "application/x-npy"
    answer = np.load(io.BytesIO(response.content), allow_pickle=False)
    np.testing.assert_array_equal(answer, values * 0.5 + 3)


def test_200_mb_npy_and_50_mb_csv(container: Container) -> None:
    """Asynchronous inference's sizes: nginx, njs, the service and the model server of the
    image carry them (the default limit is 1 GB)."""
    x = (np.arange(200 * 2**20 // 4) % 4093).astype(np.float32)
    response = container.invoke(npy(x), "application/x-npy", 600, Accept="application/x-npy")
    assert response.status_code == 200, response.text[:300]
    np.testing.assert_array_equal(np.load(io.BytesIO(response.content)), x * 0.5 + 3)

    values = (np.arange(5_200_000) % 1000).astype(np.float32) / 8
    text = "\n".join(f"{value:.6f}" for value in values) + "\n"
    assert len(text) > 50 * 2**20
    response = container.invoke(text.encode(), "text/csv", 600, Accept="application/json")
    assert response.status_code == 200, response.text[:300]
    predictions = np.array(json.loads(response.content)["predictions"], np.float32)
    np.testing.assert_array_equal(predictions, values * np.float32(0.5) + np.float32(3.0))


def test_jpeg_fast_path_matches_tensorflow_in_process(
    container: Container, models_dir: Path
) -> None:
    import tensorflow as tf

    rng = np.random.default_rng(7)
    pixels = rng.integers(0, 255, (224, 224, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    PILImage.fromarray(pixels).save(buffer, format="JPEG")
    jpeg = buffer.getvalue()
    headers = {ATTRIBUTES: "tfs-model-name=mobilenet_v2", "Accept": "application/x-npy"}
    response = post(container, jpeg, "image/jpeg", **headers)
    assert response.status_code == 200, response.text
    answer = np.load(io.BytesIO(response.content), allow_pickle=False)

    decoded = np.asarray(PILImage.open(io.BytesIO(jpeg)).convert("RGB"), dtype=np.float32)
    model = tf.saved_model.load(str(models_dir / "mobilenet_v2" / "1"))
    expected = model.signatures["serving_default"](input_1=tf.constant(decoded[None]))
    assert answer.shape == (1, 1000)
    np.testing.assert_allclose(answer, expected["predictions"].numpy(), rtol=1e-4, atol=1e-6)


def test_sagemaker_sdk_predictor_and_serializers(
    container: Container, sdk_python: Path, tmp_path: Path
) -> None:
    """The SDK's Predictor over its local-mode runtime client, as users call an endpoint. Only
    the SDK's probe of `docker` for the engine's address is answered by a stand-in (see
    test/sdk_offline.py); the serializers, the HTTP calls and the container are real."""
    client = REPO_ROOT / "test/image/sdk_client.py"
    answers = sdk_client_answers(sdk_python, client, str(container.port), scratch=tmp_path)
    assert answers == {
        "json": {"predictions": [3.5, 4.0, 5.5]},
        "json_list": {"predictions": [[3.5], [4.0]]},
        "custom_attributes": {"predictions": [[3.0]]},
        "csv": {"predictions": [[3.5, 4.0], [5.5, 6.0]]},
        "csv_out": [["3.5", "4"]],  # a bare list is one instance: its CSV answer one row
        "jsonlines": {"predictions": [[3.5, 4.0], [5.5, 6.0]]},
        "npy": [3.5, 4.0, 5.5],
    }


@pytest.mark.parametrize(
    ("content_type", "body", "status"),
    [
        ("application/json", "{oops", 400),
        ("text/csv", "1,2\n3", 400),
        ("text/csv", "9" * 5000, 400),  # beyond a double: a parse error, not a 500
        ("application/x-npy", "not numpy", 400),
        ("image/jpeg", "not a jpeg", 400),
        ("application/x-unknown", "abc", 415),
    ],
)
def test_bad_input_gets_4xx_json(container: Container, content_type, body, status) -> None:
    response = post(container, body, content_type)
    assert response.status_code == status, response.text
    assert response.json()["error"]


def test_nginx_own_errors_are_json(container: Container) -> None:
    """A Content-Length over the 1 GB limit is refused from the headers, before any body."""
    head = (
        "POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-npy\r\n"
        f"Content-Length: {1025 << 20}\r\nConnection: close\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", container.port), timeout=30) as sock:
        sock.sendall(head.encode())
        answer = sock.makefile("rb").read()
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert answer.endswith(
        b'{"error": "Request body is larger than 1024 MB (SAGEMAKER_TFS_MAX_BODY_MB)"}'
    )
    assert requests.get(container.url("/ping"), timeout=5).status_code == 200


def test_model_directory_is_mounted_read_only(container: Container, models_dir: Path) -> None:
    before = sorted(p.name for p in models_dir.rglob("*"))
    out = container.exec("sh", "-c", "touch /opt/ml/model/x 2>&1; echo $?", check=False)
    assert "Read-only file system" in out
    assert sorted(p.name for p in models_dir.rglob("*")) == before


def zombies(container: Container) -> list[str]:
    """Processes in the container that exited and were never waited for."""
    out = container.exec(
        "sh", "-c", "for f in /proc/[0-9]*/stat; do cat $f 2>/dev/null; echo; done"
    )
    return [line for line in out.splitlines() if line.split(") ", 1)[-1].startswith("Z")]


@pytest.mark.parametrize(
    ("child", "pid_command"),
    [
        ("nginx", f"cat {WORK_DIR}/nginx.pid"),
        ("model-server", "grep -l 'model[-]server' /proc/[0-9]*/cmdline | head -n 1 | cut -d/ -f3"),
    ],
)
def test_killed_child_is_back_within_seconds(container: Container, child: str, pid_command: str):
    pid = container.exec("sh", "-c", pid_command).strip()
    assert pid.isdigit(), pid
    container.exec("sh", "-c", f"kill -9 {pid}")
    killed_at = time.monotonic()
    noticed = f"(pid {pid}) was killed by SIGKILL"
    until(lambda: noticed in container.logs(), timeout=10, what=f"{child} exit noticed")
    until(lambda: answers(container), timeout=30, what=f"{child} back")
    back_after = time.monotonic() - killed_at
    assert back_after < 15, f"{child} back after {back_after:.1f}s"
    time.sleep(1)  # the supervisor reaps once per 0.2 s poll
    assert zombies(container) == []


def answers(container: Container) -> bool:
    try:
        return post(container, '{"instances": [1.0]}', "application/json").status_code == 200
    except requests.RequestException:
        return False


def until(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting: {what}"
        time.sleep(0.2)
