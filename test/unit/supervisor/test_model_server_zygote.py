"""The model server zygote, on real processes, without TensorFlow: a stand-in zygote runs the
real ``serve`` loop and forks (``sagemaker_tfs.model_server.zygote``), with a stand-in for the
model server; the supervisor's side (``ModelServerZygote``, ``ForkedProcess``, a ``Child``
that takes from it) runs in a fresh Python process that becomes a child subreaper, as
``serve`` does, so that pytest itself never becomes one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
from sagemaker_tfs.model_server import zygote
from sagemaker_tfs.supervisor.processes.spawning import adopts_orphans

# The real serve loop; the "model server" exits with the code argv[1] after argv[2] seconds.
STAND_IN = textwrap.dedent("""
    import socket, sys, time
    from sagemaker_tfs.model_server import zygote

    def run(argv):
        time.sleep(float(argv[2]))
        return int(argv[1])

    zygote.serve(socket.socket(fileno=0), int(sys.argv[1]), run)
    """)

# What every driver of a stand-in zygote starts with (its argv[1] is STAND_IN's source).
DRIVER_PRELUDE = textwrap.dedent("""
    import json, os, signal, sys, time
    from sagemaker_tfs.supervisor.processes.spawning import become_subreaper
    from sagemaker_tfs.supervisor.model_servers.model_server_zygote import ModelServerZygote

    def until(condition, timeout=10.0):
        deadline = time.monotonic() + timeout
        while not condition() and time.monotonic() < deadline:
            time.sleep(0.01)
        return condition()
    """)

DRIVER = DRIVER_PRELUDE + textwrap.dedent("""
    from sagemaker_tfs.supervisor.processes.children import Child, reap_orphans
    from sagemaker_tfs.supervisor.processes.spawning import adopts_orphans

    def facts(pid):
        stat = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return {"ppid": int(stat[1]), "leads_session": os.getsid(pid) == pid,
                "nice": os.getpriority(os.PRIO_PROCESS, pid)}

    result = {"adopts_before": adopts_orphans(), "subreaper": become_subreaper()}
    result["adopts_after"] = adopts_orphans()
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": os.environ["PYTHONPATH"]}
    zygote = ModelServerZygote(env, lambda: True, nice=2,
                               command=[sys.executable, "-c", sys.argv[1]])
    result["before_start"] = zygote.take(["model-server", "0", "60"]) is None
    zygote.check(time.monotonic())
    taken = []
    until(lambda: taken.append(zygote.take(["model-server", "0", "60"])) or taken[-1] is not None)
    first = taken[-1]
    result["first"] = facts(first.pid)
    first.kill()
    result["killed_code"] = first.wait(5)

    # A Child that takes from the zygote: its exit code survives reap_orphans.
    child = Child("model-server[0]", ["model-server", "7", "0.2"], env,
                  take_standby=zygote.take)
    child.start()
    result["child_forked"] = child.pid != zygote.process.pid
    result["child"] = facts(child.pid)
    until(lambda: open(f"/proc/{child.pid}/stat").read().rsplit(")", 1)[1].split()[0] == "Z")
    reap_orphans()
    result["child_code"] = child.exit_code()

    # Many in a row, each in milliseconds.
    started = time.monotonic()
    many = [zygote.take(["model-server", "0", "60"]) for _ in range(5)]
    result["five_forks_seconds"] = time.monotonic() - started
    result["distinct"] = len({p.pid for p in many})
    for process in many:
        process.kill()
        process.wait(5)

    # A zygote that dies is replaced after the backoff; meanwhile take gives None.
    dead = zygote.process.pid
    os.kill(dead, signal.SIGKILL)
    until(lambda: zygote.process.poll() is not None)
    result["take_from_the_dead"] = zygote.take(["model-server", "0", "60"]) is None
    zygote.check(time.monotonic())
    result["after_death"] = zygote.take(["model-server", "0", "60"]) is None
    zygote.check(time.monotonic() + 2)
    result["replaced"] = zygote.process is not None and zygote.process.pid != dead
    until(lambda: zygote.take(["model-server", "0", "0"]) is not None)
    # One that dies before it said it was ready.
    early = ModelServerZygote(env, lambda: True, command=[sys.executable, "-c", "pass"])
    early.check(time.monotonic())
    until(lambda: early.process.poll() is not None)
    result["died_before_ready"] = early.take(["model-server", "0", "60"]) is None
    early.stop()
    zygote.stop()
    result["stopped"] = zygote.process is None and zygote.take(["x", "0", "0"]) is None
    print(json.dumps(result))
    """)


def run_driver(driver: str, timeout: float) -> dict:
    """Run ``driver`` on STAND_IN in a fresh Python; the JSON of its last line."""
    done = subprocess.run(
        [sys.executable, "-c", driver, STAND_IN],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


@pytest.fixture(scope="module")
def result() -> dict:
    return run_driver(DRIVER, timeout=60)


def test_used_only_where_orphans_are_adopted(result: dict) -> None:
    assert adopts_orphans() is (os.getpid() == 1)  # pytest is no subreaper
    assert result["adopts_before"] is False and result["subreaper"] is True
    assert result["adopts_after"] is True


def test_a_forked_model_server_is_the_supervisors_child_in_its_own_session(
    result: dict,
) -> None:
    assert result["before_start"] is True  # no zygote yet: the caller starts one cold
    for forked in (result["first"], result["child"]):
        assert forked["leads_session"] is True
        assert forked["nice"] == min(os.nice(0) + 2, 19)
    assert result["killed_code"] == -9


def test_a_child_taking_from_it_keeps_its_exit_code(result: dict) -> None:
    assert result["child_forked"] is True
    assert result["child_code"] == 7  # not reaped as an orphan: the Child owns it


def test_forks_one_after_another(result: dict) -> None:
    assert result["distinct"] == 5
    assert result["five_forks_seconds"] < 5.0


def test_a_dead_zygote_is_replaced_and_none_after_stop(result: dict) -> None:
    assert result["died_before_ready"] is True
    assert result["take_from_the_dead"] is True  # not an exception in the Child's start
    assert result["after_death"] is True
    assert result["replaced"] is True
    assert result["stopped"] is True


def test_numpys_thread_pool_stops_at_a_fork() -> None:
    """The zygote forks only single-threaded: OpenBLAS's pool (one thread fewer than the CPUs)
    stops at a fork; a thread of Python's own does not, and is refused."""
    script = textwrap.dedent("""
        import threading, time
        import numpy
        from sagemaker_tfs.model_server import zygote
        print(zygote.single_threaded())
        threading.Thread(target=time.sleep, args=(5,), daemon=True).start()
        print(zygote.single_threaded())
        """)
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert done.stdout.split() == ["True", "False"], done.stderr[-2000:]


