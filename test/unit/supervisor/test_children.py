"""Supervised children: the restart policy, the parent-death signal and the ordered stop of a
ChildGroup, on real processes.

A child that was ready and then died is restarted at once, however often; a child that
cannot start backs off (doubling) and each failure is one log line; every child dies with
the process that started it, even when started from a thread that has ended since.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from process_checks import alive, wait_until
from sagemaker_tfs.supervisor.processes import children, spawning
from sagemaker_tfs.supervisor.processes.children import (
    FIRST_BACKOFF_SECONDS,
    MAX_BACKOFF_SECONDS,
    Child,
)

ENV = {"PATH": "/usr/bin:/bin"}
READY_POLL = children.READY_POLL_SECONDS + 0.02


def test_a_ready_child_is_restarted_at_once_every_time(caplog: pytest.LogCaptureFixture) -> None:
    child = Child("sleeper", ["sleep", "60"], ENV, stop_timeout=5, ready_check=lambda: True)
    child.start()
    try:
        for kill in range(1, 6):
            now = time.monotonic()
            child.check(now)  # the readiness check passes
            assert child.ready
            old_pid = child.pid
            os.kill(old_pid, signal.SIGKILL)
            child.process.wait()
            with caplog.at_level(
                logging.WARNING, logger="sagemaker_tfs.supervisor.processes.children"
            ):
                child.check(now)
            # Restarted within the same check, no delay, however many kills came before.
            assert child.pid != old_pid and child.running()
            assert child.restarts == kill and child.restart_at is None
            assert child.backoff == FIRST_BACKOFF_SECONDS
        lines = [r.getMessage() for r in caplog.records]
        assert len(lines) == 5
        assert all(
            "was killed by SIGKILL" in line and "restarting it now" in line for line in lines
        )
    finally:
        child.stop()


def test_a_child_that_cannot_start_backs_off_doubling(caplog: pytest.LogCaptureFixture) -> None:
    child = Child("false", ["false"], ENV, ready_check=lambda: False)
    child.start()
    now = time.monotonic()
    delays = []
    with caplog.at_level(logging.ERROR, logger="sagemaker_tfs.supervisor.processes.children"):
        for _ in range(7):
            child.process.wait()
            child.check(now)
            assert child.restart_at is not None
            delays.append(child.restart_at - now)
            child.check(now + 0.01)  # too early: nothing happens
            assert child.restarts == len(delays) - 1
            now = child.restart_at
            child.check(now)  # the backoff has passed: started again
    child.stop()
    assert delays == pytest.approx([0.5, 1, 2, 4, 8, MAX_BACKOFF_SECONDS, MAX_BACKOFF_SECONDS])
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 7
    assert "exited with code 1" in lines[0] and "before it was ready" in lines[0]
    assert "failed start 7 in a row" in lines[-1]


def test_a_restart_that_cannot_spawn_is_retried_after_the_backoff(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A start that raises (no such binary here; no fork under a full process table) must not
    end the watch loop that called check: it is logged and tried again later."""
    program = tmp_path / "serve-something"
    program.write_text("#!/bin/sh\nexec sleep 60\n")
    program.chmod(0o755)
    child = Child("something", [str(program)], ENV, stop_timeout=5, ready_check=lambda: True)
    child.start()
    try:
        now = time.monotonic()
        child.check(now)
        program.rename(tmp_path / "gone")
        os.kill(child.pid, signal.SIGKILL)
        child.process.wait()
        with caplog.at_level(logging.ERROR, logger="sagemaker_tfs.supervisor.processes.children"):
            child.check(now)  # no exception
        assert not child.running() and child.restart_at is not None
        assert any("cannot start something" in r.getMessage() for r in caplog.records)
        (tmp_path / "gone").rename(program)
        child.check(child.restart_at)
        assert child.running() and child.restart_at is None
    finally:
        child.stop()


def test_becoming_ready_resets_the_backoff() -> None:
    ready = {"now": False}
    child = Child("sleeper", ["sleep", "60"], ENV, ready_check=lambda: ready["now"])
    child.start()
    try:
        now = time.monotonic()
        for _ in range(3):  # three failed starts: the backoff grew to 4 s
            child.process.kill()
            child.process.wait()
            child.check(now)
            now = child.restart_at
            child.check(now)
        assert child.backoff == 4.0 and child.failed_starts == 3
        ready["now"] = True
        child.check(now + 1)
        assert child.ready and child.backoff == FIRST_BACKOFF_SECONDS and child.failed_starts == 0
        old_pid = child.pid
        child.process.kill()
        child.process.wait()
        child.check(now + 2)
        assert child.pid != old_pid and child.running()  # at once
    finally:
        child.stop()


