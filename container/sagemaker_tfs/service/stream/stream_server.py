"""The bidirectional stream's server: ``python -m sagemaker_tfs.service.stream.stream_server``.

SageMaker opens a WebSocket at ``/invocations-bidirectional-stream`` on the serving port, or at
the path its ``X-Amzn-SageMaker-Model-Invocation-Path`` header names, with the caller's
``ModelQueryString`` as the URL's query string; nginx passes it here, on the unix socket
``StackConfig.work.stream_socket``. This process is the supervisor's child beside gunicorn
(single-model endpoints): it loads ``code/inference.py`` for its ``stream_handler`` and serves
each connection in a thread of its own with the ``websockets`` library's threaded server
(docs/DESIGN.md says why this server). The ``/invocations`` workers are not involved.

The library does the protocol: it answers pings, closes with 1009 a message over
``SAGEMAKER_TFS_STREAM_MAX_MESSAGE_MB``, with 1007 a text message that is not UTF-8, with 1002
a bad frame; each only on the connection concerned. ``stream_pump`` bounds each connection's
waiting messages in bytes rather than in messages (so that its pings and pongs are read while
its handler is busy) and pings the client every ``SAGEMAKER_TFS_STREAM_KEEPALIVE_SECONDS``
(20; which also keeps nginx's read timeout from firing); ``stream_session`` runs the handler.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import socket
import sys
import threading
import weakref
from collections.abc import Mapping
from dataclasses import asdict
from types import FrameType
from typing import NamedTuple
from urllib.parse import unquote

from websockets.datastructures import Headers
from websockets.frames import CloseCode
from websockets.http11 import Request, Response
from websockets.sync.server import Server, ServerConnection, serve

from sagemaker_tfs import client
from sagemaker_tfs.service.codecs.content_types import JSON
from sagemaker_tfs.service.handlers.context import Context, build_context
from sagemaker_tfs.service.handlers.user_code import (
    UserCodeError,
    ensure_requirements,
    load_any_handlers,
)
from sagemaker_tfs.service.logs import configure_logging
from sagemaker_tfs.service.request import ParsedRequest, parse_headers
from sagemaker_tfs.service.routing.connections import Channels
from sagemaker_tfs.service.routing.model_servers import InstancePicker, InstanceRotation
from sagemaker_tfs.service.stream.stream_pump import (
    StreamConnection,
    StreamKeepalive,
    read_ahead_bytes,
)
from sagemaker_tfs.service.stream.stream_session import (
    StreamEnd,
    StreamHandler,
    close_reason,
    run_handler,
)
from sagemaker_tfs.service.targets import model_target
from sagemaker_tfs.stack_config import STACK_CONFIG_ENV, StackConfig
from sagemaker_tfs.wire.errors import HttpError
from sagemaker_tfs.wire.http_headers import ARRIVAL_HEADER, SESSION_HEADER

logger = logging.getLogger(__name__)

STREAM_PATH = "/invocations-bidirectional-stream"
PING_PATH = "/ping"
# SageMaker's header naming another path for the stream (its ModelInvocationPath, no leading /).
INVOCATION_PATH_HEADER = "X-Amzn-SageMaker-Model-Invocation-Path"
SHUTDOWN_REASON = "the endpoint is stopping"


def json_response(connection: ServerConnection, status: int, message: str) -> Response:
    """An HTTP answer instead of the handshake, ``{"error": ...}`` like the stack's others."""
    response = connection.respond(status, json.dumps({"error": message}) if status >= 400 else "{}")
    del response.headers["Content-Type"]
    response.headers["Content-Type"] = JSON
    return response


def invocation_path(request: Request) -> str | None:
    """The path the stream is opened on, as SageMaker's ModelInvocationPath names it (no
    leading ``/``): the default path, or the one the header names; None for any other."""
    path = unquote(request.path.split("?", 1)[0])
    named = (request.headers.get(INVOCATION_PATH_HEADER) or "").strip()
    if path == STREAM_PATH or (named and path == "/" + named.removeprefix("/")):
        return path.removeprefix("/")
    return None


def query_string(request: Request) -> str:
    """The URL's query string as the client sent it (SageMaker's ModelQueryString); the stack
    reads no key of it."""
    return request.path.partition("?")[2]


def parse_handshake(headers: Headers, default_model: str | None) -> ParsedRequest:
    """The handshake's headers read as an invocation's (custom attributes choose the model's
    version and method; a bad one is a 400 before the connection opens)."""

    def header(name: str) -> str | None:  # nginx's arrival and a session mean nothing here
        return None if name in (ARRIVAL_HEADER, SESSION_HEADER) else headers.get(name)

    return parse_headers(header, 0, lambda attributes: model_target(attributes, default_model))


class Handshake(NamedTuple):
    """What a connection's opening handshake gives its handler's ``Context``."""

    parsed: ParsedRequest
    invocation_path: str
    query_string: str


