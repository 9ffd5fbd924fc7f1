"""The supervisor reaps orphans (it is PID 1 in the container) without stealing its children's
exit statuses.

Each case runs in a fresh Python process, so that pytest itself never becomes a subreaper.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

# A Child whose shell orphans a short sleep at once, then waits for the file `go` and exits 3.
# The script waits until the orphan is a zombie of its own, optionally reaps, then lets the
# Child exit and (optionally) reaps again before Popen gets to look at the Child.
SCRIPT = r"""
import json
import logging
import os
import sys
import time
from pathlib import Path

from sagemaker_tfs.supervisor.processes.children import Child, reap_orphans
from sagemaker_tfs.supervisor.processes.spawning import become_subreaper

reap = sys.argv[1] == "reap"
go = Path(sys.argv[2])
logging.basicConfig(level=logging.DEBUG, format="%(message)s", stream=sys.stderr)


def zombies():
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] == "Z" and int(fields[1]) == os.getpid():
            found.append(int(stat.parent.name))
    return sorted(found)


def wait_until(condition):
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def reap_a_few_times():
    for _ in range(3):
        reap_orphans()
        time.sleep(0.05)


result = {"subreaper": become_subreaper()}
shell = '(sleep 0.1 &); while [ ! -e "$1" ]; do sleep 0.05; done; exit 3'
child = Child("parent", ["sh", "-c", shell, "sh", str(go)], {"PATH": "/usr/bin:/bin"})
child.start()
try:
    wait_until(lambda: zombies())
    result["orphans"] = zombies()
    if reap:
        reap_a_few_times()
    result["zombies_while_child_runs"] = zombies()
    result["child_running_then"] = child.process.returncode is None
    go.touch()
    wait_until(lambda: child.pid in zombies())
    if reap:
        reap_a_few_times()
    result["child_still_unreaped"] = child.pid in zombies()
    result["child_pid"] = child.pid
    result["returncode"] = child.process.wait(10)
    if reap:
        reap_a_few_times()
    result["zombies_at_end"] = zombies()
finally:  # never leave the shell behind, even when an assertion fails
    go.touch()
    child.stop()
print(json.dumps(result))
"""


def run_script(tmp_path: Path, mode: str) -> tuple[dict, str]:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, mode, str(tmp_path / "go")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), done.stderr


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl and /proc are Linux")
def test_orphans_are_reaped_and_the_child_keeps_its_exit_code(tmp_path: Path) -> None:
    result, log = run_script(tmp_path, "reap")
    assert result["subreaper"] is True
    assert len(result["orphans"]) == 1 and result["child_pid"] not in result["orphans"]
    assert result["zombies_while_child_runs"] == []
    assert result["child_running_then"] is True
    # the reaper saw the Child's exit but left it to Popen, which gets the real code
    assert result["child_still_unreaped"] is True
    assert result["returncode"] == 3
    assert result["zombies_at_end"] == []
    assert f"reaped orphan pid {result['orphans'][0]} (exit status 0)" in log.splitlines()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl and /proc are Linux")
def test_without_reaping_the_orphan_stays_a_zombie(tmp_path: Path) -> None:
    result, log = run_script(tmp_path, "no-reap")
    assert result["subreaper"] is True
    assert len(result["orphans"]) == 1
    assert result["zombies_while_child_runs"] == result["orphans"]
    assert result["returncode"] == 3
    assert result["zombies_at_end"] == result["orphans"]
    assert "reaped orphan" not in log
