"""The leftovers of a dead child told to drain (nginx's workers of a killed master): they get
the signal and finish what they hold while the successor starts at once, and are killed only
at the deadline. Real processes: a bash leader whose group keeps a worker that traps SIGQUIT.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from process_checks import alive, wait_until
from sagemaker_tfs.supervisor.processes.children import Child
from sagemaker_tfs.supervisor.processes.process_groups import (
    BUSY_CHECK_SECONDS,
    DrainingGroups,
    group_exists,
)

ENV = {"PATH": "/usr/bin:/bin"}


WORKER = """
import os, signal, sys, time
def quit(signum, frame):
    if sys.argv[2] == "finish":
        time.sleep(0.4)
        os._exit(0)
signal.signal(signal.SIGQUIT, quit)
with open(sys.argv[1] + ".tmp", "w") as marker:
    marker.write(str(os.getpid()))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
while True:
    time.sleep(0.05)
"""


def _leader_with_a_worker(marker: Path, on_quit: str) -> list[str]:
    """A leader whose group keeps a worker (python) that, on SIGQUIT, finishes in 0.4 s and
    exits (``on_quit`` "finish") or goes on."""
    script = marker.with_suffix(".py")
    script.write_text(WORKER)
    return ["bash", "-c", f"{sys.executable} {script} {marker} {on_quit} & wait"]


def _worker(marker: Path) -> int:
    assert wait_until(marker.exists)
    pid = int(marker.read_text())
    marker.unlink()
    return pid


@pytest.mark.parametrize("finishes", [True, False], ids=["finishes", "ignores the quit"])
def test_the_workers_of_a_dead_leader_drain_while_the_successor_serves(
    tmp_path: Path, finishes: bool
) -> None:
    marker = tmp_path / "worker.pid"
    on_quit = "finish" if finishes else "ignore"
    child = Child(
        "nginx-like",
        _leader_with_a_worker(marker, on_quit),
        ENV,
        stop_signal=signal.SIGQUIT,
        stop_timeout=1.5,
        ready_check=lambda: True,
        leftovers_drain_signal=signal.SIGQUIT,
    )
    child.start()
    try:
        child.check(time.monotonic())
        assert child.ready
        worker, leader = _worker(marker), child.pid
        assert leader is not None
        os.kill(leader, signal.SIGKILL)
        child.process.wait()  # type: ignore[union-attr]
        killed_at = time.monotonic()
        child.check(killed_at)  # the successor at once, the old worker told to finish
        successor = _worker(marker)
        assert child.pid != leader and alive(successor)
        assert alive(worker), "the old worker was killed with its leader"
        assert len(child.draining) == 1
        # It finishes in its own time (0.4 s), or is killed at the deadline (1.5 s).
        while alive(worker) and time.monotonic() - killed_at < 5:
            child.check(time.monotonic())
            time.sleep(0.05)
        gone_after = time.monotonic() - killed_at
        assert not alive(worker)
        if finishes:
            assert 0.3 <= gone_after < 1.4, gone_after
        else:
            assert 1.4 <= gone_after < 3.0, gone_after
        assert wait_until(lambda: not group_exists(leader))
        child.check(time.monotonic())
        assert len(child.draining) == 0  # forgotten once gone: the number is never reused
        assert alive(successor)
    finally:
        child.stop()


def test_a_group_already_gone_is_not_kept(caplog: pytest.LogCaptureFixture) -> None:
    draining = DrainingGroups("x")
    draining.drain(2**22 - 3, signal.SIGQUIT, time.monotonic() + 10)  # no such group
    assert len(draining) == 0


def test_a_busy_group_serves_on_untold_and_quits_once_idle() -> None:
    """nginx's case: the leftovers keep serving their connections (``busy``), and only when
    they hold none are they sent the signal; their end is reported (``gone``)."""
    holder = subprocess.Popen(["sleep", "60"], start_new_session=True)
    busy, gone = [True], []
    draining = DrainingGroups("x", lambda pgid: busy[0], 30.0, gone.append)
    try:
        draining.drain(holder.pid, signal.SIGTERM, time.monotonic() + 10)
        assert holder.pid in draining and len(draining) == 1
        for _ in range(5):
            draining.check(time.monotonic())
            time.sleep(BUSY_CHECK_SECONDS)
        assert holder.poll() is None, "told to quit while it still served"
        busy[0] = False
        time.sleep(BUSY_CHECK_SECONDS)
        draining.check(time.monotonic())
        assert holder.wait(5) == -signal.SIGTERM
        assert wait_until(lambda: not group_exists(holder.pid))
        draining.check(time.monotonic())
        assert gone == [holder.pid] and len(draining) == 0
    finally:
        holder.kill()
        holder.wait()


def test_a_busy_group_is_told_to_quit_at_its_serving_bound_or_at_the_stop() -> None:
    holders = [subprocess.Popen(["sleep", "60"], start_new_session=True) for _ in range(2)]
    draining = DrainingGroups("x", lambda pgid: True, 0.3)
    try:
        draining.drain(holders[0].pid, signal.SIGTERM, time.monotonic() + 10)
        time.sleep(0.4)
        draining.check(time.monotonic())  # past its bound: told although busy
        assert holders[0].wait(5) == -signal.SIGTERM
        draining.drain(holders[1].pid, signal.SIGTERM, time.monotonic() + 10)
        draining.wait_gone(time.monotonic() + 5)  # the stack stops: told at once (and reaped)
        assert not group_exists(holders[1].pid) and len(draining) == 0
    finally:
        for holder in holders:
            holder.kill()
            holder.wait()
