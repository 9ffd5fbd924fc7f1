"""Free TCP ports on this machine, for every test that starts a server (one implementation;
``test/`` is on the import path through the root conftest)."""

from __future__ import annotations

import random

from sagemaker_tfs.ports import port_is_free


def free_port_range(size: int) -> tuple[int, int]:
    """``size`` consecutive ports that are all free right now, below the kernel's ephemeral
    range (32768-60999): a port in it can be taken at any moment as the source port of some
    client's connection (seen: ``cannot listen on port 34924`` at start-up), or a client
    reconnecting to a dead server's port can get that very port (a TCP self-connect). Picked
    at random, so that test processes running side by side rarely pick the same."""
    for _ in range(200):
        low = random.randrange(20000, 32000 - size)
        if all(port_is_free(p) for p in range(low, low + size)):
            return low, low + size - 1
    raise RuntimeError(f"no {size} consecutive free ports below 32000")


def free_port() -> int:
    """A TCP port that was free a moment ago, below the ephemeral range."""
    return free_port_range(1)[0]
