"""The supervisor's metrics endpoint: its sources joined, the model servers' text passed
through, the service's multiprocess files, the endpoint on its unix socket."""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from metrics_scrape import Scrape
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.metrics_core import HistogramMetricFamily
from sagemaker_tfs.supervisor.metrics.endpoint import (
    MetricsServer,
    ServiceWorkers,
    StackMetrics,
    monitored,
)
from sagemaker_tfs.supervisor.metrics.model_servers import (
    Families,
    MonitoredServer,
    exposition,
    with_label,
)
from sagemaker_tfs.supervisor.metrics.stack import ModelLoads, StackCollector
from sagemaker_tfs.supervisor.processes.children import Child
from sagemaker_tfs.wire.errors import HttpError

# A model server's exposition as TF Serving writes it (and our model server, with "# EOF").
TF_SERVING_TEXT = """\
# TYPE :tensorflow:serving:request_count counter
:tensorflow:serving:request_count{model_name="m",status="OK"} 3
# TYPE :tensorflow:serving:batching_session:input_batch_size histogram
:tensorflow:serving:batching_session:input_batch_size_bucket{le="1"} 2
:tensorflow:serving:batching_session:input_batch_size_bucket{le="+Inf"} 3
:tensorflow:serving:batching_session:input_batch_size_sum 5
:tensorflow:serving:batching_session:input_batch_size_count 3
# EOF
"""


def test_a_label_is_added_to_every_kind_of_sample() -> None:
    label = 'model_server="m0"'
    assert with_label('a{b="c d"} 1', label) == 'a{model_server="m0",b="c d"} 1'
    assert with_label("a 1", label) == 'a{model_server="m0"} 1'
    assert with_label("a{} 1", label) == 'a{model_server="m0"} 1'
    assert with_label('a{b="{x} y"} 1 1700000000', label) == (
        'a{model_server="m0",b="{x} y"} 1 1700000000'
    )


def test_model_names_not_served_are_summed_as_unknown() -> None:
    """TF Serving's binary counts requests by the name asked for: every name the stack does
    not serve (made-up ones) becomes one ``unknown`` series per status, summed."""
    text = (
        "# TYPE :tensorflow:serving:request_count counter\n"
        + "".join(
            f':tensorflow:serving:request_count{{model_name="made-up-{i}",status="NOT_FOUND"}} 2\n'
            for i in range(500)
        )
        + ':tensorflow:serving:request_count{model_name="m",status="OK"} 3\n'
    )
    families = Families(lambda name: name == "m")
    families.add(text, "model-server[0]")
    exposed = families.text()
    assert "made-up" not in exposed
    found = Scrape(exposed)
    count = ":tensorflow:serving:request_count_total"
    assert found.value(count, model_name="unknown", status="NOT_FOUND") == 1000
    assert found.value(count, model_name="m") == 3
    assert len(found.samples(count)) == 2


class FakeModelServer(BaseHTTPRequestHandler):
    text = TF_SERVING_TEXT

    def do_GET(self) -> None:  # noqa: N802
        body = self.text.encode() if self.path == "/monitoring/prometheus/metrics" else b""
        self.send_response(200 if body else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def model_server_ports() -> list[int]:
    servers = [ThreadingHTTPServer(("127.0.0.1", 0), FakeModelServer) for _ in range(2)]
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    yield [server.server_address[1] for server in servers]
    for server in servers:
        server.shutdown()
        server.server_close()


def test_several_model_servers_make_one_family_each(model_server_ports: list[int]) -> None:
    servers = [
        MonitoredServer(f"model-server[{i}]", port) for i, port in enumerate(model_server_ports)
    ]
    servers.append(MonitoredServer("gone", 1))  # refused: left out
    found = Scrape(exposition(servers, "/monitoring/prometheus/metrics"))
    count = ":tensorflow:serving:request_count_total"  # the parser's name of its samples
    assert [s.labels["model_server"] for s in found.samples(count)] == [
        "model-server[0]", "model-server[1]",
    ]  # fmt: skip
    assert found.value(count, model_name="m") == 6
    sizes = ":tensorflow:serving:batching_session:input_batch_size"
    assert found.value(f"{sizes}_count", model_server="model-server[1]") == 3
    assert found.value(f"{sizes}_bucket", le="1") == 4
    assert "# EOF" not in found.text
    assert exposition([], "/monitoring/prometheus/metrics") == ""


def test_families_of_the_same_name_are_joined(tmp_path: Path) -> None:
    registry = CollectorRegistry(auto_describe=False)
    Counter("sagemaker_tfs_x", "x", registry=registry).inc()

    class NginxCalls:
        def collect(self):  # type: ignore[no-untyped-def]
            family = HistogramMetricFamily("calls_seconds", "calls", labels=("route",))
            family.add_metric(["njs"], [("1.0", 1), ("+Inf", 1)], 0.5)
            yield family

    service = CollectorRegistry(auto_describe=False)
    Histogram("calls_seconds", "calls", ["route"], registry=service).labels("fast_path").observe(2)
    metrics = StackMetrics(registry, [NginxCalls(), service], FakeStack([], [], models_loaded=0))
    found = Scrape(metrics.text().decode())
    assert found.value("calls_seconds_count", route="njs") == 1
    assert found.value("calls_seconds_count", route="fast_path") == 1
    assert found.value("sagemaker_tfs_x_total") == 1


def test_workers_counts_outlive_them_and_their_in_flight_gauges_do_not(tmp_path: Path) -> None:
    """Two worker processes write multiprocess files; once they exited, their counters stay
    and their in-flight gauges go (removed at the next scrape, as for a killed master's)."""
    code = (
        "from prometheus_client import Counter, Gauge\n"
        "Counter('sagemaker_tfs_done', 'd').inc()\n"
        "Gauge('sagemaker_tfs_in_flight', 'f', multiprocess_mode='livesum').inc()\n"
    )
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    for _ in range(2):
        subprocess.run([sys.executable, "-c", code], env=env, check=True)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ServiceWorkers(str(tmp_path)))
    found = scraped(registry)
    assert found.value("sagemaker_tfs_done_total") == 2
    assert found.samples("sagemaker_tfs_in_flight") == []
    assert not list(tmp_path.glob("gauge_live*"))


