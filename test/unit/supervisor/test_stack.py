"""The Supervisor's generated files, gunicorn's command line and the children's environment."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from sagemaker_tfs.config import StackConfig
from sagemaker_tfs.supervisor.stack import (
    StartupError,
    Supervisor,
    child_environment,
    gunicorn_command,
)
from stack_configs import EVERY_VARIABLE, StackConfigBuilder


def test_gunicorn_command(stack_config: StackConfigBuilder, tmp_path: Path) -> None:
    config = stack_config(EVERY_VARIABLE)
    argv = gunicorn_command(config)
    assert argv[:3] == [sys.executable, "-m", "gunicorn"]
    assert f"--bind=unix:{tmp_path / 'work' / 'gunicorn.sock'}" in argv
    assert "--bind=fd://7" in gunicorn_command(config, 7)  # the supervisor's held socket
    for flag in (
        "--workers=3",
        "--threads=4",
        "--worker-class=gthread",
        "--timeout=45",
        "--log-level=debug",
        f"--worker-tmp-dir={config.work_dir}",  # nothing written outside the work dir
    ):
        assert flag in argv
    assert argv[-1] == "sagemaker_tfs.service.app:create_app()"


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


def test_a_work_dir_that_cannot_be_written_stops_start_up_clearly(
    stack_config: StackConfigBuilder, tmp_path: Path
) -> None:
    """As on a read-only root without a writable /tmp (here: a file where a directory goes)."""
    (tmp_path / "not_a_dir").write_text("")
    config = stack_config(work_dir=tmp_path / "not_a_dir" / "work")
    with pytest.raises(StartupError, match="cannot write to the work directory .*not_a_dir/work"):
        Supervisor(config).write_configs()