def test_without_a_check_a_child_is_ready_after_running_a_while() -> None:
    child = Child("sleeper", ["sleep", "60"], ENV)
    child.start()
    try:
        child.check(child.started_at + 0.5)
        assert not child.ready
        child.check(child.started_at + children.READY_AFTER_SECONDS + 0.1)
        assert child.ready
    finally:
        child.stop()


def test_a_failing_readiness_check_means_not_ready() -> None:
    def broken() -> bool:
        raise ConnectionRefusedError("not listening yet")

    child = Child("sleeper", ["sleep", "60"], ENV, ready_check=broken)
    child.start()
    try:
        child.check(time.monotonic())
        assert not child.ready and child.running()
    finally:
        child.stop()


def test_a_stopped_child_is_not_restarted() -> None:
    child = Child("sleeper", ["sleep", "60"], ENV, ready_check=lambda: True)
    child.start()
    child.check(time.monotonic())
    child.stop()
    child.check(time.monotonic())
    assert not child.running() and child.restarts == 0


PARENT_SCRIPT = textwrap.dedent("""
    import signal, sys, threading, time
    from sagemaker_tfs.supervisor.processes.children import Child

    env = {"PATH": "/usr/bin:/bin"}
    children = []

    def start_in_a_short_lived_thread():
        child = Child("sleeper-thread", ["sleep", "120"], env)
        child.start()
        children.append(child)

    thread = threading.Thread(target=start_in_a_short_lived_thread)
    thread.start()
    thread.join()  # the thread that asked for the child has ended
    main_child = Child("sleeper-main", ["sleep", "120"], env, death_signal=signal.SIGTERM)
    main_child.start()
    children.append(main_child)
    print(" ".join(str(c.pid) for c in children), flush=True)
    time.sleep(120)
    """)


def test_children_die_with_the_supervisor_even_from_ended_threads(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT_SCRIPT], env=env, stdout=subprocess.PIPE, text=True
    )
    pids: list[int] = []
    try:
        assert parent.stdout is not None
        pids += [int(p) for p in parent.stdout.readline().split()]
        assert len(pids) == 2
        time.sleep(0.3)
        # Started from a thread that has ended, the child is still alive while its parent is.
        assert all(alive(pid) for pid in pids)
        parent.kill()
        parent.wait()
        assert wait_until(lambda: not any(alive(pid) for pid in pids), 5.0), "children outlived it"
    finally:
        parent.kill()
        parent.wait()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_spawn_uses_one_long_lived_thread() -> None:
    names = set()

    def record() -> None:
        names.add(threading.current_thread().name)

    for _ in range(3):
        spawning._SPAWNER.submit(record).result()
    assert len(names) == 1 and next(iter(names)).startswith("spawner")


def test_a_child_group_stops_its_tiers_in_reverse_order(caplog: pytest.LogCaptureFixture) -> None:
    group = children.ChildGroup(("first", "second", "third"))
    for tier, name in (("first", "a"), ("first", "b"), ("second", "c"), ("third", "d")):
        group.start(tier, Child(name, ["sleep", "60"], ENV, stop_timeout=5))
    assert [c.name for c in group.children()] == ["d", "c", "a", "b"]
    with caplog.at_level(logging.INFO, logger="sagemaker_tfs.supervisor.processes.children"):
        group.stop()
    stopped = [r.getMessage().split()[1] for r in caplog.records if "stopping" in r.getMessage()]
    assert stopped == ["d", "c", "a", "b"]
    assert group.children() == []
    with pytest.raises(children.TierStopping):
        group.start("first", Child("late", ["sleep", "60"], ENV))


def test_a_child_group_stops_each_tier_by_its_deadline(caplog: pytest.LogCaptureFixture) -> None:
    """A child that ignores its stop signal is killed at its tier's deadline, well before its
    own (long) stop timeout, and the warning says that what it had in flight is cut."""
    group = children.ChildGroup(("back", "front"))
    stubborn = ["bash", "-c", "trap '' TERM; sleep 60 & wait"]
    group.start("back", Child("back", stubborn, ENV, stop_timeout=60))
    group.start("front", Child("front", stubborn, ENV, stop_timeout=60))
    time.sleep(0.3)  # the traps are set
    started = time.monotonic()
    deadlines = {"front": started + 0.5, "back": started + 1.0}
    with caplog.at_level(logging.WARNING, logger="sagemaker_tfs.supervisor.processes.children"):
        group.stop(deadlines.get)
    assert 0.9 <= time.monotonic() - started < 3.0
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 2
    assert warnings[0].startswith("front did not stop in 0.5s: killing it, cutting what it")
    assert warnings[1].startswith("back did not stop in 0.") and "in flight" in warnings[1]


def test_a_child_group_stops_one_child_by_name() -> None:
    group = children.ChildGroup(("only",))
    group.start("only", Child("a", ["sleep", "60"], ENV, stop_timeout=5))
    group.start("only", Child("b", ["sleep", "60"], ENV, stop_timeout=5))
    first = group.get("a")
    assert first is not None and first.running()
    group.stop_child("a")
    group.stop_child("unknown")
    assert group.get("a") is None and not first.running()
    assert [c.name for c in group.children()] == ["b"]
    group.stop()


