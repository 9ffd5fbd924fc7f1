"""The metrics path and the access log of a container of the image (conftest.py says what is
substituted): each family moves with real requests, read with ``prometheus_client``'s parser;
the access log is in the container's log."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import requests
from image_scripts import Container, Image, start_container
from local_ports import free_port
from metrics_scrape import Scrape, settled_scrape, wait_for_samples

pytestmark = pytest.mark.slow
MODEL = "half_plus_three"
REQUESTS = "sagemaker_tfs_requests_total"


@pytest.fixture(scope="module")
def container(image_under_test: Image, bin_dir: Path, models_dir: Path) -> Iterator[Container]:
    env = {"SAGEMAKER_TFS_DEFAULT_MODEL_NAME": MODEL, "SAGEMAKER_TFS_ACCESS_LOG": "json"}
    started = start_container(image_under_test, bin_dir, free_port(), models_dir, env)
    yield started
    stopped = started.stop()
    assert stopped.returncode == 0, stopped.stderr


def npy(values: list[float]) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.array(values, dtype=np.float32))
    return buffer.getvalue()


def post(container: Container, body: bytes | str, content_type: str) -> int:
    url = container.url("/invocations")
    headers = {"Content-Type": content_type}
    return requests.post(url, data=body, headers=headers, timeout=60).status_code


def test_the_families_move_with_requests(container: Container) -> None:
    url = container.url("/metrics")
    before = settled_scrape(url)
    statuses = [post(container, '{"instances": [1.0, 2.0]}', "application/json") for _ in range(3)]
    statuses += [post(container, npy([1.0, 2.0]), "application/x-npy") for _ in range(2)]
    statuses.append(post(container, "1,2\nx", "text/csv"))  # 400 from the njs conversion
    assert statuses == [200] * 5 + [400]
    total = before.value(REQUESTS) + 6
    # The ready gauge waits for every child, the stream server too, which /ping does not wait
    # for: on a loaded machine it can lag the first answers (waited for here, checked below).
    after = wait_for_samples(
        url,
        lambda found: found.value(REQUESTS) >= total and found.value("sagemaker_tfs_ready") == 1,
    )

    def moved(name: str, **labels: str) -> float:
        return after.value(name, **labels) - before.value(name, **labels)

    assert moved(REQUESTS, model=MODEL, route="njs", status_class="2xx") == 3
    assert moved(REQUESTS, model=MODEL, route="njs", status_class="4xx") == 1
    assert moved(REQUESTS, model=MODEL, route="fast_path", status_class="2xx") == 2
    assert moved("sagemaker_tfs_request_duration_seconds_count", route="fast_path") == 2
    assert moved("sagemaker_tfs_request_duration_seconds_bucket", route="njs", le="+Inf") == 4
    call = "sagemaker_tfs_model_server_call_seconds_count"
    assert (moved(call, route="njs"), moved(call, route="fast_path")) == (3, 2)
    assert moved("sagemaker_tfs_request_size_bytes_sum", route="fast_path") > 2 * 128
    assert moved("sagemaker_tfs_response_size_bytes_count", route="njs") == 4
    assert after.samples("sagemaker_tfs_service_requests_in_flight")
    # The supervisor's own, and the model server's passed through under TF Serving's names.
    assert after.value("sagemaker_tfs_ready") == 1
    assert (
        after.value("sagemaker_tfs_child_ready") == 4
    )  # nginx, gunicorn, the stream server, one model server
    assert after.value("sagemaker_tfs_child_restarts_total") == 0
    assert after.value("sagemaker_tfs_model_server_memory_bytes") > 50 << 20
    served = ":tensorflow:serving:request_count_total"
    assert after.value(served, model_server="model-server[0]", model_name=MODEL) >= 5


def test_the_access_log_is_in_the_container_log(container: Container) -> None:
    assert requests.get(container.url("/ping"), timeout=10).status_code == 200
    assert post(container, '{"instances": [7.0]}', "application/json") == 200
    lines = [
        json.loads(line) for line in container.logs().splitlines() if line.startswith('{"time": "')
    ]
    assert lines and all(line["path"] != "/ping" for line in lines)
    last = lines[-1]
    assert (last["method"], last["path"], last["status"], last["model"]) == (
        "POST", "/invocations", 200, MODEL,
    )  # fmt: skip


def test_metrics_can_be_scraped_by_prometheus_text_rules(container: Container) -> None:
    """Every family once, every sample's family declared (what Prometheus's parser checks)."""
    text = requests.get(container.url("/metrics"), timeout=30).text
    found = Scrape(text)
    declared = {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")}
    assert len(declared) == len(found.families) == text.count("# TYPE ")
