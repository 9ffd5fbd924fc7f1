"""SageMaker's variables reaching ``serve`` in a container of the image under test (conftest.py
says what is substituted): ``SAGEMAKER_BIND_TO_PORT``, ``SAGEMAKER_SAFE_PORT_RANGE`` and
batching, passed by ``scripts/start.sh`` from the caller's environment."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests
from image_scripts import Container, Image, start_container
from local_ports import free_port

pytestmark = pytest.mark.slow
BIND_PORT = 8085
SAFE_RANGE = (12000, 12010)
SETTINGS = {
    "SAGEMAKER_BIND_TO_PORT": str(BIND_PORT),
    "SAGEMAKER_SAFE_PORT_RANGE": f"{SAFE_RANGE[0]}-{SAFE_RANGE[1]}",
    "SAGEMAKER_TFS_ENABLE_BATCHING": "true",
    "SAGEMAKER_TFS_MAX_BATCH_SIZE": "4",
    "SAGEMAKER_TFS_BATCH_TIMEOUT_MICROS": "300000",
    "SAGEMAKER_TFS_NUM_BATCH_THREADS": "1",
    "SAGEMAKER_TFS_LOG_LEVEL": "DEBUG",  # the model server logs each batch it runs
}


@pytest.fixture(scope="module")
def container(image_under_test: Image, bin_dir: Path, models_dir: Path) -> Iterator[Container]:
    env = {**SETTINGS, "SAGEMAKER_TFS_DEFAULT_MODEL_NAME": "half_plus_three"}
    started = start_container(image_under_test, bin_dir, free_port(), models_dir, env)
    yield started
    assert started.stop().returncode == 0


def listening_ports(container: Container) -> set[int]:
    """TCP ports in LISTEN state inside the container (from /proc, no tools needed)."""
    table = container.exec("cat", "/proc/net/tcp", "/proc/net/tcp6")
    ports = set()
    for line in table.splitlines():
        fields = line.split()
        if len(fields) > 3 and fields[3] == "0A":
            ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def test_nginx_binds_the_port_sagemaker_gives(container: Container) -> None:
    ports = listening_ports(container)
    assert BIND_PORT in ports and 8080 not in ports
    assert requests.get(container.url("/ping"), timeout=5).status_code == 200


def test_internal_ports_come_from_the_safe_range(container: Container) -> None:
    low, high = SAFE_RANGE
    internal = listening_ports(container) - {BIND_PORT}
    assert internal, "no model server port found"
    assert all(low <= port <= high for port in internal), sorted(internal)


def test_batching_settings_are_written_and_requests_are_batched(container: Container) -> None:
    logs = container.logs()
    assert "max_batch_size { value: 4 }" in logs
    assert "batch_timeout_micros { value: 300000 }" in logs

    def call(value: float) -> list:
        response = requests.post(
            container.url("/invocations"),
            json={"instances": [value]},
            timeout=60,
        )
        assert response.status_code == 200, response.text
        return response.json()["predictions"]

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(call, [float(i) for i in range(8)]))
    assert answers == [[i * 0.5 + 3] for i in range(8)]
    sizes = [
        int(line.split("tasks=")[1].split()[0])
        for line in container.logs().splitlines()
        if "Ran batch: tasks=" in line
    ]
    assert sizes and max(sizes) >= 2, f"no merged batch: {sizes}"
