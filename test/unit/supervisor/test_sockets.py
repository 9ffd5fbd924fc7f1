"""The sockets the supervisor holds and checks."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from pathlib import Path

import pytest
from local_ports import free_port
from sagemaker_tfs.ports import port_is_free
from sagemaker_tfs.supervisor.sockets import HeldPort, HeldSocket, http_answers


def test_the_service_socket_is_held_with_one_fd_and_made_again_when_unlinked(
    tmp_path: Path,
) -> None:
    path = tmp_path / "service.sock"
    held = HeldSocket(str(path))
    fd = held.ensure()
    try:
        assert held.ensure() == fd and path.exists()
        # Nobody accepts yet: a client's connection waits in the backlog instead of failing.
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.connect(str(path))
        path.unlink()  # as a gunicorn that stops on its own does
        assert held.ensure() == fd and path.exists()
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.connect(str(path))
            listener = socket.socket(fileno=os.dup(fd))
            conn, _ = listener.accept()
            conn.close()
            listener.close()
    finally:
        held.close()
    assert held.fd is None


def test_a_bound_port_is_not_free() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        port = busy.getsockname()[1]
        assert not port_is_free(port)
    assert port_is_free(port)


def test_the_public_port_is_held_and_queues_connections_until_a_server_accepts() -> None:
    port = free_port()
    held = HeldPort(port)
    fd = held.ensure()
    try:
        assert held.ensure() == fd
        assert held.inherit_env() == {"NGINX": f"{fd};"}
        assert not http_answers(port, "/", timeout=0.5)  # queued, but nobody reads it
        with pytest.raises(OSError):
            HeldPort(port).ensure()  # a second stack on the same port fails at once
        listener = socket.socket(fileno=os.dup(fd))
        # The first connection is the one still queued from above; the second is answered.
        answered = threading.Thread(target=_answer, args=(listener, 2))
        answered.start()
        assert http_answers(port, "/")
        answered.join(5)
        listener.close()
    finally:
        held.close()
    assert held.fd is None and port_is_free(port)


def _answer(listener: socket.socket, connections: int) -> None:
    for _ in range(connections):
        conn, _ = listener.accept()
        with conn:
            conn.recv(1024)
            with contextlib.suppress(OSError):  # the queued connection's client has gone
                conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
