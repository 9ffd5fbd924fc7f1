"""One polling loop for every wait of the supervisor (models AVAILABLE, the service answering
/ping, nginx listening), and what a start-up wait that fails raises."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from sagemaker_tfs.supervisor.children import Child, describe_exit

POLL_SECONDS = 0.1


class StartupError(RuntimeError):
    """The stack could not be started; the message says why."""


class StopRequested(Exception):
    """SIGTERM/SIGINT arrived while the stack was still starting."""


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


def starting(child: Child, stop_requested: threading.Event) -> Callable[[], bool]:
    """Whether a start-up wait for ``child`` goes on: it runs and no stop was asked."""
    return lambda: child.running() and not stop_requested.is_set()


def wait_while_starting(
    child: Child, condition: Callable[[], bool], timeout: float, stop_requested: threading.Event
) -> bool:
    """``poll_until`` while ``child`` starts; StopRequested when a stop ended the wait."""
    if poll_until(condition, timeout, POLL_SECONDS, starting(child, stop_requested)):
        return True
    raise_if_stop_requested(stop_requested)
    return False


def raise_if_stop_requested(stop_requested: threading.Event) -> None:
    if stop_requested.is_set():
        raise StopRequested()


def exit_of(child: Child) -> str:
    """``exited with code 1`` or ``was killed by SIGTERM``, for a child that is gone."""
    code = child.exit_code()
    return "exited" if code is None else describe_exit(code)
