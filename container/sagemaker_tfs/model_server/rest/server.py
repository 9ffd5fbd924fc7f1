"""The REST API's HTTP server: what each request gets, and where it runs.

The HTTP/1.1 work (sockets, keep-alive, reading requests, writing answers, deadlines) is
``http_loop``'s; this module is its application. ``/v1/`` requests go to ``api.RestApi``;
beside them, the Prometheus endpoint of ``--monitoring_config_file`` (its exact path, any
method, ``monitoring``'s text), and CORS: OPTIONS on ``/v1/`` answers a preflight, and with
``--rest_api_enable_cors_support`` every ``/v1/`` answer carries TF Serving's three CORS
headers (the metrics endpoint never does). Every answer is JSON, protocol errors and handler
bugs included.

``--rest_api_num_threads`` is the number of threads that run requests, as in TF Serving;
``--rest_api_timeout_in_ms`` bounds a request's wait for one (503) and a prediction's run
(504 DEADLINE_EXCEEDED, as TF Serving answers, while the run goes on to its end).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from sagemaker_tfs.container_limits import stack_cpus
from sagemaker_tfs.model_server.errors import Code
from sagemaker_tfs.model_server.monitoring import CONTENT_TYPE as METRICS_CONTENT_TYPE
from sagemaker_tfs.model_server.monitoring import METRICS
from sagemaker_tfs.model_server.rest.api import RestApi
from sagemaker_tfs.model_server.rest.http_loop import HttpLoop
from sagemaker_tfs.model_server.rest.http_replies import HttpReply
from sagemaker_tfs.model_server.rest.json_writer import format_error
from sagemaker_tfs.model_server.rest.request_reader import Request

if TYPE_CHECKING:
    from sagemaker_tfs.model_server.serving.manager import ModelManager

logger = logging.getLogger(__name__)
PREFLIGHT_ERROR = "A CORS preflight needs an Origin header with an http:// or https:// origin"
CORS_HEADERS = (
    ("Access-Control-Allow-Origin", "*"),
    ("Access-Control-Allow-Methods", "POST, GET"),
    ("Access-Control-Allow-Headers", "Content-Type"),
)
INLINE_BODY_BYTES = 64 * 1024
INLINE_SECONDS = 0.001
_MAX_TIMED_TARGETS = 1024
_WEIGHT = 0.05
_COUNTED_SECONDS = 0.01


class RunTimes:
    """Which requests run on the loop itself: those of a (method, path) whose successful runs
    took under ``INLINE_SECONDS`` on average, with a body under ``INLINE_BODY_BYTES``, on a
    model that does not batch (the batcher needs requests from several connections at once).

    A path not yet timed runs in the pool. The average moves slowly (``_WEIGHT`` of each run,
    a run counted as at most ``_COUNTED_SECONDS``): wall times taken while the machine is busy
    have spikes (a thread descheduled for a few ms), and a path sent to the pool by one spike
    paid the pool's hand-off on every request after it (-10% with handlers at 8 connections);
    a path whose runs are really slow goes to the pool after two. Only answers of 200 are
    timed, so the table holds paths the server serves (never more than
    ``_MAX_TIMED_TARGETS``)."""

    def __init__(self, api: RestApi) -> None:
        self._api = api
        self._seconds: dict[tuple[str, str], float] = {}

    def quick(self, request: Request) -> bool:
        if len(request.body) > INLINE_BODY_BYTES:
            return False
        return self._seconds.get((request.method, request.path), INLINE_SECONDS) < INLINE_SECONDS

    def record(self, request: Request, seconds: float) -> None:
        key = (request.method, request.path)
        known = self._seconds.get(key)
        if known is None:
            if len(self._seconds) >= _MAX_TIMED_TARGETS:
                return
            batched = self._api.runs_batched(request.method, request.path)
            self._seconds[key] = float("inf") if batched else min(seconds, _COUNTED_SECONDS)
        elif known != float("inf"):
            counted = min(seconds, _COUNTED_SECONDS)
            self._seconds[key] = known + _WEIGHT * (counted - known)


class RestServer:
    """The running REST server; ``shutdown()`` stops it and closes its sockets."""

    def __init__(
        self,
        port: int,
        api: RestApi,
        num_threads: int,
        timeout_ms: int,
        cors: bool = False,
        metrics_path: str | None = None,
    ) -> None:
        self.api = api
        self.cors = cors
        self.metrics_path = metrics_path
        self.timeout_ms = timeout_ms
        self._run_times = RunTimes(api)
        timeout_seconds = timeout_ms / 1000.0 if timeout_ms > 0 else None
        self._loop = HttpLoop(port, self, num_threads, timeout_seconds)

    @property
    def server_address(self) -> tuple[str, int]:
        return self._loop.address

    def start(self) -> None:
        self._loop.start()

    def shutdown(self) -> None:
        self._loop.shutdown()

    def respond(self, request: Request) -> HttpReply:
        path = request.path
        if path == self.metrics_path:
            return HttpReply(200, METRICS.exposition(), METRICS_CONTENT_TYPE)
        if not path.lower().startswith("/v1/"):
            return self.error_reply(404, f"Not found: {request.method} {path}")
        if request.method == "OPTIONS":
            if self.api.preflight(path, request.fields.get("origin")) == 200:
                return HttpReply(200, b"", None, self._cors_headers())
            return self.error_reply(400, PREFLIGHT_ERROR)
        try:
            status, body = self.api.handle(request.method, path, request.body)
        except Exception as error:  # a handler bug must not take the server down
            logger.exception("REST request %s %s failed", request.method, path)
            return self.error_reply(500, f"{Code.INTERNAL.name}: {error}")
        return HttpReply(status, body, headers=self._cors_headers())

    def runs_inline(self, request: Request) -> bool:
        path = request.path
        if path == self.metrics_path or request.method == "OPTIONS":
            return True
        if not path.lower().startswith("/v1/"):
            return True
        return self._run_times.quick(request)

    def ran(self, request: Request, reply: HttpReply, seconds: float) -> None:
        if reply.status == 200 and request.path.lower().startswith("/v1/"):
            self._run_times.record(request, seconds)

    def error_reply(self, status: int, message: str) -> HttpReply:
        return HttpReply(status, format_error(message), headers=self._cors_headers())

    def waited_too_long(self) -> HttpReply:
        return self.error_reply(503, "Timed out waiting for a free REST API thread")

    def ran_too_long(self, request: Request) -> HttpReply | None:
        """A prediction (POST) past the timeout: 504, as TF Serving; others run to their end."""
        if request.method != "POST":
            return None
        logger.warning(
            "REST %s %s: no answer within %d ms", request.method, request.path, self.timeout_ms
        )
        message = (
            f"{Code.DEADLINE_EXCEEDED.name}: no answer within "
            f"{self.timeout_ms} ms (--rest_api_timeout_in_ms)"
        )
        return HttpReply(504, format_error(message), headers=self._cors_headers(), close=True)

    def _cors_headers(self) -> tuple[tuple[str, str], ...]:
        return CORS_HEADERS if self.cors else ()


def serve(
    manager: ModelManager,
    port: int,
    num_threads: int,
    timeout_ms: int,
    *,
    cors: bool = False,
    metrics_path: str | None = None,
) -> RestServer:
    """Start the REST API on ``0.0.0.0:port`` in background threads and return at once.

    ``num_threads`` <= 0 means TF Serving's automatic choice (4 per CPU, the container's
    CPUs counted by ``container_limits``); ``cors``:
    ``--rest_api_enable_cors_support``; ``metrics_path``: the Prometheus endpoint, if any.
    """
    if num_threads <= 0:
        num_threads = 4 * stack_cpus()
    server = RestServer(port, RestApi(manager), num_threads, timeout_ms, cors, metrics_path)
    server.start()
    logger.info(
        "REST API on port %d: %d request threads, timeout %d ms", port, num_threads, timeout_ms
    )
    return server
