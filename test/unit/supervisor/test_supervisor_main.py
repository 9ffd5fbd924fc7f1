"""``sagemaker-tfs serve``'s arguments, and a start-up that cannot write its files."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from sagemaker_tfs.supervisor.main import parse_args
from stack_configs import make_model


def test_parse_args() -> None:
    args = parse_args(["--model-dir", "/m", "--work-dir", "/w", "--port", "81"])
    assert (args.model_dir, args.work_dir, args.port) == ("/m", "/w", 81)
    with pytest.raises(SystemExit):
        parse_args(["--port", "eighty"])


def test_a_work_dir_that_cannot_be_written_stops_start_up_in_one_line(tmp_path: Path) -> None:
    """As on a read-only root filesystem without a writable /tmp (here: a file where the work
    directory's parent should be): exit 1, one line naming the path, no traceback."""
    make_model(tmp_path / "models" / "m")
    (tmp_path / "file").write_text("")
    serve = [sys.executable, "-m", "sagemaker_tfs.cli", "serve", "--model-dir",
             str(tmp_path / "models"), "--work-dir", str(tmp_path / "file" / "work")]  # fmt: skip
    result = subprocess.run(serve, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 1, result.stderr
    (line,) = [line for line in result.stderr.splitlines() if "start-up failed" in line]
    assert f"{tmp_path / 'file' / 'work'}" in line and "--work-dir" in line
    assert "Traceback" not in result.stderr
