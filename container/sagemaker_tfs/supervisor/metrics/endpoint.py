"""The stack's Prometheus endpoint: an HTTP server on the supervisor's metrics socket, to
which nginx proxies the public metrics path (``nginx/metrics.conf``).

One scrape gathers, in the supervisor (no request of it reaches the Python service or a
model server's prediction path):

- invocations counted from nginx's log lines (``edge_log.EdgeLog``), every route;
- the Python service's workers' metrics from their ``prometheus_client`` multiprocess
  files (``ServiceWorkers``; ``PROMETHEUS_MULTIPROC_DIR`` = ``StackConfig.work.metrics_dir``);
- the supervisor's own (``stack``);
- the model servers' own, passed through under TF Serving's names (``model_servers``).

Families of the same name from several sources (the model server call time: nginx's for
njs conversions, the service's for the rest) are joined into one. The text is
``prometheus_client``'s, followed by the model servers' passed-through text.
"""

from __future__ import annotations

import concurrent.futures
import glob
import logging
import os
import shutil
from collections.abc import Iterable, Iterator, Sequence

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead
from prometheus_client.registry import Collector

from sagemaker_tfs.stack_config import StackConfig
from sagemaker_tfs.supervisor.metrics.edge_log import EdgeLog
from sagemaker_tfs.supervisor.metrics.model_servers import (
    MONITORING_PATH,
    MonitoredServer,
    exposition,
)
from sagemaker_tfs.supervisor.metrics.stack import ModelLoads, ObservedStack, StackCollector
from sagemaker_tfs.supervisor.processes.children import Child
from sagemaker_tfs.supervisor.processes.unix_http import UnixHttpHandler, UnixHttpServer

logger = logging.getLogger(__name__)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
SCRAPE_PATH = "/metrics"  # on the socket; nginx maps the public metrics path to it


class ServiceWorkers:
    """The gunicorn workers' multiprocess files. Counters and histograms of workers that
    exited stay (the totals must not go down); the in-flight gauges of workers that are gone
    are removed here, also for workers whose master was killed before it could."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._collector = MultiProcessCollector(None, path=path)

    def collect(self) -> Iterator[Metric]:
        for path in glob.glob(os.path.join(self.path, "gauge_live*_*.db")):
            pid = os.path.basename(path)[: -len(".db")].rpartition("_")[2]
            if pid.isdigit() and not _alive(int(pid)):
                mark_process_dead(int(pid), self.path)
        yield from self._collector.collect()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Joined:
    """The families of several collectors, those of the same name (and type) joined."""

    def __init__(self, sources: Iterable[Collector]) -> None:
        self._sources = list(sources)

    def collect(self) -> Iterator[Metric]:
        joined: dict[str, Metric] = {}
        for source in self._sources:
            for family in source.collect():
                known = joined.get(family.name)
                if known is None:
                    joined[family.name] = family
                elif known.type == family.type:
                    known.samples.extend(family.samples)
                else:
                    logger.warning(
                        "metrics: %s is a %s and a %s; the second is left out",
                        family.name, known.type, family.type,
                    )  # fmt: skip
        yield from joined.values()


class StackMetrics:
    """Everything one scrape shows; ``text()`` is the exposition (the model servers are those
    ``stack`` runs, only the models it serves are label values)."""

    def __init__(
        self, registry: CollectorRegistry, collectors: Sequence[Collector], stack: ObservedStack
    ) -> None:
        self._joined = Joined([registry, *collectors])
        self._stack = stack

    def text(self) -> bytes:
        """The model servers are asked first and write their text while this process
        writes its own: a scrape takes the longer of the two, not their sum."""
        servers = monitored(self._stack.model_server_children())
        with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="metrics") as pool:
            passed = pool.submit(exposition, servers, MONITORING_PATH, self._stack.serves_model)
            own = generate_latest(self._joined)
            return own + passed.result().encode("utf-8")


class MetricsHandler(UnixHttpHandler):
    server: MetricsServer

    PEER = "metrics-socket"
    LOG_PREFIX = "metrics: "

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        self._answer(send_body=True)

    def do_HEAD(self) -> None:  # noqa: N802
        self._answer(send_body=False)

    def _answer(self, send_body: bool) -> None:
        if self.path.split("?")[0] != SCRAPE_PATH:
            self.send_whole(404, b'{"error": "Not Found"}', "application/json", send_body)
            return
        try:
            body = self.server.metrics.text()
        except Exception as error:  # noqa: BLE001 - one failed scrape, logged; serving goes on
            logger.exception("metrics: the scrape failed")
            message = f'{{"error": "the metrics could not be gathered: {type(error).__name__}"}}'
            self.send_whole(500, message.encode(), "application/json", send_body)
            return
        self.send_whole(200, body, CONTENT_TYPE, send_body)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """http.server's own errors as JSON; an unknown method (its 501) is a 405."""
        self.close_connection = True
        body = b'{"error": "the metrics endpoint answers GET only"}'
        self.send_whole(405 if code == 501 else code, body, "application/json")


class MetricsServer(UnixHttpServer):
    def __init__(self, path: str, metrics: StackMetrics, edge_log: EdgeLog | None = None) -> None:
        self.metrics = metrics
        self.edge_log = edge_log
        self.loads: ModelLoads | None = None
        super().__init__(path, MetricsHandler, "metrics")

    def close(self) -> None:
        super().close()
        if self.edge_log is not None:
            self.edge_log.close()


def monitored(model_servers: Iterable[Child]) -> list[MonitoredServer]:
    """The running model servers and their REST ports (read from their command lines)."""
    found = []
    for child in model_servers:
        for arg in child.argv:
            port = arg.removeprefix("--rest_api_port=")
            if port != arg and port.isdigit() and child.running():
                found.append(MonitoredServer(child.name, int(port)))
    return found


def start_metrics_endpoint(config: StackConfig, stack: ObservedStack) -> MetricsServer:
    """Everything the metrics path shows, served on ``config.work.metrics_socket``: the edge log
    socket bound (before nginx starts) and an empty multiprocess directory (before gunicorn
    starts). ``server.loads`` records the multi-model loads (None in single-model mode); only
    the models ``stack`` serves are label values."""
    shutil.rmtree(config.work.metrics_dir, ignore_errors=True)  # its files would count again
    os.makedirs(config.work.metrics_dir)
    registry = CollectorRegistry(auto_describe=False)
    loads = ModelLoads(registry) if config.multi_model.enabled else None
    edge_log = EdgeLog(config.work.edge_log_pipe, stack.serves_model)
    collectors: list[Collector] = [
        edge_log,
        ServiceWorkers(config.work.metrics_dir),
        StackCollector(stack),
    ]
    metrics = StackMetrics(registry, collectors, stack)
    server = MetricsServer(config.work.metrics_socket, metrics, edge_log)
    server.loads = loads
    server.serve_in_background()
    return server
