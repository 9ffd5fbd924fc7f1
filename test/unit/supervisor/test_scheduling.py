"""The stack's scheduling policy: set once by the supervisor, inherited by what it starts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import sagemaker_tfs

ENV = {"PATH": "/usr/bin:/bin"}
PACKAGE_ROOT = str(Path(sagemaker_tfs.__file__).resolve().parents[1])
POLICY_PROBE = """
import os, subprocess, sys, threading
from sagemaker_tfs.supervisor.processes.scheduling import use_sched_policy
use_sched_policy(sys.argv[1])
seen = []
thread = threading.Thread(target=lambda: seen.append(os.sched_getscheduler(0)))
thread.start()
thread.join()
child = subprocess.run(
    [sys.executable, "-c", "import os; print(os.sched_getscheduler(0))"],
    capture_output=True, text=True, check=True,
)
print(os.sched_getscheduler(0), seen[0], child.stdout.strip())
"""


@pytest.mark.parametrize(
    "policy, expected", [("batch", os.SCHED_BATCH), ("normal", os.SCHED_OTHER)]
)
def test_the_sched_policy_holds_for_later_threads_and_children(policy: str, expected: int) -> None:
    """The supervisor sets it once; threads it starts and the processes it runs inherit it."""
    probe = subprocess.run(
        ["chrt", "--batch", "0", sys.executable, "-c", POLICY_PROBE, policy]
        if policy == "normal"  # started under SCHED_BATCH, so that "normal" has to undo it
        else [sys.executable, "-c", POLICY_PROBE, policy],
        capture_output=True, text=True, check=True, env={**ENV, "PYTHONPATH": PACKAGE_ROOT},
    )  # fmt: skip
    assert probe.stdout.split() == [str(expected)] * 3