def test_child_is_restarted_after_it_dies(tmp_path: Path) -> None:
    child = Child("sleeper", ["sleep", "30"], {"PATH": "/usr/bin:/bin"}, stop_timeout=5)
    child.start()
    first_pid = child.pid
    child.process.send_signal(signal.SIGKILL)
    child.process.wait()
    deadline = time.monotonic() + 10
    while child.pid == first_pid and time.monotonic() < deadline:
        child.check(time.monotonic())
        time.sleep(0.05)
    assert child.pid != first_pid and child.running() and child.restarts == 1
    child.stop()
    assert not child.running()


def test_a_child_runs_at_its_nice_value_and_so_do_its_threads() -> None:
    own = os.nice(0)
    threads = "import threading, time; threading.Thread(target=time.sleep, args=(30,)).start()"
    child = Child("niced", [sys.executable, "-c", threads], ENV, nice=7)
    child.start()
    try:
        pid = child.pid
        assert wait_until(lambda: len(os.listdir(f"/proc/{pid}/task")) == 2)
        for task in os.listdir(f"/proc/{pid}/task"):
            assert os.getpriority(os.PRIO_PROCESS, int(task)) == min(own + 7, 19)
        autogroup = Path(f"/proc/{pid}/autogroup")
        if autogroup.exists():  # its own session's CPU share is lowered too
            assert autogroup.read_text().split()[-1] == "7"
        assert os.nice(0) == own  # the supervisor's own priority is unchanged
    finally:
        child.stop()


def test_child_backoff_grows() -> None:
    child = Child("false", ["false"], {"PATH": "/usr/bin:/bin"})
    child.start()
    child.process.wait()
    now = time.monotonic()
    child.check(now)
    assert child.restart_at == pytest.approx(now + 0.5)
    child.check(now + 0.6)
    child.process.wait()
    child.check(now + 0.7)
    assert child.restart_at == pytest.approx(now + 1.7)
    child.stop()


def test_child_stop_kills_the_whole_group(tmp_path: Path) -> None:
    marker = tmp_path / "grandchild.pid"
    script = f"sleep 60 & echo $! > {marker}; trap '' TERM; wait"
    child = Child("group", ["bash", "-c", script], {"PATH": "/usr/bin:/bin"}, stop_timeout=1)
    child.start()
    deadline = time.monotonic() + 5
    while not _written(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    grandchild = int(marker.read_text())
    child.stop()
    time.sleep(0.2)
    assert not Path(f"/proc/{grandchild}").exists() or "Z" in _state(grandchild)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[1].split()[0]
    except OSError:
        return "gone"


def _with_a_grandchild(tmp_path: Path, name: str) -> tuple[str, Path]:
    """A bash script that leaves a ``sleep`` in its process group (as gunicorn's worker)."""
    marker = tmp_path / f"{name}.pid"
    return f"sleep 60 & echo $! > {marker}; wait", marker


def _written(marker: Path) -> bool:
    """The shell's ``echo $! > marker`` is done: the file is made empty first, then written."""
    return marker.exists() and marker.read_text().strip() != ""


def _grandchild(marker: Path) -> int:
    assert wait_until(lambda: _written(marker))
    pid = int(marker.read_text())
    marker.unlink()
    return pid


@pytest.mark.parametrize("serve_on", [True, False])
def test_leftovers_of_a_dead_child_serve_until_its_successor_is_ready(
    tmp_path: Path, serve_on: bool
) -> None:
    script, marker = _with_a_grandchild(tmp_path, "worker")
    ready = {"now": True}
    child = Child(
        "gunicorn-like",
        ["bash", "-c", script],
        ENV,
        stop_timeout=1,
        ready_check=lambda: ready["now"],
        leftovers_serve_until_replaced=serve_on,
    )
    child.start()
    try:
        child.check(time.monotonic())
        assert child.ready
        worker = _grandchild(marker)
        ready["now"] = False
        os.kill(child.pid, signal.SIGKILL)
        child.process.wait()
        child.check(time.monotonic())  # restarted at once
        successor_worker = _grandchild(marker)
        # Without the option the group is killed with its leader; with it, the worker serves
        # on while the successor starts, even across its failed readiness checks.
        for _ in range(3):
            child.check(time.monotonic())
            time.sleep(READY_POLL)
        assert alive(worker) is serve_on
        ready["now"] = True
        child.check(time.monotonic())
        assert child.ready
        assert wait_until(lambda: not alive(worker))  # SIGTERM once the successor is ready
        assert alive(successor_worker)
    finally:
        child.stop()
    assert wait_until(lambda: not alive(successor_worker))