def test_the_zygotes_title_says_it_is_a_standby_that_waits() -> None:
    assert "standby model server (waiting)" in zygote.WAITING_TITLE


def test_a_restart_waits_while_the_zygote_imports_and_a_first_start_does_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A zygote that has not said ``ready`` (a sleeping stand-in): a restart is told to try
    again (ZygoteImporting), a first start gets None (it starts cold); neither once the
    wait's bound is over, nor once the zygote is gone."""
    from sagemaker_tfs.supervisor.model_servers import model_server_zygote as module

    importing = module.ModelServerZygote(
        {"PATH": "/usr/bin:/bin"}, lambda: True, command=["sleep", "60"]
    )
    importing.check(0.0)
    try:
        argv = ["model-server", "0", "60"]
        assert importing.take(argv) is None
        with pytest.raises(module.ZygoteImporting) as raised:
            importing.take(argv, wait=True)
        assert raised.value.retry_seconds == module.IMPORT_POLL_SECONDS
        monkeypatch.setattr(module, "IMPORT_WAIT_SECONDS", 0.0)
        assert importing.take(argv, wait=True) is None  # waited long enough: cold
        monkeypatch.setattr(module, "IMPORT_WAIT_SECONDS", 60.0)
        assert importing.process is not None
        importing.process.kill()
        importing.process.wait(5)
        assert importing.take(argv, wait=True) is None  # no zygote: cold
    finally:
        importing.stop()
