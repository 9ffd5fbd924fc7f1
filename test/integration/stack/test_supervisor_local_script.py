"""scripts/local.sh: start the stack in the background on the host, query it, stop it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import requests
from local_ports import free_port_range
from whole_stack import pid_alive, wait_for

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "local.sh"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), *args], capture_output=True, text=True, timeout=300, check=False
    )


def test_start_serves_the_bundled_model_and_stop_ends_it(tmp_path: Path) -> None:
    port = free_port_range(1)[0]
    work_dir = tmp_path / "work"
    started = run("start", "--port", str(port), "--work-dir", str(work_dir))
    pid = int((work_dir / "serve.pid").read_text())
    try:
        assert started.returncode == 0, started.stderr
        assert f"http://localhost:{port}" in started.stdout
        response = requests.post(
            f"http://127.0.0.1:{port}/invocations", json={"instances": [1.0, 3.0]}, timeout=30
        )
        assert response.json() == {"predictions": [3.5, 4.5]}
        again = run("start", "--port", str(port), "--work-dir", str(work_dir))
        assert again.returncode == 1 and "already running" in again.stderr
    finally:
        stopped = run("stop", "--work-dir", str(work_dir))
    assert stopped.returncode == 0 and "stopped" in stopped.stdout
    assert wait_for(lambda: not pid_alive(pid), 5)
    assert not (work_dir / "serve.pid").exists()
    assert run("stop", "--work-dir", str(work_dir)).stdout.strip() == "not running"


def test_start_fails_clearly_on_a_missing_model_dir(tmp_path: Path) -> None:
    result = run("start", "--model-dir", str(tmp_path / "nope"), "--work-dir", str(tmp_path))
    assert result.returncode == 1
    assert "does not exist" in result.stderr


def test_unknown_command_prints_usage() -> None:
    result = run("restart")
    assert result.returncode == 2 and "usage:" in result.stderr
