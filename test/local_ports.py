"""A free TCP port on this machine, for every test that starts a server (one implementation;
``test/`` is on the import path through the root conftest)."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A TCP port that was free a moment ago (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
