"""The sockets the supervisor holds and checks."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest
from local_ports import free_port
from sagemaker_tfs.ports import port_is_free
from sagemaker_tfs.supervisor.processes.sockets import HeldPort, HeldSocket, http_answers


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


def _accepted(listener: socket.socket) -> int:
    """How many connections wait in ``listener``'s queue (accepted and closed here)."""
    listener.setblocking(False)
    count = 0
    while True:
        try:
            connection, _ = listener.accept()
        except BlockingIOError:
            return count
        connection.close()
        count += 1


def _connections_go_to(port: int, fd: int, others: list[socket.socket]) -> None:
    """20 new connections all wait on the socket now at ``fd``, none on ``others``."""
    clients = [socket.create_connection(("127.0.0.1", port)) for _ in range(20)]
    time.sleep(0.05)
    with socket.socket(fileno=os.dup(fd)) as current:
        counts = [_accepted(other) for other in others] + [_accepted(current)]
    for client in clients:
        client.close()
    assert counts == [0] * len(others) + [20]


def test_a_hand_over_sends_every_new_connection_to_the_new_socket() -> None:
    """The held port handed over twice while the old sockets' holders live (nginx workers of
    dead masters), then the first holder gone: the newest socket takes every connection."""
    port = free_port()
    held = HeldPort(port)
    fd = held.ensure()
    holders: list[subprocess.Popen[bytes]] = []
    olds: list[socket.socket] = []
    try:
        for _ in range(2):
            holders.append(
                subprocess.Popen(["sleep", "60"], start_new_session=True, pass_fds=(fd,))
            )
            olds.append(socket.socket(fileno=os.dup(fd)))
            held.hand_over(holders[-1].pid)
            assert held.fd == fd
            _connections_go_to(port, fd, olds)
        holders[0].kill()
        holders[0].wait()
        olds.pop(0).close()  # its socket is gone, and the kernel moves the newest to its place
        held.forget(holders[0].pid)
        _connections_go_to(port, fd, olds)
    finally:
        for holder in holders:
            holder.kill()
            holder.wait()
        for old in olds:
            old.close()
        held.close()


def test_no_hand_over_when_the_holder_is_gone() -> None:
    port = free_port()
    held = HeldPort(port)
    fd = held.ensure()
    try:
        before = os.fstat(fd).st_ino
        held.hand_over(2**22 - 3)  # no such group: the successor takes the same socket
        assert held.fd == fd and os.fstat(fd).st_ino == before
    finally:
        held.close()
