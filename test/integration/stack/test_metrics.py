"""The metrics path and the access log on host stacks (real nginx, gunicorn, model servers):
each family moves with real requests, read with ``prometheus_client``'s parser."""

from __future__ import annotations

import concurrent.futures
import io
import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import requests
from local_ports import free_port
from metrics_scrape import Scrape, scrape, settled_scrape, wait_for_samples
from whole_stack import Stack, StartStack, running_stack, stack_with_code, wait_for

pytestmark = pytest.mark.slow

MODEL = "half_plus_three"
REQUESTS = "sagemaker_tfs_requests_total"
HIDDEN_HEADERS = ("X-SageMaker-TFS-Route", "X-SageMaker-TFS-Model", "X-SageMaker-TFS-Version")


def npy(values: list[float]) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.array(values, dtype=np.float32))
    return buffer.getvalue()


def access_lines(stack: Stack) -> list[str]:
    """The access log's lines (nginx writes them to its standard output, the stack's log)."""
    return [line for line in stack.log_text().splitlines() if line.startswith('{"time": "')]


def counted(stack: Stack, total: float) -> Scrape:
    """A scrape once ``total`` invocations have been counted (nginx's lines are read in batches)."""
    found = wait_for_samples(f"{stack.url}/metrics", lambda s: s.value(REQUESTS) >= total)
    assert found.value(REQUESTS) == total, found.text
    return found


