"""The sockets the supervisor holds and checks."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from sagemaker_tfs.supervisor.sockets import HeldSocket, port_is_free


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
