"""Sockets of the stack: the Python service's held listening socket and the checks that
tell whether something listens (a port, the service's /ping)."""

from __future__ import annotations

import logging
import os
import socket
from pathlib import Path

logger = logging.getLogger(__name__)


def port_is_free(port: int) -> bool:
    """Nothing is bound to ``port`` on 127.0.0.1 (so a child can listen there)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


class HeldSocket:
    """The Python service's listening unix socket, made and kept open by the supervisor.

    gunicorn gets it as ``--bind=fd://N``. While gunicorn restarts, nginx's connections wait in
    the backlog and the new gunicorn serves them, instead of being refused (a 503 for each).
    Always the same fd number; made again when its path is gone (a gunicorn that stops on its
    own unlinks it).
    """

    def __init__(self, path: str, backlog: int = 2048) -> None:
        self.path = path
        self.backlog = backlog
        self.fd: int | None = None

    def ensure(self) -> int:
        if self.fd is not None and os.path.exists(self.path):
            return self.fd
        Path(self.path).unlink(missing_ok=True)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(self.path)
        sock.listen(self.backlog)
        if self.fd is None:
            self.fd = sock.detach()
        else:
            os.dup2(sock.fileno(), self.fd)
            sock.close()
            logger.info("service socket %s made again", self.path)
        return self.fd

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def service_answers_ping(socket_path: str, timeout: float = 2.0) -> bool:
    """GET /ping over the service's unix socket answers 200."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout)
            sock.connect(socket_path)
            sock.sendall(b"GET /ping HTTP/1.0\r\nHost: localhost\r\n\r\n")
            return sock.recv(64).split(b" ")[1:2] == [b"200"]
    except (OSError, IndexError):
        return False


def port_accepts_connections(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0):
            return True
    except OSError:
        return False