@pytest.fixture(scope="module")
def plain_stack(resources_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """One model, no inference.py: the njs conversions and the fast path; a JSON access log."""
    work = tmp_path_factory.mktemp("metrics")
    env = {"SAGEMAKER_TFS_ACCESS_LOG": "json"}
    with running_stack(resources_dir / "models", work, env) as stack:
        yield stack


def test_invocations_are_counted_by_model_route_and_status(plain_stack: Stack) -> None:
    stack = plain_stack
    before = settled_scrape(f"{stack.url}/metrics")
    bodies = [stack.post('{"instances": [1.0, 2.0]}') for _ in range(3)]
    bodies += [stack.post(npy([1.0, 5.0]), "application/x-npy") for _ in range(2)]
    bodies.append(stack.post(b"not npy", "application/x-npy"))  # 400 from the fast path
    bodies.append(stack.post("[1]", **{"X-Amzn-SageMaker-Custom-Attributes": "tfs-model-name=@"}))
    bodies.append(stack.post("1,2\nx", "text/csv"))  # 400 from the njs conversion
    assert [r.status_code for r in bodies] == [200] * 5 + [400, 400, 400]
    for response in bodies:  # the service's notes to nginx do not reach the client
        assert not any(name in response.headers for name in HIDDEN_HEADERS)
    after = counted(stack, before.value(REQUESTS) + len(bodies))

    def moved(name: str, **labels: str) -> float:
        return after.value(name, **labels) - before.value(name, **labels)

    assert moved(REQUESTS, model=MODEL, route="njs", status_class="2xx") == 3
    assert moved(REQUESTS, model=MODEL, route="fast_path", status_class="2xx") == 2
    assert moved(REQUESTS, model=MODEL, route="fast_path", status_class="4xx") == 1
    assert moved(REQUESTS, model="", route="njs", status_class="4xx") == 1  # no valid name
    assert moved(REQUESTS, model=MODEL, route="njs", status_class="4xx") == 1
    duration = "sagemaker_tfs_request_duration_seconds"
    assert moved(f"{duration}_count", model=MODEL, route="njs") == 4
    assert moved(f"{duration}_bucket", model=MODEL, route="fast_path", le="+Inf") == 3
    assert moved(f"{duration}_sum", model=MODEL, route="fast_path") > 0
    # The model server calls: nginx's for the njs conversions, the service's for the fast
    # path (the unreadable .npy never reached the model server), one family.
    call = "sagemaker_tfs_model_server_call_seconds"
    assert moved(f"{call}_count", route="njs") == 3
    assert moved(f"{call}_count", route="fast_path") == 2
    sizes = "sagemaker_tfs_request_size_bytes"
    assert moved(f"{sizes}_count", route="fast_path") == 3
    assert moved(f"{sizes}_sum", route="fast_path") > 2 * len(npy([1.0, 5.0]))
    assert moved("sagemaker_tfs_response_size_bytes_count", route="njs") == 5
    assert after.value("sagemaker_tfs_service_requests_in_flight") == 0
    assert after.samples("sagemaker_tfs_service_requests_in_flight")


def test_a_csv_number_the_njs_cannot_write_exactly_goes_to_the_service(plain_stack: Stack) -> None:
    """More than 15 significant digits spelled loosely (tensorflow_serving.js's HandOver): the
    njs does not convert it (its floats are not Python's), the service does."""
    stack = plain_stack
    before = settled_scrape(f"{stack.url}/metrics")
    response = stack.post("+1.2345678901234567\n", "text/csv")
    assert response.status_code == 200, response.text
    assert response.json()["predictions"] == [pytest.approx(3.6172839)]
    after = counted(stack, before.value(REQUESTS) + 1)
    assert after.value(REQUESTS, route="njs") == before.value(REQUESTS, route="njs")
    moved = after.value(REQUESTS, model=MODEL, status_class="2xx")
    assert moved - before.value(REQUESTS, model=MODEL, status_class="2xx") == 1


def test_no_invocation_is_lost_under_concurrent_load(plain_stack: Stack) -> None:
    """nginx's lines reach the supervisor through a pipe: none is dropped under a burst."""
    before = settled_scrape(f"{plain_stack.url}/metrics").value(REQUESTS)
    session = requests.Session()
    adapter = requests.adapters.HTTPAdapter(pool_maxsize=32)
    session.mount("http://", adapter)

    def post(_: int) -> int:
        url = f"{plain_stack.url}/invocations"
        return session.post(url, data='{"instances": [1.0]}', timeout=60).status_code

    with concurrent.futures.ThreadPoolExecutor(32) as pool:
        statuses = list(pool.map(post, range(600)))
    assert statuses == [200] * 600
    counted(plain_stack, before + 600)


def test_the_stack_reports_its_processes(plain_stack: Stack) -> None:
    found = scrape(f"{plain_stack.url}/metrics")
    children = {s.labels["child"] for s in found.samples("sagemaker_tfs_child_ready")}
    assert children == {"nginx", "gunicorn", "stream-server", "model-server[0]"}
    assert found.value("sagemaker_tfs_child_ready") == 4
    assert found.value("sagemaker_tfs_child_restarts_total") == 0
    assert found.value("sagemaker_tfs_ready") == 1
    assert 0 < found.value("sagemaker_tfs_uptime_seconds") < 3600
    memory = found.value("sagemaker_tfs_model_server_memory_bytes", model_server="model-server[0]")
    assert memory > 50 << 20  # TensorFlow and a model


def test_the_json_access_log_has_a_line_per_request_but_not_for_ping(plain_stack: Stack) -> None:
    stack = plain_stack
    before = len(access_lines(stack))
    assert stack.ping() == 200
    headers = {"X-Amzn-SageMaker-Custom-Attributes": "tfs-model-version=123"}
    assert stack.post('{"instances": [1.0]}', **headers).status_code == 200
    assert stack.post(npy([2.0]), "application/x-npy").status_code == 200
    assert stack.get("/metrics").status_code == 200
    assert stack.get("/nowhere").status_code == 404
    assert wait_for(lambda: len(access_lines(stack)) >= before + 3, 10)
    lines = [json.loads(line) for line in access_lines(stack)[before:]]
    assert [(line["method"], line["path"], line["status"]) for line in lines] == [
        ("POST", "/invocations", 200),
        ("POST", "/invocations", 200),
        ("GET", "/nowhere", 404),
    ]
    njs, fast, _ = lines
    assert (njs["model"], njs["version"], fast["model"], fast["version"]) == (
        MODEL, "123", MODEL, "",
    )  # fmt: skip
    for line in (njs, fast):
        assert line["bytes_in"] > 0 and line["bytes_out"] > 0
        assert line["seconds"] >= float(line["upstream_seconds"]) - 0.002
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d", line["time"])


@pytest.fixture
def pair_stack(resources_dir: Path, tmp_path: Path) -> Iterator[Stack]:
    """input_handler + output_handler, under Batch, a text access log, another metrics path."""
    env = {
        "SAGEMAKER_BATCH": "true",
        "SAGEMAKER_TFS_ACCESS_LOG": "text",
        "SAGEMAKER_TFS_METRICS_PATH": "/custom/metrics",
    }
    model = resources_dir / "models" / MODEL
    with stack_with_code(tmp_path, model, resources_dir / "code" / "io_pair", env) as stack:
        yield stack


def test_model_servers_metrics_pass_through_with_batching(
    start_stack: StartStack, resources_dir: Path
) -> None:
    """Two model servers batching: their own families (TF Serving's names) in one scrape,
    each sample labelled with its model server; batch sizes and queueing delays move."""
    env = {"SAGEMAKER_TFS_ENABLE_BATCHING": "true", "SAGEMAKER_TFS_INSTANCE_COUNT": "2"}
    stack = start_stack(resources_dir / "models", env)

    def post(_: int) -> int:
        return stack.post(npy([1.0, 2.0]), "application/x-npy").status_code

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        assert set(pool.map(post, range(40))) == {200}
    found = scrape(f"{stack.url}/metrics")
    servers = ("model-server[0]", "model-server[1]")
    served = ":tensorflow:serving:request_count_total"  # the parser's name of its samples
    assert sum(found.value(served, model_server=name, model_name=MODEL) for name in servers) >= 40
    assert {s.labels["model_server"] for s in found.samples(served)} == set(servers)
    batching = ":tensorflow:serving:batching_session"
    assert found.value(f"{batching}:input_batch_size_count") >= 40
    assert found.value(f"{batching}:processed_batch_size_count") >= 1
    assert found.value(f"{batching}:queuing_latency_count") >= 40


def test_user_handlers_are_timed_under_batch_on_another_path(pair_stack: Stack) -> None:
    stack = pair_stack
    for body in ("1.0,2.0", "3.0"):
        response = stack.post(body, "text/csv")
        assert response.status_code == 200 and response.json()["handler"] == "io_pair"
    assert stack.get("/metrics").status_code == 404
    url = f"{stack.url}/custom/metrics"
    found = wait_for_samples(url, lambda s: s.value(REQUESTS) >= 2)
    assert found.value(REQUESTS, model=MODEL, route="inference_py", status_class="2xx") == 2
    for handler in ("input_handler", "output_handler"):
        assert found.value("sagemaker_tfs_handler_seconds_count", handler=handler) == 2
    assert found.value("sagemaker_tfs_handler_seconds_count", handler="handler") == 0
    calls = "sagemaker_tfs_model_server_call_seconds_count"
    assert found.value(calls, route="inference_py") == 2
    lines = [line for line in stack.log_text().splitlines() if " POST /invocations " in line]
    assert len(lines) == 2, lines
    pattern = (
        r"\S+ POST /invocations model=half_plus_three version= status=200 "
        r"in=\d+ out=\d+ total=[\d.]+ upstream=[\d.]+"
    )
    assert all(re.fullmatch(pattern, line) for line in lines), lines
    assert " GET /custom/metrics " not in stack.log_text()


def test_metrics_off_and_every_request_logged(start_stack: StartStack, resources_dir: Path) -> None:
    env = {
        "SAGEMAKER_TFS_METRICS": "false",
        "SAGEMAKER_TFS_ACCESS_LOG": "json",
        "SAGEMAKER_TFS_ACCESS_LOG_ALL": "true",
    }
    stack = start_stack(resources_dir / "models", env)
    response = stack.get("/metrics")
    assert (response.status_code, response.json()) == (404, {"error": "Not Found"})
    assert stack.post('{"instances": [1.0]}').status_code == 200
    names = set(os.listdir(stack.work_dir))
    assert not names & {"metrics.sock", "edge-log.pipe", "prometheus"}, names
    assert wait_for(lambda: any(json.loads(line)["path"] == "/ping"
                                for line in access_lines(stack)), 10)  # fmt: skip
    assert any(json.loads(line)["path"] == "/metrics" for line in access_lines(stack))


def test_multi_model_loads_unloads_and_a_model_named_metrics(
    start_stack: StartStack, resources_dir: Path, tmp_path: Path
) -> None:
    root = tmp_path / "models"
    shutil.copytree(resources_dir / "models" / MODEL, root / MODEL)
    # Room for one model server: the second load is refused (507).
    env = {"SAGEMAKER_TFS_MODEL_SERVER_PER_MODEL": "true"}
    stack = start_stack(root, env, multi_model=True, port_range_size=2)

    def load(name: str) -> int:
        body = {"model_name": name, "url": MODEL}
        return requests.post(f"{stack.url}/models", json=body, timeout=120).status_code

    assert [load("metrics"), load("metrics"), load("other")] == [200, 409, 507]
    assert requests.get(f"{stack.url}/models/metrics", timeout=10).status_code == 200
    answers = [
        stack.post('{"instances": [1.0]}', path="/models/metrics/invoke"),
        stack.post(npy([1.0]), "application/x-npy", path="/models/metrics/invoke"),
        stack.post("[1.0]", **{"X-Amzn-SageMaker-Target-Model": "metrics"}),
    ]
    assert [a.status_code for a in answers] == [200, 200, 200]
    found = counted(stack, 3)
    assert found.value(REQUESTS, model="metrics", route="conversion") == 2
    assert found.value(REQUESTS, model="metrics", route="fast_path") == 1
    assert found.value("sagemaker_tfs_models_loaded") == 1
    assert found.value("sagemaker_tfs_model_loads_total", code="200") == 1
    assert found.value("sagemaker_tfs_model_loads_total", code="409") == 1
    assert found.value("sagemaker_tfs_model_loads_total", code="507") == 1
    assert found.value("sagemaker_tfs_model_load_seconds_count") == 1
    assert found.value("sagemaker_tfs_model_load_seconds_sum") > 0
    (memory,) = found.samples("sagemaker_tfs_model_server_memory_bytes")
    assert memory.value > 50 << 20
    assert requests.delete(f"{stack.url}/models/metrics", timeout=60).status_code == 200
    assert requests.delete(f"{stack.url}/models/metrics", timeout=60).status_code == 404
    found = scrape(f"{stack.url}/metrics")
    assert found.value("sagemaker_tfs_models_loaded") == 0
    assert found.value("sagemaker_tfs_model_unloads_total", code="200") == 1
    assert found.value("sagemaker_tfs_model_unloads_total", code="404") == 1
    assert found.value("sagemaker_tfs_model_unload_seconds_count") == 1
    assert found.samples("sagemaker_tfs_model_server_memory_bytes") == []


def test_shared_multi_model_server(
    start_stack: StartStack, resources_dir: Path, tmp_path: Path
) -> None:
    """The default multi-model mode: every model in each of two model servers, whose memory
    grows."""
    root = tmp_path / "models"
    for name in ("a", "b"):
        shutil.copytree(resources_dir / "models" / MODEL, root / name)
    stack = start_stack(root, multi_model=True)
    memory = "sagemaker_tfs_model_server_memory_bytes"
    empty = scrape(f"{stack.url}/metrics")
    servers = empty.samples(memory)
    assert len(servers) == 2  # config.MULTI_MODEL_INSTANCES
    for name in ("a", "b"):
        loaded = requests.post(f"{stack.url}/models", json={"model_name": name, "url": name},
                               timeout=120)  # fmt: skip
        assert loaded.status_code == 200, loaded.text
        assert stack.post("[1.0]", path=f"/models/{name}/invoke").status_code == 200
    found = counted(stack, 2)
    assert found.value("sagemaker_tfs_models_loaded") == 2
    assert found.value("sagemaker_tfs_model_loads_total", code="200") == 2
    assert found.value(REQUESTS, model="b", route="conversion", status_class="2xx") == 1
    assert all(found.value(memory, **server.labels) > server.value for server in servers)


def test_restarts_are_counted_and_counting_goes_on(
    start_stack: StartStack, resources_dir: Path
) -> None:
    stack = start_stack(resources_dir / "models")
    assert stack.post('{"instances": [1.0]}').status_code == 200
    counted(stack, 1)
    for marker in ("nginx: master", "gunicorn"):
        (pid,) = stack.child_pids(marker)
        os.kill(pid, signal.SIGKILL)

    def restarted(found: Scrape) -> bool:
        return found.value("sagemaker_tfs_child_restarts_total", child="nginx") == 1 and (
            found.value("sagemaker_tfs_child_restarts_total", child="gunicorn") == 1
        )

    assert wait_for(lambda: _scrapes(stack, restarted), 60)
    assert wait_for(lambda: _scrapes(stack, lambda s: s.value("sagemaker_tfs_ready") == 1), 60)
    time.sleep(0.5)
    assert stack.post(npy([1.0]), "application/x-npy").status_code == 200
    found = counted(stack, 2)  # the counts outlive nginx; the worker's counts are kept
    assert found.value("sagemaker_tfs_model_server_call_seconds_count", route="fast_path") == 1
    assert found.value("sagemaker_tfs_service_requests_in_flight") == 0


def _scrapes(stack: Stack, condition) -> bool:  # type: ignore[no-untyped-def]
    try:
        return condition(scrape(f"{stack.url}/metrics"))
    except (requests.RequestException, AssertionError):
        return False


def test_a_prometheus_server_scrapes_the_stack(plain_stack: Stack, tmp_path: Path) -> None:
    """Debian's Prometheus (scripts/bootstrap.sh installs it) scrapes the stack every second
    and answers the request rate of the njs conversions over its HTTP API."""
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.fail("prometheus is not installed: run scripts/bootstrap.sh as root")
    port = free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        "scrape_configs:\n"
        "  - job_name: sagemaker_tfs\n"
        f"    static_configs: [{{targets: ['127.0.0.1:{plain_stack.port}']}}]\n"
    )
    command = [
        binary, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn",
    ]  # fmt: skip
    api = f"http://127.0.0.1:{port}/api/v1"
    with open(tmp_path / "prometheus.log", "wb") as log:
        server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    try:
        assert wait_for(lambda: _answers(f"http://127.0.0.1:{port}/-/ready"), 60), (
            tmp_path / "prometheus.log"
        ).read_text()

        def rate() -> float:
            for _ in range(5):
                assert plain_stack.post('{"instances": [1.0]}').status_code == 200
            query = 'sum(rate(sagemaker_tfs_requests_total{route="njs",status_class="2xx"}[5s]))'
            result = requests.get(f"{api}/query", params={"query": query}, timeout=10).json()
            assert result["status"] == "success", result
            values = result["data"]["result"]
            return float(values[0]["value"][1]) if values else 0.0

        assert wait_for(lambda: rate() > 0, 60, interval=0.5)
        targets = requests.get(f"{api}/targets", timeout=10).json()["data"]["activeTargets"]
        assert [(t["health"], t["lastError"]) for t in targets] == [("up", "")]
    finally:
        server.terminate()
        server.wait(30)


def _answers(url: str) -> bool:
    try:
        return requests.get(url, timeout=2).status_code == 200
    except requests.RequestException:
        return False
