"""Process groups of children that died: waited for, or left to finish their work.

A supervised child runs in a session of its own, so its pid names its process group. When it
dies, what is left of the group is either killed and waited for (``wait_group_gone``), or
left to drain (``DrainingGroups``): nginx's workers outlive a killed master, and a graceful
quit (SIGQUIT) lets them finish the requests they hold, while the new master serves new
connections on the same listening socket (the supervisor holds it, ``sockets.HeldPort``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time

logger = logging.getLogger(__name__)


def wait_group_gone(pgid: int, timeout: float) -> bool:
    """Until no process of group ``pgid`` is left (reaping those that are our children, as
    orphaned workers of a subreaper are); False after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            pid, _ = os.waitpid(-pgid, os.WNOHANG)
            if pid:
                continue
        except ChildProcessError:  # none of ours left; others may still be exiting
            if not group_exists(pgid):
                return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.005)


def group_exists(pgid: int) -> bool:
    """A process of group ``pgid`` is left (a zombie not reaped yet counts)."""
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def signal_group(pgid: int, sig: signal.Signals) -> bool:
    """Send ``sig`` to the group; False when no process of it is left."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


class DrainingGroups:
    """Groups told to finish their work and exit, each killed if still there at its deadline.

    A group is forgotten as soon as its last process is gone (checked each watch round, after
    the orphans are reaped), so that its number, which a later child's session may take, is
    never signalled again. The watch thread checks, a stopping thread waits and kills: neither
    assumes the other left a group in place."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._deadlines: dict[int, float] = {}

    def drain(self, pgid: int, sig: signal.Signals, deadline: float) -> None:
        if signal_group(pgid, sig):
            self._deadlines[pgid] = deadline
            logger.info("%s: %s to the leftovers of pid %d: they finish what they hold",
                        self.name, sig.name, pgid)  # fmt: skip

    def check(self, now: float) -> None:
        """Forget the groups that are gone; kill those past their deadline."""
        for pgid, deadline in list(self._deadlines.items()):
            if not group_exists(pgid):
                self._deadlines.pop(pgid, None)
            elif now >= deadline:
                self._deadlines.pop(pgid, None)
                if signal_group(pgid, signal.SIGKILL):
                    logger.warning("%s: the leftovers of pid %d did not finish in time: killed",
                                   self.name, pgid)  # fmt: skip

    def wait_gone(self, until: float) -> None:
        """Until every group is gone or the monotonic ``until`` (then kill_all's turn)."""
        for pgid in list(self._deadlines):
            if wait_group_gone(pgid, max(0.0, until - time.monotonic())):
                self._deadlines.pop(pgid, None)

    def kill_all(self) -> None:
        for pgid in list(self._deadlines):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
        self._deadlines.clear()

    def __len__(self) -> int:
        return len(self._deadlines)
