"""``/ping`` of the image stays 200 and fast under issue 36's two loads (``ping_under_load.py``):
compute_heavy from 16 clients, 2 MB JSON bodies from 48, a few seconds each.

In the image the model server is ``/usr/bin/tensorflow_model_server`` (the stand-in here,
conftest.py), so the supervisor's health checks go to its gRPC socket (GetModelStatus), not to
the Python model server's status socket: the same path as with TF Serving's binary.

``/ping`` is sampled from two places. Inside the container (``podman exec``, every 50 ms), the
stack's own answer: a few ms, and every sample must be 200 well under a second. From this host
through the published port, as SageMaker's agent calls it: every sample 200 within SageMaker's
2 s. The host's samples also carry this machine's path into the container (podman's bridge and
NAT, on two cores the load keeps full), which delays packets by itself: measured under the heavy
load, 1,000 samples inside answered in at most 8 ms while samples from the host through the
port, and through the container's own address, took up to 1.5 s, most of it before nginx saw
the request or after it answered. So only the inside samples are held to the tight bound.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from engine import engine_env
from image_scripts import REPO_ROOT, Container, Image, start_container
from local_ports import free_port
from ping_under_load import (
    HEAVY_CLIENTS,
    LARGE_BODY_CLIENTS,
    PING_TIMEOUT_SECONDS,
    heavy_batch_body,
    large_json_body,
    run_load,
)

pytestmark = pytest.mark.slow

LOAD_SECONDS = 8.0
INSIDE_PING_LIMIT_SECONDS = 1.0

# Run by the container's Python: /ping every 50 ms for argv[1] seconds, then the samples as
# JSON lines of [status, seconds] (status null when there was no answer within 2 s).
INSIDE_SAMPLER = """
import http.client, json, sys, time
samples, started = [], time.monotonic()
while time.monotonic() - started < float(sys.argv[1]):
    sent = time.monotonic()
    try:
        connection = http.client.HTTPConnection("127.0.0.1", 8080, timeout=2)
        connection.request("GET", "/ping")
        status = connection.getresponse().status
        connection.close()
    except OSError:
        status = None
    samples.append([status, time.monotonic() - sent])
    time.sleep(0.05)
print(json.dumps(samples))
"""


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


def _sample_pings_inside(container: Container, seconds: float) -> subprocess.Popen[str]:
    command = ["podman", "exec", container.image.container_name, "python3", "-c", INSIDE_SAMPLER]
    return subprocess.Popen(
        [*command, str(seconds)], env=engine_env(), stdout=subprocess.PIPE, text=True
    )


def _check(container: Container, body: bytes, clients: int, model: str) -> None:
    attributes = {"X-Amzn-SageMaker-Custom-Attributes": f"tfs-model-name={model}"}
    inside_sampler = _sample_pings_inside(container, LOAD_SECONDS)
    run = run_load(container.url(""), body, clients, LOAD_SECONDS, attributes)
    output, _ = inside_sampler.communicate(timeout=PING_TIMEOUT_SECONDS + 30)
    inside = json.loads(output)
    slowest_inside = max((seconds for _, seconds in inside), default=0.0)
    print(
        f"container ping under load, {model} x{clients}: {run.summary()}; inside: "
        f"{len(inside)} samples, slowest {slowest_inside * 1000:.0f} ms"
    )
    assert run.statuses["200"] > 0 and sum(run.statuses.values()) >= clients, run.summary()
    assert run.pings and not run.ping_misses, f"{run.summary()}; misses: {run.ping_misses[:5]}"
    inside_misses = [
        (status, seconds)
        for status, seconds in inside
        if status != 200 or seconds >= INSIDE_PING_LIMIT_SECONDS
    ]
    assert inside and not inside_misses, f"inside misses: {inside_misses[:5]}"


def test_ping_under_a_compute_heavy_model(container: Container) -> None:
    _check(container, heavy_batch_body(), HEAVY_CLIENTS, "compute_heavy")


def test_ping_under_2_mb_json_bodies(container: Container) -> None:
    _check(container, large_json_body(), LARGE_BODY_CLIENTS, "half_plus_three")
