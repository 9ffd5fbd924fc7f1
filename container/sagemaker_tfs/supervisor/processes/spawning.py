"""How a supervised process is started, and the record of who started which.

Every process is forked by one long-lived spawner thread (``spawn``) with a parent-death
signal and its nice level (``child_setup``); each is recorded as its owner's
(``owned_processes``) so that ``children.reap_orphans`` reaps only processes nobody owns.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import ctypes
import logging
import os
import signal
import subprocess
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Protocol

logger = logging.getLogger(__name__)

PR_SET_PDEATHSIG = 1  # linux/prctl.h
PR_SET_CHILD_SUBREAPER = 36
PR_GET_CHILD_SUBREAPER = 37


class ProcessOwner(Protocol):
    """What started a supervised process and reaps it (a Child, the standby)."""

    process: subprocess.Popen[bytes] | None


class OwnedProcesses:
    """Every owner that has started a process, and a lock that makes "fork + record the Popen"
    atomic for reap_orphans: otherwise it could reap a process that exited before its Popen
    was stored, and Popen would then report exit code 0 instead of the real one. A process
    handed from one owner to another (the standby becoming a Child) moves under this lock too.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._owners: weakref.WeakSet[ProcessOwner] = weakref.WeakSet()

    @contextlib.contextmanager
    def recording(self, owner: ProcessOwner) -> Iterator[None]:
        """Under the lock: the block starts ``owner.process``, which is then recorded."""
        with self.lock:
            yield
            self._owners.add(owner)

    def running_pids(self) -> set[int]:
        """The processes owners started that Popen has not reaped yet (hold ``lock``)."""
        return {
            owner.process.pid
            for owner in list(self._owners)
            if owner.process is not None and owner.process.returncode is None
        }


owned_processes = OwnedProcesses()


try:
    _prctl: Callable[..., int] | None = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):
    _prctl = None


AUTOGROUP_FILE = "/proc/self/autogroup"


def child_setup(
    death_signal: signal.Signals, parent_pid: int, nice: int = 0
) -> Callable[[], None] | None:
    """A ``preexec_fn``: ``death_signal`` when the parent dies, and ``nice`` levels lower.

    PR_SET_PDEATHSIG survives exec, so a SIGKILLed supervisor leaves no child serving on its
    ports; if the parent died between fork and prctl, the child signals itself. The nice
    value survives exec and every thread inherits it. Where the kernel shares the CPU between
    sessions first (autogroup: a host's root cgroup), the child's new session is niced too.
    """
    prctl = _prctl
    if prctl is None and not nice:
        return None

    def preexec() -> None:
        if nice:
            os.nice(nice)
            with contextlib.suppress(OSError), open(AUTOGROUP_FILE, "w") as autogroup:
                autogroup.write(str(nice))
        if prctl is not None:
            prctl(PR_SET_PDEATHSIG, ctypes.c_ulong(death_signal))
            if os.getppid() != parent_pid:
                os.kill(os.getpid(), death_signal)

    return preexec


def spawn(
    argv: Sequence[str],
    env: dict[str, str],
    death_signal: signal.Signals,
    pass_fds: Sequence[int] = (),
    stdin: int | None = None,
    nice: int = 0,
) -> subprocess.Popen[bytes]:
    """Start a child from the one long-lived spawner thread.

    The parent-death signal fires when the *thread* that forked the child ends, not only the
    process: children started from short-lived threads (control API requests) would be killed
    as soon as their request was answered.
    """
    preexec = child_setup(death_signal, os.getpid(), nice)
    return _SPAWNER.submit(
        lambda: subprocess.Popen(
            list(argv),
            env=env,
            start_new_session=True,
            pass_fds=tuple(pass_fds),
            stdin=stdin,
            preexec_fn=preexec,  # noqa: PLW1509
        )
    ).result()


_SPAWNER = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="spawner")


def become_subreaper() -> bool:
    """Make orphaned descendants (e.g. workers of a dead nginx master) our children.

    In the container ``serve`` is PID 1 and gets them anyway; on a host this gives the same
    behaviour. Linux only: elsewhere this logs at DEBUG and returns False.
    """
    if _prctl is None or _prctl(PR_SET_CHILD_SUBREAPER, ctypes.c_ulong(1)) != 0:
        logger.debug("cannot become a child subreaper: %s", os.strerror(ctypes.get_errno()))
        return False
    return True


def adopts_orphans() -> bool:
    """Whether this process gets its orphaned descendants: PID 1 or a child subreaper."""
    if os.getpid() == 1:
        return True
    flag = ctypes.c_int(0)
    if _prctl is None or _prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(flag)) != 0:
        return False
    return flag.value == 1
