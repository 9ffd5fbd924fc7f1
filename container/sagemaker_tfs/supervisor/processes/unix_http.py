"""The skeleton of the supervisor's two HTTP servers on unix sockets (the control API, the
metrics endpoint): a socket only the supervisor's user may open, one thread per request."""

from __future__ import annotations

import logging
import os
import socketserver
import threading
from http.server import BaseHTTPRequestHandler
from typing import Any


class UnixHttpHandler(BaseHTTPRequestHandler):
    """A request of a ``UnixHttpServer``: its peer is named ``PEER`` (a unix socket has no
    address) and its access lines go at DEBUG, after ``LOG_PREFIX``, to the subclass's logger."""

    PEER = "unix-socket"
    LOG_PREFIX = ""

    def address_string(self) -> str:
        return self.PEER

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
