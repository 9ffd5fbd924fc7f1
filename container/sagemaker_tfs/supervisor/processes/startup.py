"""What the tiers' launchers share: the one polling loop of every start-up wait (models
AVAILABLE, the service answering /ping, nginx listening), the errors a failed wait raises,
and ``TierLauncher``, what every launcher is given, what the Supervisor asks of a tier once
it is started, and how it watches and stops its own children."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

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
    """One tier of the stack (nginx, the Python service, the model servers) as the Supervisor
    sees it: the stack's config, every child's environment and the flag that a stop signal
    sets; the launcher starts its tier's children into its own ``children``, watches and stops
    them (the tier's processes, sockets and ports are its own business). ``name``: the tier's
    (each launcher's ``TIER``, the key of ``STOP_DEADLINES``).

    A stop goes in two passes over the tiers in stop order: ``begin_stop`` on each (quick: no
    wait), then ``stop`` on each, so that what must happen before any tier is waited for
    (nginx's port closed, the stream server's WebSockets closed) does not wait for nginx.
    """

    name = "tier"
    config: StackConfig
    env: dict[str, str]
    stop_requested: threading.Event
    children: ChildGroup = field(init=False)

    def __post_init__(self) -> None:
        """A launcher that holds more (its sockets, its files) sets them up after this."""
        self.children = ChildGroup((self.name,))

    def members(self) -> list[Child]:
        """The tier's children (those the metrics report)."""
        return self.children.children()

    def check(self, now: float) -> None:
        """One round of the watch loop: restart what exited, start what it keeps warm."""
        self.children.check(now)

    def begin_stop(self) -> None:
        """The first step of the stop, at once and without waiting (nothing, unless a
        launcher says otherwise)."""

    def stop(self, deadline: float) -> None:
        """Each child gets its stop signal, then each is waited for until ``deadline``
        (monotonic); whatever is left then is killed."""
        self.children.stop(lambda _tier: deadline)

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
