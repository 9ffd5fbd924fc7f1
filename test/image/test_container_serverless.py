"""SageMaker Serverless Inference's constraints on containers of the image under test
(conftest.py says what is substituted): ``start.sh --serverless 2g`` runs them with a read-only
root filesystem, only ``/tmp`` writable (a tmpfs) and 2 GB of memory, CPU only.

The stack writes everything it makes at start-up (configs, sockets, pid files, nginx's
temporary files, gunicorn's heartbeat files, the packages of ``requirements.txt``) under its
work directory ``/tmp/sagemaker-tfs``, and serves JSON, CSV and an image (an ``inference.py``
model whose ``requirements.txt`` is installed at start-up: test_container_user_code.py).
``SAGEMAKER_MODEL_SERVER_TIMEOUT`` reaches the model server's command line (the one the real
``tensorflow_model_server`` gets), and ``SAGEMAKER_TFS_MAX_BODY_MB`` bounds the body.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from image_scripts import Container, Image, start_container
from local_ports import free_port
from PIL import Image as PILImage

pytestmark = pytest.mark.slow
MEMORY = "2g"
WORK_DIR = "/tmp/sagemaker-tfs"
ATTRIBUTES = "X-Amzn-SageMaker-Custom-Attributes"


@pytest.fixture(scope="module")
def container(image_under_test: Image, bin_dir: Path, models_dir: Path) -> Iterator[Container]:
    env = {
        "SAGEMAKER_TFS_DEFAULT_MODEL_NAME": "half_plus_three",
        "SAGEMAKER_MODEL_SERVER_TIMEOUT": "20",
        "SAGEMAKER_TFS_MAX_BODY_MB": "6",  # Serverless sends at most 4 MB
    }
    started = start_container(
        image_under_test, bin_dir, free_port(), models_dir, env, serverless_memory=MEMORY
    )
    print(f"start.sh --serverless {MEMORY} until /ping 200: {started.ready_after:.1f}s")
    yield started
    stopped = started.stop()
    assert stopped.returncode == 0, stopped.stderr


def writable(container: Container, directory: str) -> bool:
    probe = f"{directory}/.write-probe"
    written = container.exec("sh", "-c", f"touch {probe} && rm {probe} && echo yes", check=False)
    return written.strip() == "yes"


def test_only_tmp_is_writable_and_memory_is_limited(container: Container) -> None:
    assert writable(container, "/tmp")
    for directory in ("/", "/opt/venv", "/etc/nginx", "/var/tmp", "/run", "/root", "/opt/ml"):
        assert not writable(container, directory), directory
    limit = container.exec(
        "sh", "-c", "cat /sys/fs/cgroup/memory.max 2>/dev/null || "
        "cat /sys/fs/cgroup/memory/memory.limit_in_bytes"
    )  # fmt: skip
    assert int(limit) == 2 << 30
    assert "memory limit 2048 MiB" in container.logs()  # read at start-up, in any cgroup layout


def test_everything_written_at_start_up_is_under_the_work_dir(container: Container) -> None:
    """The stand-in model server's TensorFlow (conftest.py) comes with Keras, which would
    write its settings to /tmp/.keras: the model server imports TensorFlow without it
    (``model_server.main.leave_out_unused_packages``), as TF Serving's binary has none."""
    assert container.exec("ls", "-A", "/tmp").split() == ["sagemaker-tfs"]
    made = set(container.exec("ls", "-A", WORK_DIR).split())
    assert {"nginx.conf", "nginx.pid", "stack.json", "models.config", "gunicorn.sock"} <= made
    assert "nginx_client_body" in made


def test_serves_json_and_csv(container: Container) -> None:
    response = container.invoke('{"instances": [1.0, 2.0, 5.0]}', "application/json")
    assert response.status_code == 200, response.text
    assert response.json() == {"predictions": [3.5, 4.0, 5.5]}
    response = container.invoke("1.0\n2.0\n5.0\n", "text/csv")
    assert response.status_code == 200, response.text
    assert response.json() == {"predictions": [3.5, 4.0, 5.5]}


def test_serves_an_image(container: Container) -> None:
    pixels = np.random.default_rng(3).integers(0, 255, (224, 224, 3), dtype=np.uint8)
    jpeg = io.BytesIO()
    PILImage.fromarray(pixels).save(jpeg, format="JPEG")
    headers = {ATTRIBUTES: "tfs-model-name=mobilenet_v2", "Accept": "application/x-npy"}
    response = container.invoke(jpeg.getvalue(), "image/jpeg", **headers)
    assert response.status_code == 200, response.text
    answer = np.load(io.BytesIO(response.content), allow_pickle=False)
    assert answer.shape == (1, 1000)
    assert answer.sum() == pytest.approx(1.0, abs=1e-3)  # MobileNetV2 ends in a softmax


def test_the_model_server_gets_the_umbrella_timeout(container: Container) -> None:
    """The supervisor builds the command line of ``/usr/bin/tensorflow_model_server`` (the
    real binary's path in the image) with the timeout of SAGEMAKER_MODEL_SERVER_TIMEOUT."""
    started = [line for line in container.logs().splitlines() if "started model-server[0]" in line]
    assert started and "/usr/bin/tensorflow_model_server " in started[-1]
    assert "--rest_api_timeout_in_ms=20000" in started[-1].split()
    command_lines = container.exec("sh", "-c", "cat /proc/[0-9]*/cmdline | tr '\\0' ' '")
    assert "--rest_api_timeout_in_ms=20000" in command_lines
    assert "proxy_read_timeout 25s;" in container.exec("cat", f"{WORK_DIR}/nginx.conf")


def test_a_body_over_the_configured_limit_is_a_413(container: Container) -> None:
    body = np.zeros(7 * 2**20 // 4, np.float32)
    buffer = io.BytesIO()
    np.save(buffer, body)
    response = container.invoke(buffer.getvalue(), "application/x-npy")
    assert response.status_code == 413
    assert response.json() == {
        "error": "Request body is larger than 6 MB (SAGEMAKER_TFS_MAX_BODY_MB)"
    }
