"""What the service counts of its invocations, and what it tells nginx about each.

Each invocation gets a ``InvocationRecord`` at the edge (``app._serve``): it counts the request
in flight, times the stack's own calls to a model server and the user's handlers, and at
the end names the route, model and version in response headers that nginx logs and hides
(``wire/metrics.py``). nginx counts the requests themselves, so that the requests it
converts in njs are counted the same way.

The values go to ``prometheus_client``'s multiprocess files (``PROMETHEUS_MULTIPROC_DIR``,
set by the supervisor for gunicorn when ``SAGEMAKER_TFS_METRICS`` is on), which the
supervisor reads at each scrape. With metrics off the records only name the route.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import falcon

from sagemaker_tfs.service.targets import ModelTarget
from sagemaker_tfs.wire.metrics import (
    LATENCY_BUCKETS,
    MODEL_HEADER,
    MODEL_SERVER_CALL_HELP,
    MODEL_SERVER_CALL_SECONDS,
    MULTIPROCESS_DIR_ENV,
    PREFIX,
    ROUTE_HEADER,
    ROUTE_SERVICE,
    VERSION_HEADER,
)


class ServiceMetrics:
    """The worker's metrics (``prometheus_client`` objects, made once per worker)."""

    def __init__(self) -> None:
        from prometheus_client import Counter, Gauge, Histogram

        self.in_flight = Gauge(
            f"{PREFIX}_service_requests_in_flight",
            "Invocations the Python service is handling",
            multiprocess_mode="livesum",
        )
        # By route and handler, not model: the multiprocess files of a multi-model endpoint's
        # thousands of models would make every scrape slow. The model servers' own metrics
        # have each model's latency.
        self.model_server_call = Histogram(
            MODEL_SERVER_CALL_SECONDS, MODEL_SERVER_CALL_HELP, ("route",), buckets=LATENCY_BUCKETS
        )
        self.handler = Histogram(
            f"{PREFIX}_handler_seconds",
            "Time in the user's inference.py handlers, by handler",
            ("handler",),
            buckets=LATENCY_BUCKETS,
        )
        self.streamed_answers = Counter(
            f"{PREFIX}_streamed_answers",
            "Streamed answers of inference.py handlers, by how they ended: complete, failed "
            "(the handler raised mid-stream; the body was cut short) or closed (the client left)",
            ("outcome",),
        )
        self.large_bodies_waiting = Gauge(
            f"{PREFIX}_service_large_bodies_waiting",
            "Request bodies of 1 MB or more waiting for their turn in the Python service "
            "(SAGEMAKER_TFS_MAX_BODY_MB_IN_FLIGHT)",
            multiprocess_mode="livesum",
        )
        self.sessions_open = Gauge(
            f"{PREFIX}_sessions_open",
            "Stateful sessions open (SAGEMAKER_TFS_SESSIONS)",
            multiprocess_mode="livesum",
        )
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}

    def child(self, metric: Any, *labels: str) -> Any:
        """``metric.labels(*labels)``, kept (prometheus_client's lookup takes a lock)."""
        key = (id(metric), labels)
        found = self._children.get(key)
        if found is None:
            found = self._children[key] = metric.labels(*labels)
        return found


def service_metrics() -> ServiceMetrics | None:
    """The worker's metrics when the stack counts them, else None."""
    return ServiceMetrics() if os.environ.get(MULTIPROCESS_DIR_ENV) else None


class InvocationRecord:
    """One invocation being served; ``route`` is set by whoever chooses it (``invoke``)."""

    __slots__ = ("_metrics", "_resp", "route")

    def __init__(self, metrics: ServiceMetrics | None, resp: falcon.Response) -> None:
        self._metrics = metrics
        self._resp = resp
        self.route = ROUTE_SERVICE

    def target(self, target: ModelTarget) -> None:
        """The model (and version) the request is for, once it is known."""
        self._resp.set_header(MODEL_HEADER, target.model_name)
        if target.model_version:
            self._resp.set_header(VERSION_HEADER, target.model_version)

    def model_server_call(self) -> AbstractContextManager[None]:
        """Around one of the stack's own calls to a model server."""
        return self._timed("model_server_call", self.route)

    def streamed(self, outcome: str) -> None:
        """A streamed answer ended (``streaming.COMPLETE``, ``FAILED`` or ``CLOSED``)."""
        if self._metrics is not None:
            self._metrics.child(self._metrics.streamed_answers, outcome).inc()

    def handler(self, name: str) -> AbstractContextManager[None]:
        """Around one call of a user handler (``handler``, ``input_handler``...)."""
        return self._timed("handler", name)

    @contextmanager
    def _timed(self, histogram: str, label: str) -> Iterator[None]:
        """The time of the block, in ``ServiceMetrics.<histogram>`` with ``label``."""
        if self._metrics is None:
            yield
            return
        started = time.perf_counter()
        try:
            yield
        finally:
            child = self._metrics.child(getattr(self._metrics, histogram), label)
            child.observe(time.perf_counter() - started)


@contextmanager
def recorded(metrics: ServiceMetrics | None, resp: falcon.Response) -> Iterator[InvocationRecord]:
    """A record for one invocation: in flight while it runs, its route named at the end
    (an error answer included)."""
    record = InvocationRecord(metrics, resp)
    if metrics is not None:
        metrics.in_flight.inc()
    try:
        yield record
    finally:
        if metrics is not None:
            metrics.in_flight.dec()
        resp.set_header(ROUTE_HEADER, record.route)
