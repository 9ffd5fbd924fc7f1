"""The HTTP/1.1 keep-alive server in front of ``rest_api.RestApi``.

The server is ``http.server.ThreadingHTTPServer`` (one thread per connection, so idle
keep-alive connections never block others) with a semaphore of ``num_threads`` slots around
request processing, which bounds how many requests run at once as
``--rest_api_num_threads`` does in TF Serving. Model work happens in the servable (and its
batcher), which releases the GIL while TensorFlow runs. Every answer is JSON, protocol
errors and handler bugs included.

Beside ``/v1/``: the Prometheus endpoint of ``--monitoring_config_file`` (its exact path, any
method, ``monitoring``'s text), and CORS: OPTIONS on ``/v1/`` answers a preflight, and with
``--rest_api_enable_cors_support`` every ``/v1/`` answer carries TF Serving's three CORS
headers (the metrics endpoint never does).
"""

from __future__ import annotations

import email.utils
import functools
import io
import logging
import socket
import sys
import threading
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from sagemaker_tfs.container_limits import stack_cpus
from sagemaker_tfs.model_server.errors import Code
from sagemaker_tfs.model_server.monitoring import CONTENT_TYPE as METRICS_CONTENT_TYPE
from sagemaker_tfs.model_server.monitoring import METRICS
from sagemaker_tfs.model_server.rest.deadlines import DeadlineWatcher
from sagemaker_tfs.model_server.rest.json_writer import format_error
from sagemaker_tfs.model_server.rest.rest_api import RestApi
from sagemaker_tfs.wire.http_messages import (
    HeadError,
    content_length,
    http_version,
    is_chunked,
    read_chunked_body,
    read_header_fields,
)

if TYPE_CHECKING:
    from sagemaker_tfs.model_server.serving.manager import ModelManager

logger = logging.getLogger(__name__)
JSON_CONTENT_TYPE = "application/json"
MAX_BODY_BYTES = 2**31 - 1
PREFLIGHT_ERROR = "A CORS preflight needs an Origin header with an http:// or https:// origin"
CORS_HEADERS = (
    ("Access-Control-Allow-Origin", "*"),
    ("Access-Control-Allow-Methods", "POST, GET"),
    ("Access-Control-Allow-Headers", "Content-Type"),
)


@functools.lru_cache(maxsize=1)
def _http_date(second: int) -> str:
    return email.utils.formatdate(second, usegmt=True)


