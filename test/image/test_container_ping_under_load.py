"""``/ping`` of the image stays 200 and fast under issue 36's two loads (``ping_under_load.py``):
compute_heavy from 16 clients, 2 MB JSON bodies from 48, a few seconds each.

In the image the model server is ``/usr/bin/tensorflow_model_server`` (the stand-in here,
conftest.py), so the supervisor's health checks go to its gRPC socket (GetModelStatus), not to
the Python model server's status socket: the same path as with TF Serving's binary.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from image_scripts import REPO_ROOT, Container, Image, start_container
from local_ports import free_port
from ping_under_load import (
    HEAVY_CLIENTS,
    LARGE_BODY_CLIENTS,
    heavy_batch_body,
    large_json_body,
    run_load,
)

pytestmark = pytest.mark.slow

LOAD_SECONDS = 8.0
PING_LIMIT_SECONDS = 1.0


@pytest.fixture(scope="module")
def container(
    image_under_test: Image, bin_dir: Path, test_models, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Container]:
    root = tmp_path_factory.mktemp("models")
    shutil.copytree(REPO_ROOT / "test/resources/models/half_plus_three", root / "half_plus_three")
    shutil.copytree(Path(test_models("compute_heavy")), root / "compute_heavy")
    env = {"SAGEMAKER_TFS_DEFAULT_MODEL_NAME": "half_plus_three"}
    started = start_container(image_under_test, bin_dir, free_port(), root, env)
    yield started
    stopped = started.stop()
    assert stopped.returncode == 0, stopped.stderr


def _check(container: Container, body: bytes, clients: int, model: str) -> None:
    attributes = {"X-Amzn-SageMaker-Custom-Attributes": f"tfs-model-name={model}"}
    run = run_load(container.url(""), body, clients, LOAD_SECONDS, attributes)
    print(f"container ping under load, {model} x{clients}: {run.summary()}")
    assert run.statuses["200"] > 0 and sum(run.statuses.values()) >= clients, run.summary()
    misses = [s for s in run.pings if s.status != 200 or s.seconds >= PING_LIMIT_SECONDS]
    assert run.pings and not misses, f"{run.summary()}; misses: {misses[:5]}"


def test_ping_under_a_compute_heavy_model(container: Container) -> None:
    _check(container, heavy_batch_body(), HEAVY_CLIENTS, "compute_heavy")


def test_ping_under_2_mb_json_bodies(container: Container) -> None:
    _check(container, large_json_body(), LARGE_BODY_CLIENTS, "half_plus_three")
