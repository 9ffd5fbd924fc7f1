"""The SageMaker Python SDK v3's local container on the image under test:
``ModelBuilder(mode=Mode.LOCAL_CONTAINER, model_server=ModelServer.TENSORFLOW_SERVING)`` with a
plain SavedModel directory, deployed, called with the SDK's JSON, CSV and NumPy serializers and
deleted; and the model it built run as a local Batch Transform by ``sagemaker.core``'s
``Transformer`` (``sdk_v3_local_container.py``, run in the v3 virtualenv).

The SDK starts containers two ways: through the Docker Engine API (docker-py, which
``DOCKER_HOST`` points at a ``podman system service`` this test starts) and through
``docker-compose`` (podman-compose from the v2 SDK virtualenv, with podman as ``docker``). Both
use a ``containers.conf`` of this run that adds an annotation to every container created, so
that whatever the SDK leaves behind is found and removed, even when the test fails. No AWS is
reached: region, dummy credentials, telemetry off (``test/sdk_offline.py``), an explicit role
ARN with ``SAGEMAKER_VALIDATE_ROLE=false`` and an ``s3_model_data_url`` nothing is uploaded to.

The SDK publishes its TensorFlow Serving container on 8501 and calls that port, always: the
deploy test skips when 8501 is taken on this machine.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from engine import CONTAINERS_CONF, podman
from image_scripts import REPO_ROOT, Image, tail
from local_ports import free_port
from sdk_offline import offline_sdk_env, sdk_bin_dir

pytestmark = pytest.mark.slow
CLIENT = REPO_ROOT / "test" / "image" / "sdk_v3_local_container.py"
HALF_PLUS_THREE = REPO_ROOT / "test" / "resources" / "models" / "half_plus_three"
# sagemaker/serve/model_server/tensorflow_serving/server.py: ports={"8501/tcp": 8501}.
SDK_TFS_PORT = 8501
RUN_KEY = "sagemaker-tfs-test-run"
VALUES = [1.0, 2.0, 5.0, -3.25, 1024.5]
TRANSFORM_INPUT = {"first.csv": [1.0, 2.0, 5.0], "second.csv": [10.0, -4.0, 0.125]}
LOCAL_MODE_CONFIG = """\
local:
  serving_port: {port}
  container_config:
    labels:
      {key}: "{value}"
"""


@dataclass(frozen=True)
class EngineService:
    """A ``podman system service`` of this run: its socket, its ``containers.conf`` and the
    annotation value every container created under that configuration carries."""

    socket: Path
    containers_conf: Path
    run_id: str


def port_is_free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def annotated_containers(run_id: str) -> list[str]:
    """IDs of the containers (any state) annotated with this run's id."""
    ids = podman("ps", "--all", "--quiet").split()
    if not ids:
        return []
    template = '{{.Id}} {{index .Config.Annotations "' + RUN_KEY + '"}}'
    listing = podman("inspect", "--format", template, *ids, check=False)
    return [line.split()[0] for line in listing.splitlines() if line.split()[1:] == [run_id]]


def remove_annotated_containers(run_id: str) -> None:
    for container in annotated_containers(run_id):
        podman("rm", "--force", "--time", "0", container, check=False)


def run_containers_conf(directory: Path, run_id: str) -> Path:
    """The project's ``containers.conf`` plus an annotation of this run on every container."""
    text = CONTAINERS_CONF.read_text()
    annotation = f'annotations = ["{RUN_KEY}={run_id}"]\n'
    assert "[containers]\n" in text and "annotations" not in text
    path = directory / "containers.conf"
    path.write_text(text.replace("[containers]\n", "[containers]\n" + annotation, 1))
    return path


def wait_for_engine_api(path: Path, process: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, f"podman system service exited {process.returncode}"
        try:
            with socket.socket(socket.AF_UNIX) as client:
                client.connect(str(path))
                client.sendall(b"GET /_ping HTTP/1.0\r\n\r\n")
                if client.recv(64).startswith(b"HTTP/1.0 200"):
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"podman system service did not answer on {path} in {timeout}s")


@pytest.fixture
def sdk_port() -> int:
    if not port_is_free(SDK_TFS_PORT):
        pytest.skip(
            f"port {SDK_TFS_PORT} is taken: SDK v3 publishes its TensorFlow Serving container "
            f"on {SDK_TFS_PORT}, always"
        )
    return SDK_TFS_PORT


