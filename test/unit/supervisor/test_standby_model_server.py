"""The standby model server, on real processes: a stand-in standby (a script that waits for
its command line on stdin, as ``sagemaker_tfs.model_server.standby`` does, without
TensorFlow) is started only when allowed, handed to a Child that starts or restarts, and
replaced; one that dies on its own is replaced after a backoff; stop leaves nothing."""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import textwrap
import time
from pathlib import Path

import pytest
from process_checks import alive, wait_until
from sagemaker_tfs.supervisor.model_servers.standby_model_server import (
    FIRST_BACKOFF_SECONDS,
    StandbyModelServer,
)
from sagemaker_tfs.supervisor.processes.children import Child

ENV = {"PATH": "/usr/bin:/bin"}
# Waits for one line, writes it to argv[1] with its pid, then serves (sleeps) as told.
STAND_IN = textwrap.dedent("""
    import json, os, sys, time
    line = sys.stdin.readline()
    if not line:
        sys.exit(0)
    with open(sys.argv[1], "a") as out:
        out.write(json.dumps({"pid": os.getpid(), "argv": json.loads(line)}) + "\\n")
    time.sleep(60)
    """)


def _received(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture
def handed_over(tmp_path: Path) -> Path:
    return tmp_path / "handed_over.jsonl"


@pytest.fixture
def standby(handed_over: Path):  # type: ignore[no-untyped-def]
    allowed = {"start": True}
    standby = StandbyModelServer(
        ENV,
        lambda: allowed["start"],
        nice=3,
        command=[sys.executable, "-c", STAND_IN, str(handed_over)],
    )
    standby.allowed = allowed  # type: ignore[attr-defined]
    yield standby
    standby.stop()


def test_starts_only_when_allowed_and_hands_over_the_command_line(
    standby: StandbyModelServer, handed_over: Path
) -> None:
    standby.allowed["start"] = False  # type: ignore[attr-defined]
    standby.check(time.monotonic())
    assert standby.process is None
    assert standby.take(["model-server", "--port=1"]) is None

    standby.allowed["start"] = True  # type: ignore[attr-defined]
    standby.check(time.monotonic())
    waiting = standby.process
    assert waiting is not None and alive(waiting.pid)
    assert os.getpriority(os.PRIO_PROCESS, waiting.pid) == min(os.nice(0) + 3, 19)

    argv = ["python", "-m", "sagemaker_tfs.cli", "model-server", "--port=1"]
    process = standby.take(argv)
    assert process is waiting and standby.process is None
    assert wait_until(lambda: _received(handed_over) != [])
    assert _received(handed_over) == [{"pid": waiting.pid, "argv": argv}]
    process.kill()
    process.wait()

    standby.check(time.monotonic())  # a new one waits for the next model server
    assert standby.process is not None and standby.process.pid != waiting.pid


def test_a_child_restarts_as_the_standby_and_logs_it(
    standby: StandbyModelServer, handed_over: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Started without a standby, it only sleeps; its arguments look like a model server's.
    argv = [sys.executable, "-c", "import time; time.sleep(60)", "model-server", "--port=7"]
    child = Child("model-server[0]", argv, ENV, ready_check=lambda: True, take_standby=standby.take)
    child.start()  # no standby yet: a process of its own
    try:
        first = child.pid
        assert first is not None and _received(handed_over) == []
        standby.check(time.monotonic())
        waiting = standby.process
        assert waiting is not None
        child.check(time.monotonic())
        assert child.ready

        os.kill(first, signal.SIGKILL)
        child.process.wait()
        with caplog.at_level(logging.INFO, logger="sagemaker_tfs.supervisor.processes.children"):
            child.check(time.monotonic())
        assert child.pid == waiting.pid
        assert wait_until(lambda: _received(handed_over) != [])
        assert _received(handed_over)[0] == {"pid": waiting.pid, "argv": argv}
        assert f"started model-server[0] (pid {waiting.pid}) from the standby" in caplog.text
    finally:
        child.stop()
    assert not alive(waiting.pid)


def test_a_standby_that_dies_is_replaced_after_a_backoff(
    standby: StandbyModelServer, caplog: pytest.LogCaptureFixture
) -> None:
    now = time.monotonic()
    standby.check(now)
    first = standby.process
    assert first is not None
    os.kill(first.pid, signal.SIGKILL)
    first.wait()

    with caplog.at_level(
        logging.WARNING, logger="sagemaker_tfs.supervisor.model_servers.standby_model_server"
    ):
        standby.check(now)
    assert standby.process is None  # not at once: a standby that cannot start must not spin
    assert f"standby model server (pid {first.pid}) was killed by SIGKILL" in caplog.text
    assert standby.take(["model-server"]) is None

    standby.check(now + FIRST_BACKOFF_SECONDS)
    assert standby.process is not None and standby.process.pid != first.pid


def test_take_skips_a_standby_that_has_exited(standby: StandbyModelServer) -> None:
    standby.check(time.monotonic())
    waiting = standby.process
    assert waiting is not None
    os.kill(waiting.pid, signal.SIGKILL)
    waiting.wait()
    assert standby.take(["model-server"]) is None


def test_stop_kills_the_standby_and_none_starts_after(standby: StandbyModelServer) -> None:
    standby.check(time.monotonic())
    waiting = standby.process
    assert waiting is not None
    standby.stop()
    assert not alive(waiting.pid)
    standby.check(time.monotonic() + 3600)
    assert standby.process is None
