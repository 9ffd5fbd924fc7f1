"""The standby model server process: what it runs once handed a command line, and that it
ends quietly when the supervisor goes away without handing it one."""

from __future__ import annotations

import subprocess
import sys

import pytest
from sagemaker_tfs.model_server.standby import flags_of


def test_flags_are_what_follows_model_server() -> None:
    argv = ["/venv/bin/python", "-m", "sagemaker_tfs.cli", "model-server", "--port=9000"]
    assert flags_of(argv) == ["--port=9000"]
    assert flags_of(["tensorflow_model_server-like", "model-server"]) == []
    with pytest.raises(ValueError, match="not a model server command line"):
        flags_of(["gunicorn", "--port=9000"])


@pytest.mark.slow  # the standby imports TensorFlow first
def test_an_empty_stdin_ends_it_with_code_0() -> None:
    """Its supervisor died (the pipe closed) before it was needed: nothing to serve."""
    process = subprocess.run(
        [sys.executable, "-m", "sagemaker_tfs.model_server.standby"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=120,
    )
    assert process.returncode == 0, process.stderr.decode()[-2000:]