@pytest.fixture
def engine_service(tmp_path: Path) -> Iterator[EngineService]:
    """A Docker Engine API for docker-py: ``podman system service`` on a socket of this test,
    stopped and its containers removed afterwards."""
    run_id = uuid.uuid4().hex[:12]
    service = EngineService(tmp_path / "podman.sock", run_containers_conf(tmp_path, run_id), run_id)
    with open(tmp_path / "podman-service.log", "wb") as log:
        process = subprocess.Popen(
            ["podman", "system", "service", "--time=0", f"unix://{service.socket}"],
            env={**os.environ, "CONTAINERS_CONF": str(service.containers_conf)},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for_engine_api(service.socket, process)
        yield service
    finally:
        remove_annotated_containers(run_id)
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def write_local_mode_config(env: dict[str, str], serving_port: int, run_id: str) -> None:
    """``~/.sagemaker/config.yaml``: docker-compose's port, and this run's label on what it
    starts."""
    config = Path(env["HOME"]) / ".sagemaker" / "config.yaml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(LOCAL_MODE_CONFIG.format(port=serving_port, key=RUN_KEY, value=run_id))


@pytest.fixture
def sdk_v3_env(engine_service: EngineService, sdk_python: Path, tmp_path: Path) -> dict[str, str]:
    """The client's whole environment. ``HOME`` is to hold the local-mode settings
    (``write_local_mode_config``); ``docker-compose`` is the podman-compose of the v2 SDK
    virtualenv."""
    home = tmp_path / "home"
    home.mkdir()
    bin_dir = sdk_bin_dir(tmp_path / "bin")
    (bin_dir / "docker-compose").symlink_to(sdk_python.parent / "podman-compose")
    env = {
        "PATH": f"{bin_dir}:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": str(home),
        "CONTAINERS_CONF": str(engine_service.containers_conf),
        "DOCKER_HOST": f"unix://{engine_service.socket}",
        "SAGEMAKER_VALIDATE_ROLE": "false",
    }
    env.update(offline_sdk_env(tmp_path / "sdk_config"))
    return env


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    """A SavedModel directory as TensorFlow writes it: version directories at the top."""
    path = tmp_path / "model"
    shutil.copytree(HALF_PLUS_THREE, path)
    return path


def run_client(python: Path, env: dict[str, str], result_file: Path, *args: str) -> dict:
    result = subprocess.run(
        [str(python), str(CLIENT), str(result_file), *args],
        env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert result.returncode == 0, tail(result.stdout + result.stderr, 60)
    return json.loads(result_file.read_text())


def test_model_builder_local_container(
    sdk_port: int,
    image_under_test: Image,
    sdk_v3_python: Path,
    sdk_v3_env: dict[str, str],
    engine_service: EngineService,
    model_dir: Path,
    tmp_path: Path,
) -> None:
    # docker-compose's copy cannot take 8501 and the SDK's /ping there reaches the first one.
    write_local_mode_config(sdk_v3_env, sdk_port, engine_service.run_id)
    label = f"{RUN_KEY}={engine_service.run_id}"
    answers = run_client(
        sdk_v3_python, sdk_v3_env, tmp_path / "result.json",
        "deploy", image_under_test.name, str(model_dir), label, json.dumps(VALUES),
    )  # fmt: skip
    expected = [0.5 * value + 3 for value in VALUES]
    assert answers["json"]["predictions"] == pytest.approx(expected)
    assert answers["csv"]["predictions"] == pytest.approx(expected)
    assert answers["npy"]["predictions"] == pytest.approx(expected)
    assert answers["error"] == {
        "status": 400,
        "body": {"error": "Input x expects DT_FLOAT, got an array of <U12"},
    }
    assert annotated_containers(engine_service.run_id) == []


def test_local_batch_transform_of_the_built_model(
    image_under_test: Image,
    sdk_v3_python: Path,
    sdk_v3_env: dict[str, str],
    engine_service: EngineService,
    model_dir: Path,
    tmp_path: Path,
) -> None:
    write_local_mode_config(sdk_v3_env, free_port(), engine_service.run_id)
    input_dir, output_dir = tmp_path / "input", tmp_path / "output"
    input_dir.mkdir()
    for name, values in TRANSFORM_INPUT.items():
        (input_dir / name).write_text("".join(f"{value}\n" for value in values))
    run_client(
        sdk_v3_python, sdk_v3_env, tmp_path / "result.json",
        "transform", image_under_test.name, str(model_dir),
        f"{RUN_KEY}={engine_service.run_id}", str(input_dir), str(output_dir),
    )  # fmt: skip
    assert sorted(path.name for path in output_dir.iterdir()) == ["first.csv.out", "second.csv.out"]
    for name, values in TRANSFORM_INPUT.items():
        lines = (output_dir / f"{name}.out").read_text().splitlines()
        records = [float(line) for line in lines if line.strip()]
        assert records == pytest.approx([0.5 * value + 3 for value in values]), name
    assert annotated_containers(engine_service.run_id) == []
