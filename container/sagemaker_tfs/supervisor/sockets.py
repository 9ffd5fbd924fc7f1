"""Sockets of the stack: the listening sockets the supervisor holds for its children (the
public port for nginx, the Python service's unix socket for gunicorn) and the checks that tell
whether something answers there."""

from __future__ import annotations

import logging
import os
import socket
from pathlib import Path

logger = logging.getLogger(__name__)

BACKLOG = 2048


class HeldListener:
    """A listening socket the supervisor keeps open (its fd) for the children it hands it to."""

    fd: int | None = None

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class HeldSocket(HeldListener):
    """The Python service's listening unix socket, made and kept open by the supervisor.

    gunicorn gets it as ``--bind=fd://N``. While gunicorn restarts, nginx's connections wait in
    the backlog and the new gunicorn serves them, instead of being refused (a 503 for each).
    Always the same fd number; made again when its path is gone (a gunicorn that stops on its
    own unlinks it).
    """

    def __init__(self, path: str) -> None:
        self.path = path

    def ensure(self) -> int:
        if self.fd is not None and os.path.exists(self.path):
            return self.fd
        Path(self.path).unlink(missing_ok=True)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(self.path)
        sock.listen(BACKLOG)
        if self.fd is None:
            self.fd = sock.detach()
        else:
            os.dup2(sock.fileno(), self.fd)
            sock.close()
            logger.info("service socket %s made again", self.path)
        return self.fd


class HeldPort(HeldListener):
    """The public TCP port, bound and kept open by the supervisor and handed to nginx.

    nginx inherits it through the ``NGINX`` environment variable (``"FD;"``, the way its binary
    upgrade hands sockets over) and uses it for its ``listen`` of the same address. When the
    nginx master dies, clients that connect before the new one is up wait in the backlog
    instead of being refused.
    """

    def __init__(self, port: int) -> None:
        self.port = port

    def ensure(self) -> int:
        """The socket's fd, bound on first use; OSError if the port is taken."""
        if self.fd is None:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.bind(("0.0.0.0", self.port))
                sock.listen(BACKLOG)
            except OSError:
                sock.close()
                raise
            self.fd = sock.detach()
        return self.fd

    def inherit_env(self) -> dict[str, str]:
        return {"NGINX": f"{self.ensure()};"}


def service_answers_ping(socket_path: str, timeout: float = 2.0, http_version: str = "1.0") -> bool:
    """GET /ping over the service's unix socket answers 200 (the stream server takes only
    HTTP/1.1)."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout)
            sock.connect(socket_path)
            request = f"GET /ping HTTP/{http_version}\r\nHost: localhost\r\nConnection: close"
            sock.sendall(request.encode() + b"\r\n\r\n")
            return sock.recv(64).split(b" ")[1:2] == [b"200"]
    except (OSError, IndexError):
        return False


def http_answers(port: int, path: str, timeout: float = 1.0) -> bool:
    """Something answers HTTP on ``port`` (any status): a server accepts and reads requests,
    which a connection alone does not show when the supervisor holds the listening socket."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
            sock.sendall(f"GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n".encode())
            return sock.recv(16).startswith(b"HTTP/1.")
    except OSError:
        return False
