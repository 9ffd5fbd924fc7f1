"""Supervised child processes: start, notice an exit, restart, stop; orphans reaped.

Each child runs in its own session (its whole process group can be signalled) and gets a
parent-death signal, so a SIGKILLed supervisor leaves nothing on its ports. The restart
policy tells a crash (restart at once) from a failed start-up (restart after a doubling
backoff): see ``Child``. ``serve`` also reaps orphaned processes: it is PID 1 in the
container, and a child subreaper elsewhere.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence

from sagemaker_tfs.supervisor.processes.process_groups import DrainingGroups, wait_group_gone
from sagemaker_tfs.supervisor.processes.spawning import ProcessOwner, owned_processes, spawn

logger = logging.getLogger(__name__)

READY_POLL_SECONDS = 0.1
FIRST_BACKOFF_SECONDS = 0.5
MAX_BACKOFF_SECONDS = 10.0
# A child without a readiness check counts as started once it has run this long.
READY_AFTER_SECONDS = 2.0
GROUP_EXIT_SECONDS = 1.0


class Child:
    """One supervised process, started in its own session and restarted when it exits.

    The restart policy tells a crash from a failed start-up. A child that became ready (its
    ``ready_check`` passed, or it ran ``READY_AFTER_SECONDS`` when it has none) and then
    exits, whatever killed it, is restarted at once, every time. A child that exits before it
    was ready (bad configuration, a port taken, a model that cannot load) is restarted after a
    backoff that doubles up to ``MAX_BACKOFF_SECONDS``, so a process that cannot start does
    not spin; the backoff starts over once it is ready again. Every exit is one log line.
    """

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        env: dict[str, str],
        stop_signal: signal.Signals = signal.SIGTERM,
        stop_timeout: float = 30.0,
        ready_check: Callable[[], bool] | None = None,
        death_signal: signal.Signals = signal.SIGKILL,
        before_start: Callable[[], None] | None = None,
        pass_fds: Sequence[int] = (),
        take_standby: Callable[[Sequence[str]], subprocess.Popen[bytes] | None] | None = None,
        leftovers_serve_until_replaced: bool = False,
        leftovers_drain_signal: signal.Signals | None = None,
        nice: int = 0,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.env = env
        self.stop_signal = stop_signal
        self.stop_timeout = stop_timeout
        self.ready_check = ready_check
        self.death_signal = death_signal
        self.before_start = before_start
        self.pass_fds = tuple(pass_fds)
        # A process started ahead that becomes this child, or None (standby_model_server.py).
        self.take_standby = take_standby
        # gunicorn: the workers of a master that died serve on until its successor is ready.
        self.leftovers_serve_until_replaced = leftovers_serve_until_replaced
        self.leftover_group: int | None = None
        # nginx: the workers of a master that died get this signal and finish their requests
        # (up to stop_timeout) while the successor starts at once (process_groups.py).
        self.leftovers_drain_signal = leftovers_drain_signal
        self.draining = DrainingGroups(name)
        self.nice = nice
        self.process: subprocess.Popen[bytes] | None = None
        self.started_at = 0.0
        self.ready = False
        self.backoff = FIRST_BACKOFF_SECONDS
        self.restart_at: float | None = None
        self.restarts = 0
        self.failed_starts = 0
        self.stopping = False
        self._next_ready_poll = 0.0
        # check() (watch thread) and stop() (any thread) must not interleave: a restart
        # racing a stop would leave an unsupervised process behind.
        self._lock = threading.Lock()

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def start(self) -> None:
        # Own session: a Ctrl-C in a terminal reaches only the supervisor, which then stops
        # the children in order, and the whole group (e.g. gunicorn workers) can be killed.
        if self.before_start is not None:
            self.before_start()
        with owned_processes.recording(self):
            standby = self.take_standby(self.argv) if self.take_standby is not None else None
            self.process = standby or spawn(
                self.argv, self.env, self.death_signal, self.pass_fds, nice=self.nice
            )
        self.started_at = time.monotonic()
        self.ready = False
        self.restart_at = None
        self._next_ready_poll = 0.0
        how = " from the standby" if standby else ""
        logger.info("started %s (pid %d)%s: %s", self.name, self.pid, how, " ".join(self.argv))

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def exit_code(self) -> int | None:
        """The exit status of the process that ended (negative: the signal that ended it);
        None while it runs or before it started."""
        return self.process.poll() if self.process is not None else None

    def mark_ready(self, now: float | None = None) -> None:
        """The child is serving: a later exit is a crash (restart at once), not a failed start."""
        if self.ready:
            return
        self.ready = True
        self.backoff = FIRST_BACKOFF_SECONDS
        self.failed_starts = 0
        if self.restarts:
            elapsed = (now or time.monotonic()) - self.started_at
            logger.info("%s (pid %s) ready %.2fs after restart", self.name, self.pid, elapsed)
        self._stop_leftovers(signal.SIGTERM)

    def _stop_leftovers(self, sig: signal.Signals) -> None:
        """Stop what is left of the process group of the previous process, if any."""
        group, self.leftover_group = self.leftover_group, None
        if group is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, sig)
            logger.info("%s: %s to the leftovers of pid %d", self.name, sig.name, group)

    def check(self, now: float) -> None:
        """Notice an exit and restart (at once, or after the backoff); notice readiness."""
        with self._lock:
            self._check(now)

    def _check(self, now: float) -> None:
        self.draining.check(now)
        if self.stopping or self.process is None:
            return
        if self.restart_at is not None:
            if now >= self.restart_at:
                self._restart()
            return
        code = self.process.poll()
        if code is None:
            self._poll_ready(now)
            return
        self._end_group(self.ready)
        ran = now - self.started_at
        if self.ready:
            logger.warning("%s (pid %d) %s after running %.1fs; restarting it now",
                           self.name, self.process.pid, describe_exit(code), ran)  # fmt: skip
            self._restart()
            return
        self.failed_starts += 1
        self.restart_at = now + self.backoff
        logger.error(
            "%s (pid %d) %s %.1fs after start, before it was ready (failed start %d in a row); "
            "restarting in %.1fs",
            self.name,
            self.process.pid,
            describe_exit(code),
            ran,
            self.failed_starts,
            self.backoff,
        )
        self.backoff = min(self.backoff * 2, MAX_BACKOFF_SECONDS)

    def _end_group(self, was_ready: bool) -> None:
        """What is left of the exited process's group: killed, or serving on until a
        successor is ready (``leftovers_serve_until_replaced``), however many tries that takes."""
        assert self.process is not None
        if was_ready and self.leftovers_serve_until_replaced:
            self.leftover_group = self.process.pid  # none before: mark_ready stopped those
            return
        if was_ready and self.leftovers_drain_signal is not None:
            deadline = time.monotonic() + self.stop_timeout
            self.draining.drain(self.process.pid, self.leftovers_drain_signal, deadline)
            return
        # Leftovers of a group that failed its start are killed and waited for: they may hold
        # what the next start needs (e.g. a port).
        self._signal_group(signal.SIGKILL)
        wait_group_gone(self.process.pid, GROUP_EXIT_SECONDS)

    def restart_after_crash(self) -> None:
        """Start again at once after an exit that a start-up wait saw, not ``check``."""
        with self._lock:
            assert self.process is not None and self.process.poll() is not None
            self._end_group(was_ready=False)
            self._restart()

    def _restart(self) -> None:
        """Start again; a start that fails (no fork, no binary) is retried after the backoff:
        the watch loop must go on, or nothing would be restarted again."""
        self.restarts += 1
        try:
            self.start()
        except OSError as error:
            later = getattr(error, "retry_seconds", None)  # e.g. a zygote still importing
            self.restart_at = time.monotonic() + (later or self.backoff)
            if later is None:
                logger.error(
                    "cannot start %s: %s; trying again in %.1fs", self.name, error, self.backoff
                )
                self.backoff = min(self.backoff * 2, MAX_BACKOFF_SECONDS)

    def _poll_ready(self, now: float) -> None:
        if self.ready or now < self._next_ready_poll:
            return
        self._next_ready_poll = now + READY_POLL_SECONDS
        if self.ready_check is None:
            ready = now - self.started_at >= READY_AFTER_SECONDS
        else:
            try:
                ready = self.ready_check()
            except Exception as error:  # noqa: BLE001 - a failed check means "not ready yet"
                logger.debug("%s readiness check failed: %s", self.name, error)
                ready = False
        if ready:
            self.mark_ready(now)

    def stop(self) -> None:
        """Ask the process to stop, wait for it, then kill its whole process group."""
        self.request_stop()
        self.wait_stopped()

    def request_stop(self) -> None:
        """Send the stop signal and stop restarting (returns at once)."""
        with self._lock:
            self.stopping = True
        if self.process is not None and self.process.poll() is None:
            logger.info(
                "stopping %s (pid %d) with %s", self.name, self.process.pid, self.stop_signal.name
            )
            self._signal_group(self.stop_signal)
        if self.leftover_group is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.leftover_group, self.stop_signal)

    def wait_stopped(self, deadline: float | None = None) -> None:
        """Wait up to the stop timeout (or until the monotonic ``deadline``, if sooner), then
        kill what is left of the process group: the work it still had in flight is cut."""
        if self.process is None:
            return
        timeout = self.stop_timeout if deadline is None else deadline - time.monotonic()
        timeout = max(0.0, min(timeout, self.stop_timeout))
        until = time.monotonic() + timeout
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            logger.warning("%s did not stop in %.1fs: killing it, cutting what it still had "
                           "in flight", self.name, timeout)  # fmt: skip
        self.draining.wait_gone(until)
        self._signal_group(signal.SIGKILL)
        self._stop_leftovers(signal.SIGKILL)
        self.draining.kill_all()
        self.process.wait()

    def _signal_group(self, sig: signal.Signals) -> None:
        assert self.process is not None
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, sig)


class TierStopping(RuntimeError):
    """A child was to start in a tier of a ``ChildGroup`` that is already stopping."""


class ChildGroup:
    """The children of one stack, by tier: tiers start in the order given, stop in reverse.

    The children of one tier are independent of each other (the model servers) and stop
    together: each gets its stop signal, then each is waited for (its own stop timeout).
    Once a tier has begun to stop it starts no new child, so a model load racing the
    shutdown cannot leave a process behind.
    """

    def __init__(self, tiers: Sequence[str]) -> None:
        self._tiers: dict[str, dict[str, Child]] = {tier: {} for tier in tiers}
        self._stopping: set[str] = set()
        self._lock = threading.Lock()

    def start(self, tier: str, child: Child) -> None:
        """Start ``child`` as a member of ``tier``; TierStopping once that tier stops."""
        with self._lock:
            if tier in self._stopping:
                raise TierStopping(f"{child.name} not started: the {tier} are stopping")
            self._tiers[tier][child.name] = child
            child.start()

    def get(self, name: str) -> Child | None:
        with self._lock:
            for children in self._tiers.values():
                if name in children:
                    return children[name]
        return None

    def stop_child(self, name: str) -> None:
        """Stop ``name`` and forget it (nothing happens for an unknown name)."""
        with self._lock:
            child = None
            for children in self._tiers.values():
                child = children.pop(name, child)
        if child is not None:
            child.stop()

    def members(self, tier: str) -> list[Child]:
        with self._lock:
            return list(self._tiers[tier].values())

    def children(self) -> list[Child]:
        """Every child, the last tier first (the order they are stopped in)."""
        with self._lock:
            return [child for tier in reversed(self._tiers.values()) for child in tier.values()]

    def check(self, now: float) -> None:
        for child in self.children():
            child.check(now)

    def stop(self, deadline_of: Callable[[str], float | None] = lambda _tier: None) -> None:
        """Stop the tiers in reverse order, the children of each tier together, each tier by
        its ``deadline_of(tier)`` (monotonic; None: the children's own stop timeouts)."""
        for tier in reversed(list(self._tiers)):
            with self._lock:
                self._stopping.add(tier)
                children = list(self._tiers[tier].values())
                self._tiers[tier].clear()
            for child in children:
                child.request_stop()
            for child in children:
                child.wait_stopped(deadline_of(tier))


def spawn_for(
    owner: ProcessOwner,
    argv: Sequence[str],
    env: dict[str, str],
    death_signal: signal.Signals = signal.SIGKILL,
    stdin: int | None = None,
    nice: int = 0,
) -> subprocess.Popen[bytes]:
    """``spawn`` a process and record it as ``owner``'s, atomically for ``reap_orphans``."""
    with owned_processes.recording(owner):
        owner.process = spawn(argv, env, death_signal, stdin=stdin, nice=nice)
    return owner.process


def describe_exit(code: int) -> str:
    """``exited with code 3`` or ``was killed by SIGKILL`` (Popen's negative codes)."""
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"was killed by {signal.Signals(-code).name}"
        return f"was killed by signal {-code}"
    return f"exited with code {code}"


def reap_orphans() -> None:
    """Wait for exited processes that are not a Child's own: orphans reparented to us.

    ``serve`` runs as PID 1 without an init, so every orphan in the container becomes its
    child; unless it waits for them they stay zombies forever. A Child's process is left alone
    (only peeked at with WNOWAIT): Popen.poll reaps it and needs its exit status.
    """
    with owned_processes.lock:
        while True:
            try:
                exited = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                return  # no children at all
            if exited is None:
                return  # none has exited
            if exited.si_pid in owned_processes.running_pids():
                return  # Popen.poll reaps it on the next round
            try:
                pid, status = os.waitpid(exited.si_pid, os.WNOHANG)
            except ChildProcessError:
                continue
            if pid == 0:
                return
            logger.debug(
                "reaped orphan pid %d (exit status %d)", pid, os.waitstatus_to_exitcode(status)
            )
