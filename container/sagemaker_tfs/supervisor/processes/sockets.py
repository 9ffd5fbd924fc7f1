"""Sockets of the stack: the listening sockets the supervisor holds for its children (the
public port for nginx, the Python service's unix socket for gunicorn) and the checks that tell
whether something answers there."""

from __future__ import annotations

import ctypes
import logging
import os
import socket
import struct
from pathlib import Path

from sagemaker_tfs.supervisor.processes.process_groups import group_exists

logger = logging.getLogger(__name__)

BACKLOG = 2048
# Linux's socket option that sets a classic BPF program choosing, among the listening sockets
# of a port's SO_REUSEPORT group, the one a new connection goes to (by its index there).
SO_ATTACH_REUSEPORT_CBPF = 51


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
        # The port's listening sockets, in the order the kernel keeps them in its SO_REUSEPORT
        # group: the process group of the nginx left holding each, None for the current one.
        self._group: list[int | None] = []

    def ensure(self) -> int:
        """The socket's fd, bound on first use; OSError if the port is taken."""
        if self.fd is None:
            self.fd = _listen(self.port, reuseport=False).detach()
        return self.fd

    def hand_over(self, holder: int) -> None:
        """A new listening socket on the port, under the same fd, which takes every new
        connection from now on; the current one is left to process group ``holder`` (a dead
        nginx master's workers), which serves the connections it has and accepts no new one.

        Both sockets are in one SO_REUSEPORT group, with a BPF program that sends each new
        connection to the newest (the kernel's own choice would spread them by their
        addresses). A socket leaves the group when the last process holding it closes it (its
        workers quit): the kernel then moves the group's last socket to its place, which
        ``_group`` follows. Nothing changes when the group is gone already: the successor
        takes the current socket. Raises OSError if the new socket cannot be made."""
        assert self.fd is not None
        if not group_exists(holder):
            return
        with socket.socket(fileno=os.dup(self.fd)) as current:
            current.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        new = _listen(self.port, reuseport=True)
        self._group = self._group or [None]
        self._group[self._group.index(None)] = holder
        self._group.append(None)
        self._forget_gone()
        _steer_to(new, self._group.index(None))
        os.dup2(new.fileno(), self.fd, inheritable=False)  # the holder keeps the old one
        new.close()

    def forget(self, holder: int) -> None:
        """``holder``'s group is gone, and its socket with it: new connections still go to
        the current socket, at its new place in the group."""
        if self.fd is not None and holder in self._group:
            self._remove(holder)
            with socket.socket(fileno=os.dup(self.fd)) as current:
                _steer_to(current, self._group.index(None))

    def _forget_gone(self) -> None:
        for holder in [h for h in self._group if h is not None and not group_exists(h)]:
            self._remove(holder)

    def _remove(self, holder: int) -> None:
        index = self._group.index(holder)
        self._group[index] = self._group[-1]
        self._group.pop()

    def inherit_env(self) -> dict[str, str]:
        return {"NGINX": f"{self.ensure()};"}


def _listen(port: int, reuseport: bool) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuseport:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(("0.0.0.0", port))
        sock.listen(BACKLOG)
    except OSError:
        sock.close()
        raise
    return sock


def _steer_to(sock: socket.socket, index: int) -> None:
    """Every new connection of ``sock``'s SO_REUSEPORT group to its socket ``index`` (a
    one-instruction program, ``ret #index``; an index past the group's end falls back to the
    kernel's spread)."""
    program = (ctypes.c_ubyte * 8).from_buffer_copy(struct.pack("HBBI", 0x06, 0, 0, index))
    sock_fprog = struct.pack("HP", 1, ctypes.addressof(program))  # struct sock_fprog
    sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, sock_fprog)


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