class FakeStack:
    """The stack as the metrics see it (``stack.ObservedStack``), serving."""

    serving = True

    def __init__(self, children: list[Child], model_servers: list[Child], models_loaded: int):
        self._children, self._model_servers = children, model_servers
        self._models_loaded = models_loaded

    def children(self) -> list[Child]:
        return self._children

    def model_server_children(self) -> list[Child]:
        return self._model_servers

    def models_loaded(self) -> int | None:
        return self._models_loaded

    def serves_model(self, name: str) -> bool:
        return True


class RestChild:
    """A running model server child as ``endpoint.monitored`` reads it: its REST port from
    its command line."""

    def __init__(self, name: str, rest_port: int) -> None:
        self.name, self.argv = name, [f"--rest_api_port={rest_port}"]

    def running(self) -> bool:
        return True


def test_the_supervisor_reports_its_children() -> None:
    code = "import sys, time; x = bytearray(64 << 20); print(flush=True); time.sleep(60)"
    running = Child("model-server[0]", [sys.executable, "-c", code], {})
    running.start()
    waiting = Child("nginx", ["true"], {})
    collector = StackCollector(FakeStack([waiting, running], [running], models_loaded=4))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    try:
        running.mark_ready()
        running.restarts = 2
        memory = "sagemaker_tfs_model_server_memory_bytes"
        deadline = time.monotonic() + 10
        while scraped(registry).value(memory) < 64 << 20 and time.monotonic() < deadline:
            time.sleep(0.05)
        found = scraped(registry)
        assert found.value(memory) > 64 << 20
    finally:
        running.stop()
    assert found.value("sagemaker_tfs_child_restarts_total", child="model-server[0]") == 2
    assert found.value("sagemaker_tfs_child_ready", child="model-server[0]") == 1
    assert found.value("sagemaker_tfs_child_ready", child="nginx") == 0
    assert found.value("sagemaker_tfs_ready") == 0  # nginx is not ready
    assert found.value("sagemaker_tfs_models_loaded") == 4
    assert monitored([running]) == []  # its command line names no REST port
    assert scraped(registry).samples(memory) == []  # stopped


def test_loads_are_counted_by_status_and_timed_when_they_succeed() -> None:
    registry = CollectorRegistry(auto_describe=False)
    loads = ModelLoads(registry)
    with loads.timed("load"):
        pass
    for error in (HttpError(507, "full"), RuntimeError("bug")):
        with pytest.raises(type(error)), loads.timed("load"):
            raise error
    found = scraped(registry)
    codes = {s.labels["code"]: s.value for s in found.samples("sagemaker_tfs_model_loads_total")}
    assert codes == {"200": 1, "507": 1, "500": 1}
    assert found.value("sagemaker_tfs_model_load_seconds_count") == 1
    assert found.value("sagemaker_tfs_model_unloads_total") == 0


def scraped(registry: CollectorRegistry) -> Scrape:
    return Scrape(generate_latest(registry).decode())


def get(path: str, target: str, method: str = "GET") -> tuple[int, str, bytes]:
    class UnixConnection(http.client.HTTPConnection):
        def connect(self) -> None:
            self.sock = socket.socket(socket.AF_UNIX)
            self.sock.connect(path)

    connection = UnixConnection("localhost", timeout=10)
    connection.request(method, target)
    response = connection.getresponse()
    return response.status, response.getheader("Content-Type") or "", response.read()


def test_the_endpoint_answers_on_its_socket(tmp_path: Path, model_server_ports: list[int]) -> None:
    registry = CollectorRegistry(auto_describe=False)
    Counter("sagemaker_tfs_y", "y", registry=registry).inc(3)
    model_server = RestChild("model-server[0]", model_server_ports[0])
    stack = FakeStack([model_server], [model_server], models_loaded=0)
    path = str(tmp_path / "metrics.sock")
    server = MetricsServer(path, StackMetrics(registry, [], stack))
    server.serve_in_background()
    try:
        status, content_type, body = get(path, "/metrics")
        assert (status, content_type) == (200, "text/plain; version=0.0.4; charset=utf-8")
        found = Scrape(body.decode())
        assert found.value("sagemaker_tfs_y_total") == 3
        assert (
            found.value(":tensorflow:serving:request_count_total", model_server="model-server[0]")
            == 3
        )
        assert get(path, "/metrics", "HEAD")[:2] == (200, content_type)
        status, _, body = get(path, "/other")
        assert (status, json.loads(body)) == (404, {"error": "Not Found"})
        assert get(path, "/metrics", "POST")[0] == 405
    finally:
        server.close()
    assert not os.path.exists(path)
