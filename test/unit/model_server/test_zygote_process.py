"""The real zygote process: after TensorFlow's and the model server's imports it has one
thread (a fork is safe), says ``ready``, and ends quietly when the supervisor goes away."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest


@pytest.mark.slow  # it imports TensorFlow
def test_it_is_single_threaded_after_its_imports_and_ends_with_its_channel() -> None:
    ours, theirs = socket.socketpair()
    process = subprocess.Popen(
        [sys.executable, "-m", "sagemaker_tfs.model_server.zygote", str(os.getpid())],
        stdin=theirs.fileno(),
        stderr=subprocess.PIPE,
    )
    theirs.close()
    try:
        ours.settimeout(180)
        # Exit code 3 and no "ready" if a thread was left after the imports.
        assert ours.recv(64) == b"ready\n", process.stderr.read().decode()[-2000:]  # type: ignore[union-attr]
        assert len(os.listdir(f"/proc/{process.pid}/task")) == 1
        ours.close()
        assert process.wait(30) == 0
    finally:
        ours.close()
        if process.poll() is None:
            process.kill()
        process.wait()