class _Handler(BaseHTTPRequestHandler):
    """HTTP/1.1 keep-alive handler; every ``/v1`` answer is JSON, even on internal errors."""

    protocol_version = "HTTP/1.1"
    # Headers and body leave in one write (flushed after each request) with Nagle off: two
    # small writes on a keep-alive connection would otherwise wait for a delayed ACK (~40 ms).
    wbufsize = 1 << 16
    disable_nagle_algorithm = True
    server: RestServer
    raw_requestline: bytes  # set by http.server before parse_request
    header_fields: dict[str, str]

    def parse_request(self) -> bool:
        """``http.server``'s checks of the request line and head, its answers kept (400 for a
        bad line or version, 505 from HTTP/2 on, 431 for a head too large), with the header
        fields read by ``wire.http_messages`` into ``header_fields``; False: answered already."""
        self.command = None  # type: ignore[assignment]  # as http.server: no method yet
        self.request_version = self.default_request_version
        self.close_connection = True
        self.requestline = str(self.raw_requestline, "iso-8859-1").rstrip("\r\n")
        words = self.requestline.split()
        if not words:
            return False
        if len(words) >= 3:
            version = http_version(words[-1])
            if version is None:
                self.send_error(400, f"Bad request version ({words[-1]!r})")
                return False
            if version >= (2, 0):
                self.send_error(505, f"Invalid HTTP version ({words[-1][5:]})")
                return False
            self.close_connection = version < (1, 1)
            self.request_version = words[-1]
        if not 2 <= len(words) <= 3:
            self.send_error(400, f"Bad request syntax ({self.requestline!r})")
            return False
        self.command, self.path = words[0], words[1]
        if len(words) == 2:
            self.close_connection = True
            if self.command != "GET":
                self.send_error(400, f"Bad HTTP/0.9 request type ({self.command!r})")
                return False
        return self._read_head()

    def _read_head(self) -> bool:
        try:
            self.header_fields = read_header_fields(self.rfile)
        except HeadError as error:
            self.send_error(error.status, str(error))
            return False
        connection = self.header_fields.get("connection", "").lower()
        if connection == "close":
            self.close_connection = True
        elif connection == "keep-alive":
            self.close_connection = False
        expect = self.header_fields.get("expect", "").lower()
        if expect == "100-continue" and self.request_version >= "HTTP/1.1":
            return self.handle_expect_100()
        return True

    def handle_expect_100(self) -> bool:
        """Send ``100 Continue`` at once (the write buffer would otherwise hold it back)."""
        accepted = super().handle_expect_100()
        self.wfile.flush()
        return accepted

    def _dispatch(self) -> None:
        try:
            body = self._read_body()
        except ValueError as error:
            self.close_connection = True
            self._reply(400, format_error(str(error)))
            return
        path = self.path.split("?", 1)[0]
        if path == self.server.metrics_path:
            self._reply(200, METRICS.exposition(), METRICS_CONTENT_TYPE, cors=False)
            return
        if not path.lower().startswith("/v1/"):
            self._reply(404, format_error(f"Not found: {self.command} {path}"))
            return
        if self.command == "OPTIONS":
            if self.server.api.preflight(path, self.header_fields.get("origin")) == 200:
                self._reply(200, b"", None)
            else:
                self._reply(400, format_error(PREFLIGHT_ERROR))
            return
        answer = self._run(path, body)
        if answer is not None:
            self._reply(*answer)

    # http.server calls do_<METHOD>; every method goes the same way
    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _dispatch

    def _run(self, path: str, body: bytes) -> tuple[int, bytes] | None:
        """The answer within ``--rest_api_timeout_in_ms``: a request that waits that long for
        a free slot gets 503; a prediction (POST) that runs longer, 504 (DEADLINE_EXCEEDED,
        as TF Serving answers) from the server's ``DeadlineWatcher`` at its deadline, while
        its run goes on to its end here, in its slot; then None: answered already."""
        server = self.server
        started = time.monotonic()
        if not server.slots.acquire(timeout=server.timeout_seconds):
            message = "Timed out waiting for a free REST API thread"
            return 503, format_error(message)
        if server.timeout_seconds is None or self.command != "POST":
            return self._handle(path, body)
        timeout = server.timeout_seconds
        remaining = timeout - (time.monotonic() - started)
        watch = server.deadlines.watch(remaining, lambda: self._answer_late(path, timeout))
        answer = self._handle(path, body)
        return answer if watch.finish() else None

    def _answer_late(self, path: str, timeout: float) -> None:
        """504 from the watcher's thread; the connection then closes once the run is over.

        The answer is sent without waiting: one client that does not read its answers must not
        hold up the watcher, and with it every other request's deadline. An answer that does
        not fit in the socket's buffer at once is dropped; the connection closes all the same.
        """
        logger.warning("REST %s %s: no answer within %.0f ms", self.command, path, timeout * 1000)
        message = (
            f"{Code.DEADLINE_EXCEEDED.name}: no answer within "
            f"{timeout * 1000:.0f} ms (--rest_api_timeout_in_ms)"
        )
        writer, self.wfile = self.wfile, io.BytesIO()  # the run's thread writes nothing now
        try:
            self._reply(504, format_error(message), close=True)
            answer = self.wfile.getvalue()
        finally:
            self.wfile = writer
        try:
            sent = self.connection.send(answer, socket.MSG_DONTWAIT)
        except OSError as error:  # gone away, or not reading (BlockingIOError)
            logger.debug("504 not delivered: %s", error)
            return
        if sent < len(answer):
            logger.debug("504 not delivered whole: %d of %d bytes", sent, len(answer))

    def _handle(self, path: str, body: bytes) -> tuple[int, bytes]:
        """One request in its slot (released here, also after a 504 was sent)."""
        try:
            return self.server.api.handle(self.command, path, body)
        except Exception as error:  # a handler bug must not take the server down
            logger.exception("REST request %s %s failed", self.command, path)
            return 500, format_error(f"{Code.INTERNAL.name}: {error}")
        finally:
            self.server.slots.release()

    def _read_body(self) -> bytes:
        if is_chunked(self.header_fields):
            return read_chunked_body(self.rfile)
        length = content_length(self.header_fields) or 0
        if length > MAX_BODY_BYTES:
            raise ValueError(f"Invalid Content-Length: {length}")
        return self.rfile.read(length) if length else b""

    def _reply(
        self,
        status: int,
        payload: bytes,
        content_type: str | None = JSON_CONTENT_TYPE,
        cors: bool = True,
        close: bool = False,
    ) -> None:
        self.send_response(status)
        if content_type:
            self.send_header("Content-Type", content_type)
        if close:  # also ends the connection's loop (http.server reads this header)
            self.send_header("Connection", "close")
        self.send_header("Content-Length", str(len(payload)))
        if cors and self.server.cors:
            for name, value in CORS_HEADERS:
                self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """Protocol errors (bad request line, unsupported method) also answer in JSON."""
        self.close_connection = True
        if self.request_version == "HTTP/0.9":  # unparsable request line: answer in HTTP/1.1
            self.request_version = self.protocol_version
        try:
            phrase = message or HTTPStatus(code).phrase
        except ValueError:
            phrase = message or "Error"
        self._reply(code, format_error(phrase))

    def date_time_string(self, timestamp: float | None = None) -> str:
        """The ``Date`` header's text, made once a second (``email.utils`` takes ~5 us)."""
        return _http_date(int(time.time() if timestamp is None else timestamp))

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - base signature
        logger.debug("%s " + format, self.address_string(), *args)


class RestServer(ThreadingHTTPServer):
    """The running REST server; ``shutdown()`` stops it and closes the socket."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(
        self,
        port: int,
        api: RestApi,
        num_threads: int,
        timeout_ms: int,
        cors: bool = False,
        metrics_path: str | None = None,
    ) -> None:
        super().__init__(("0.0.0.0", port), _Handler)
        self.api = api
        self.cors = cors
        self.metrics_path = metrics_path
        self.slots = threading.BoundedSemaphore(max(1, num_threads))
        self.timeout_seconds = timeout_ms / 1000.0 if timeout_ms > 0 else None
        self.deadlines = DeadlineWatcher("rest-deadlines")
        self._thread = threading.Thread(target=self.serve_forever, name="rest-api", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away (reset, broken pipe) is one debug line, not a traceback on
        stderr; anything else is logged with its traceback."""
        error = sys.exc_info()[1]
        if isinstance(error, (ConnectionResetError, BrokenPipeError)):
            logger.debug("client %s went away: %s", client_address, error)
        else:
            logger.exception("error while serving %s", client_address)

    def shutdown(self) -> None:
        super().shutdown()
        self.server_close()


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
