"""One polling loop for every wait of the supervisor: models AVAILABLE, the service answering
/ping, nginx listening."""

from __future__ import annotations

import time
from collections.abc import Callable


def poll_until(
    condition: Callable[[], bool],
    timeout: float,
    interval: float,
    keep_going: Callable[[], bool] = lambda: True,
) -> bool:
    """Ask ``condition`` every ``interval`` seconds until it is true (True), ``timeout``
    seconds have passed or ``keep_going`` turns false (False: the caller tells which).

    ``keep_going`` is asked before each try, so a process that died is noticed before its
    port is polled again.
    """
    deadline = time.monotonic() + timeout
    while keep_going():
        if condition():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)
    return False
