"""Local TCP ports: whether one is free (the supervisor picks per-model ports, the transform
driver a range for its stack)."""

from __future__ import annotations

import socket


def port_is_free(port: int) -> bool:
    """Nothing is bound to ``port`` on 127.0.0.1 (so a child can listen there)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True
