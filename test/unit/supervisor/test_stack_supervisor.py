"""The Supervisor's generated files, gunicorn's command line and the children's environment."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from sagemaker_tfs.stack_config import StackConfig
from sagemaker_tfs.supervisor import stack_supervisor
from sagemaker_tfs.supervisor.model_servers import model_service_client
from sagemaker_tfs.supervisor.service_launcher import gunicorn_command
from sagemaker_tfs.supervisor.stack_supervisor import Supervisor, child_environment
from stack_configs import EVERY_VARIABLE, StackConfigBuilder


def test_gunicorn_command(stack_config: StackConfigBuilder) -> None:
    config = stack_config(EVERY_VARIABLE)
    argv = gunicorn_command(config, 7)
    assert argv[:3] == [sys.executable, "-m", "gunicorn"]
    assert "--bind=fd://7" in argv  # the supervisor's held socket
    for flag in (
        "--workers=3",
        "--threads=4",
        "--worker-class=gthread",
        "--timeout=45",
        "--log-level=debug",
        f"--worker-tmp-dir={config.work.root}",  # nothing written outside the work dir
    ):
        assert flag in argv
    assert argv[-1] == "sagemaker_tfs.service.edge.app:create_app()"


def test_children_reuse_large_allocations_unless_told_otherwise(
    stack_config: StackConfigBuilder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "1000")
    env = child_environment(stack_config())
    assert env["MALLOC_MMAP_THRESHOLD_"] == str(256 << 20)
    assert env["MALLOC_TRIM_THRESHOLD_"] == "1000"  # the user's setting wins


def test_write_configs(stack_config: StackConfigBuilder, tmp_path: Path) -> None:
    config = stack_config({"SAGEMAKER_TFS_ENABLE_BATCHING": "true"})
    Supervisor(config).write_configs()
    work = tmp_path / "work"
    assert (work / "batching.config").read_text().startswith("max_batch_size { value: 8 }\n")
    assert "num_batch_threads { value: 2 }" in (work / "batching.config").read_text()
    assert 'name: "half_plus_three"' in (work / "models.config").read_text()
    assert StackConfig.load(work / "stack.json") == config


def test_grpc_fork_handlers_are_off_in_the_supervisor_only(
    stack_config: StackConfigBuilder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The supervisor forks while its gRPC channels to the shared model servers live."""

    assert os.environ["GRPC_ENABLE_FORK_SUPPORT"] == "false"
    monkeypatch.setattr(stack_supervisor, "USER_FORK_SUPPORT", None)
    assert "GRPC_ENABLE_FORK_SUPPORT" not in child_environment(stack_config())
    monkeypatch.setattr(stack_supervisor, "USER_FORK_SUPPORT", "true")  # the user's own setting
    assert child_environment(stack_config())["GRPC_ENABLE_FORK_SUPPORT"] == "true"
    assert model_service_client.FORK_SUPPORT_VARIABLE == "GRPC_ENABLE_FORK_SUPPORT"


FORKS_WHILE_A_CALL_WAITS = """
import signal, threading
from sagemaker_tfs.supervisor.processes.spawning import spawn
from sagemaker_tfs.supervisor.model_servers.model_service_client import (
    ModelServiceClient, ModelServiceError)

client = ModelServiceClient("unix:{socket}")

def call_forever():
    while True:
        try:
            client.state("m", timeout=0.05)
        except ModelServiceError:
            pass

threading.Thread(target=call_forever, daemon=True).start()
codes = [spawn(["true"], {{}}, signal.SIGKILL).wait() for _ in range(150)]
print("exit codes", sorted(set(codes)))
"""


def test_children_spawn_cleanly_while_a_model_service_call_waits(tmp_path: Path) -> None:
    """With gRPC's fork handlers on, these forks log epoll errors from the supervisor's
    pollers (and may lose a child); the supervisor turns them off before importing gRPC."""
    code = FORKS_WHILE_A_CALL_WAITS.format(socket=tmp_path / "nobody.sock")
    env = {k: v for k, v in os.environ.items() if k != "GRPC_ENABLE_FORK_SUPPORT"}
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert result.stdout.strip() == "exit codes [0]", result.stderr
    assert "Bad file descriptor" not in result.stderr and "fork" not in result.stderr
