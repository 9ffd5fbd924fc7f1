"""What the tiers' launchers share: the one polling loop of every start-up wait (models
AVAILABLE, the service answering /ping, nginx listening), the errors a failed wait raises, and
``TierLauncher``, what every launcher is given."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from sagemaker_tfs.stack_config import StackConfig
from sagemaker_tfs.supervisor.processes.children import Child, ChildGroup, describe_exit

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


def exit_of(child: Child) -> str:
    """``exited with code 1`` or ``was killed by SIGTERM``, for a child that is gone."""
    code = child.exit_code()
    return "exited" if code is None else describe_exit(code)


@dataclass(eq=False)
class TierLauncher:
    """The stack's config, every child's environment, the children (by tier) and the flag
    that a stop signal sets: a launcher starts its tier's children into ``children``."""

    config: StackConfig
    env: dict[str, str]
    children: ChildGroup
    stop_requested: threading.Event

    def __post_init__(self) -> None:
        """What a launcher holds besides (its sockets, its files), set up by its own."""

    def starting(self, child: Child) -> Callable[[], bool]:
        """Whether a start-up wait for ``child`` goes on: it runs and no stop was asked."""
        return lambda: child.running() and not self.stop_requested.is_set()

    def raise_if_stop_requested(self) -> None:
        if self.stop_requested.is_set():
            raise StopRequested()

    def wait_while_starting(
        self, child: Child, condition: Callable[[], bool], timeout: float
    ) -> bool:
        """``poll_until`` while ``child`` starts; StopRequested when a stop ended the wait."""
        if poll_until(condition, timeout, POLL_SECONDS, self.starting(child)):
            return True
        self.raise_if_stop_requested()
        return False
