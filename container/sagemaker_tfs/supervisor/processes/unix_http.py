"""The skeleton of the supervisor's two HTTP servers on unix sockets (the control API, the
metrics endpoint): a socket only the supervisor's user may open, one thread per request."""

from __future__ import annotations

import logging
import os
import socketserver
import threading
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler
from typing import Any


class UnixHttpHandler(BaseHTTPRequestHandler):
    """A request of a ``UnixHttpServer``: its peer is named ``PEER`` (a unix socket has no
    address) and its access lines go at DEBUG, after ``LOG_PREFIX``, to the subclass's logger."""

    PEER = "unix-socket"
    LOG_PREFIX = ""
    protocol_version = "HTTP/1.1"

    def address_string(self) -> str:
        return self.PEER

    def send_whole(
        self,
        status: int,
        body: bytes,
        content_type: str,
        send_body: bool = True,
        headers: Sequence[tuple[str, str]] = (),
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        if send_body:
            self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        logging.getLogger(type(self).__module__).debug(self.LOG_PREFIX + format, *args)


class UnixHttpServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    """An HTTP server on the unix socket ``path`` (a stale one of an earlier run replaced)."""

    daemon_threads = True

    def __init__(self, path: str, handler: type[BaseHTTPRequestHandler], thread_name: str) -> None:
        if os.path.exists(path):
            os.unlink(path)
        self.thread_name = thread_name
        super().__init__(path, handler)
        os.chmod(path, 0o600)

    def serve_in_background(self) -> threading.Thread:
        thread = threading.Thread(target=self.serve_forever, name=self.thread_name, daemon=True)
        thread.start()
        return thread

    def close(self) -> None:
        """Stop serving, close the socket and remove its path."""
        self.shutdown()
        self.server_close()
        path = self.server_address
        if isinstance(path, str) and os.path.exists(path):
            os.unlink(path)