class StreamService:
    """The handshake's checks, the bound on open connections, and each connection's run."""

    def __init__(self, config: StackConfig, handler: StreamHandler | None, missing: str) -> None:
        self.config = config
        self.handler = handler
        self.missing = missing
        self.channels = Channels(config.work.grpc_socket_path)
        self.picker = InstancePicker(config.instances)
        self._open = 0
        self._lock = threading.Lock()
        self._parsed: weakref.WeakKeyDictionary[ServerConnection, Handshake] = (
            weakref.WeakKeyDictionary()
        )

    def process_request(self, connection: ServerConnection, request: Request) -> Response | None:
        """``/ping`` (the supervisor's readiness check), the path, the custom attributes."""
        path = request.path.split("?", 1)[0]
        if path == PING_PATH and "Upgrade" not in request.headers:
            return json_response(connection, 200, "")
        stream_path = invocation_path(request)
        if stream_path is None:
            return json_response(connection, 404, f"Not Found: {path}")
        try:
            parsed = parse_handshake(request.headers, self.config.default_model)
        except HttpError as error:
            return json_response(connection, error.status, error.message)
        self._parsed[connection] = Handshake(parsed, stream_path, query_string(request))
        return None

    def process_response(
        self, connection: ServerConnection, request: Request, response: Response
    ) -> Response | None:
        """The library's own refusals (no Upgrade header, a bad key...) as JSON too."""
        if response.status_code == 101 or response.headers.get("Content-Type") == JSON:
            return None
        text = bytes(response.body).decode("utf-8", errors="replace").strip()
        refused = json_response(connection, response.status_code, text or response.reason_phrase)
        for name in ("Upgrade", "Connection", "Sec-WebSocket-Version"):
            if name in response.headers:
                refused.headers[name] = response.headers[name]
        return refused

    def serve_connection(self, connection: ServerConnection) -> None:
        """One connection, from the open handshake to the close frame."""
        end = self._run(connection, self._parsed.pop(connection))
        if end is not None:
            connection.close(end.code, end.reason)

    def _run(self, connection: ServerConnection, handshake: Handshake) -> StreamEnd | None:
        if self.handler is None:
            return StreamEnd(CloseCode.POLICY_VIOLATION, close_reason(self.missing))
        if not self._admit():
            reason = (f"{self.config.stream.max_connections} streams are open "
                      "(SAGEMAKER_TFS_STREAM_MAX_CONNECTIONS)")  # fmt: skip
            return StreamEnd(CloseCode.TRY_AGAIN_LATER, close_reason(reason))
        assert isinstance(connection, StreamConnection)
        keepalive = StreamKeepalive(connection, self.config.stream.keepalive or None).start()
        try:
            context = self.context(handshake)
            return run_handler(connection, self.handler, context, self.config.stream.idle_timeout)
        finally:
            keepalive.stop()
            with self._lock:
                self._open -= 1

    def _admit(self) -> bool:
        """One more open stream, unless ``stream_max_connections`` are open already."""
        with self._lock:
            if self._open >= self.config.stream.max_connections:
                return False
            self._open += 1
            return True

    def context(self, handshake: Handshake) -> Context:
        """The handler's ``Context``, naming the model server this connection uses, the path
        and the query string."""
        server = InstanceRotation(self.picker, self.channels).first()
        context = build_context(handshake.parsed, server)
        context.invocation_path = handshake.invocation_path
        context.query_string = handshake.query_string
        return context


def missing_handler_reason(code_dir: str | None) -> str:
    if code_dir is None or not os.path.isfile(os.path.join(code_dir, "inference.py")):
        return "no code/inference.py with stream_handler(messages, context)"
    return "code/inference.py has no stream_handler(messages, context)"


def listen_unix(path: str) -> socket.socket:
    """A listening socket at ``path`` (a leftover of an earlier run replaced)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(path)
    sock.listen(1024)
    return sock


def start_server(service: StreamService, sock: socket.socket) -> Server:
    config = service.config
    return serve(
        service.serve_connection,
        sock=sock,
        process_request=service.process_request,
        process_response=service.process_response,
        server_header=None,
        # permessage-deflate off: a stream's payloads (audio, tensors) seldom shrink, and
        # inflating is where a small frame becomes a large message.
        compression=None,
        max_size=config.stream.max_message_bytes,
        # StreamConnection's queue counts bytes: at most the largest message waits.
        create_connection=StreamConnection,
        max_queue=read_ahead_bytes(config.stream.max_message_bytes),
        ping_interval=None,  # StreamKeepalive instead: it knows when reading has stopped
    )


def stop_signal() -> threading.Event:
    """An event set by SIGTERM or SIGINT (the supervisor's stop). Taken before the server
    accepts: a stop that came while the first streams were served would otherwise end the
    process by the signal's default action, and its streams without their 1001."""
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    return stop


def load_service(config: StackConfig) -> StreamService:
    client.set_default_timeout(config.model_servers.timeout)
    ensure_requirements(config.code_dir, config.work.root)
    user_code = load_any_handlers(config.code_dir, config.work.root)
    handler = user_code.stream_handler if user_code is not None else None
    return StreamService(config, handler, missing_handler_reason(config.code_dir))


def main(environ: Mapping[str, str] = os.environ) -> int:
    config = StackConfig.load(environ[STACK_CONFIG_ENV])
    configure_logging(config.service.log_level)
    logging.getLogger("websockets").setLevel(
        max(logging.WARNING, logging.getLogger().getEffectiveLevel())
    )
    try:
        service = load_service(config)
    except UserCodeError as error:
        logger.error("%s", error)
        return 1
    stop = stop_signal()
    server = start_server(service, listen_unix(config.work.stream_socket))
    thread = threading.Thread(target=server.serve_forever, name="stream-accept")
    thread.start()
    settings = " ".join(f"{name}={value}" for name, value in asdict(config.stream).items())
    handler = "yes" if service.handler is not None else "no"
    logger.info(
        "stream server on unix:%s: stream_handler=%s %s",
        config.work.stream_socket,
        handler,
        settings,
    )
    stop.wait()
    server.shutdown(code=CloseCode.GOING_AWAY, reason=SHUTDOWN_REASON)
    thread.join()
    with contextlib.suppress(FileNotFoundError):
        os.unlink(config.work.stream_socket)
    return 0


if __name__ == "__main__":
    sys.exit(main())
