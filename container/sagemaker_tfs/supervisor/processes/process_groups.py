"""Process groups of children that died: waited for, or left to finish their work.

A supervised child runs in a session of its own, so its pid names its process group. When it
dies, what is left of the group is either killed and waited for (``wait_group_gone``), or
left to drain (``DrainingGroups``): nginx's workers outlive a killed master and serve on the
connections they hold, while the new master takes every new one (``sockets.HeldPort``); they
are told to quit (SIGQUIT) once they hold none (``group_connections``), so that their
graceful quit closes no kept-alive connection a client may be sending on at that instant.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

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


def group_pids(pgid: int) -> list[int]:
    """The processes of group ``pgid`` (read from /proc: empty where there is none)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()  # after the name, which may hold spaces
        if len(fields) > 2 and fields[2] == str(pgid):
            pids.append(int(entry.name))
    return pids


def group_connections(pgid: int, port: int) -> int:
    """The TCP connections on local ``port`` that processes of group ``pgid`` hold (its
    listening sockets not counted): the clients an nginx's workers still serve."""
    inodes = set()
    for pid in group_pids(pgid):
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    target = os.readlink(f"/proc/{pid}/fd/{fd}")
                    if target.startswith("socket:["):
                        inodes.add(target[8:-1])
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6") if inodes else ():
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                listening = fields[3] == "0A"
                if not listening and int(fields[1].rsplit(":", 1)[1], 16) == port:
                    count += fields[9] in inodes
    return count


# How often a serving group's connections are counted (a scan of /proc).
BUSY_CHECK_SECONDS = 0.2


class DrainingGroups:
    """Groups told to finish their work and exit, each killed if still there at its deadline.

    With ``busy`` (nginx's), a group first serves on, untold, while ``busy(pgid)`` holds (its
    workers still have client connections) and for at most ``serve_seconds``; only then is
    it sent the signal. A group is forgotten as soon as its last process is gone (checked
    each watch round, after the orphans are reaped), so that its number, which a later
    child's session may take, is never signalled again. The watch thread checks, a stopping
    thread waits and kills: neither assumes the other left a group in place."""

    def __init__(
        self,
        name: str,
        busy: Callable[[int], bool] | None = None,
        serve_seconds: float = 0.0,
        gone: Callable[[int], None] = lambda pgid: None,
    ) -> None:
        self.name = name
        self._gone = gone  # told of each group found gone
        self._deadlines: dict[int, float] = {}
        self._busy = busy
        self._serve_seconds = serve_seconds
        # Groups serving on: pgid -> (signal, its quit's deadline in seconds, serve until).
        self._serving: dict[int, tuple[signal.Signals, float, float]] = {}
        self._next_busy_check = 0.0

    def drain(self, pgid: int, sig: signal.Signals, deadline: float) -> None:
        if self._busy is not None and group_exists(pgid):
            now = time.monotonic()
            self._serving[pgid] = (sig, deadline - now, now + self._serve_seconds)
            logger.info("%s: the leftovers of pid %d serve the connections they hold",
                        self.name, pgid)  # fmt: skip
            return
        self._quit(pgid, sig, deadline)

    def _quit(self, pgid: int, sig: signal.Signals, deadline: float) -> None:
        if signal_group(pgid, sig):
            self._deadlines[pgid] = deadline
            logger.info("%s: %s to the leftovers of pid %d: they finish what they hold",
                        self.name, sig.name, pgid)  # fmt: skip

    def __contains__(self, pgid: int) -> bool:
        return pgid in self._serving or pgid in self._deadlines

    def check(self, now: float) -> None:
        """Forget the groups that are gone; tell those idle (or past their serving bound) to
        quit; kill those past their deadline."""
        if self._serving and now >= self._next_busy_check:
            self._next_busy_check = now + BUSY_CHECK_SECONDS
            for pgid, (sig, quit_seconds, until) in list(self._serving.items()):
                if not group_exists(pgid):
                    self._serving.pop(pgid)
                    self._gone(pgid)
                elif now >= until or not (self._busy and self._busy(pgid)):
                    self._serving.pop(pgid)
                    self._quit(pgid, sig, now + quit_seconds)
        for pgid, deadline in list(self._deadlines.items()):
            if not group_exists(pgid):
                self._deadlines.pop(pgid, None)
                self._gone(pgid)
            elif now >= deadline:
                self._deadlines.pop(pgid, None)
                if signal_group(pgid, signal.SIGKILL):
                    logger.warning("%s: the leftovers of pid %d did not finish in time: killed",
                                   self.name, pgid)  # fmt: skip

    def quit_serving(self) -> None:
        """Tell the groups still serving to quit now (the stack stops)."""
        now = time.monotonic()
        for pgid, (sig, quit_seconds, _) in list(self._serving.items()):
            self._serving.pop(pgid)
            self._quit(pgid, sig, now + quit_seconds)

    def wait_gone(self, until: float) -> None:
        """Until every group is gone or the monotonic ``until`` (then kill_all's turn); those
        still serving are told to quit first."""
        self.quit_serving()
        for pgid in list(self._deadlines):
            if wait_group_gone(pgid, max(0.0, until - time.monotonic())):
                self._deadlines.pop(pgid, None)

    def kill_all(self) -> None:
        for pgid in [*self._deadlines, *self._serving]:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
        self._deadlines.clear()
        self._serving.clear()

    def __len__(self) -> int:
        return len(self._deadlines) + len(self._serving)
