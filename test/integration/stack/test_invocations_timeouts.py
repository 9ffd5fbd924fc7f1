"""nginx's proxy_read_timeout and gunicorn's timeout come from the environment."""

from __future__ import annotations

import contextlib
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from whole_stack import RunningStack, running_stack

pytestmark = pytest.mark.timeout(300)

REPO_ROOT = Path(__file__).resolve().parents[3]
MODEL = REPO_ROOT / "test" / "resources" / "models" / "half_plus_three"
SLOW_CODE = REPO_ROOT / "test" / "resources" / "code" / "slow"


def gunicorn_command_lines(stack: RunningStack) -> list[str]:
    """The command lines gunicorn was started with, from the supervisor's log (with
    setproctitle installed, gunicorn's processes show ``gunicorn: master [...]`` instead)."""
    return re.findall(r"started gunicorn \(pid \d+\): (.*)", stack.log_text())


@contextlib.contextmanager
def stack_with_timeouts(
    tmp_path: Path, *, nginx_seconds: str, gunicorn_seconds: str, code: Path | None = None
) -> Iterator[RunningStack]:
    """half_plus_three (with ``code`` as its code/ if given) served with
    ``SAGEMAKER_NGINX_PROXY_READ_TIMEOUT_SECONDS`` and ``SAGEMAKER_GUNICORN_TIMEOUT_SECONDS``."""
    model_dir = tmp_path / "model"
    shutil.copytree(MODEL, model_dir / "half_plus_three")
    if code is not None:
        shutil.copytree(code, model_dir / "code")
    work_dir = tmp_path / "work"
    work_dir.mkdir()
    env = {
        "SAGEMAKER_NGINX_PROXY_READ_TIMEOUT_SECONDS": nginx_seconds,
        "SAGEMAKER_GUNICORN_TIMEOUT_SECONDS": gunicorn_seconds,
    }
    with running_stack(model_dir, work_dir, env) as stack:
        yield stack


def test_timeouts_from_env(tmp_path: Path) -> None:
    with stack_with_timeouts(
        tmp_path, nginx_seconds="2", gunicorn_seconds="1", code=SLOW_CODE
    ) as stack:
        assert "proxy_read_timeout 2s;" in (stack.work_dir / "nginx.conf").read_text()
        ours = gunicorn_command_lines(stack)
        assert ours and all("--timeout=1" in line for line in ours)

        response = stack.post("4", "text/plain")
        assert response.status_code == 504
        assert response.json() == {"error": "No answer within 2 seconds"}
        response = stack.post("0.1", "text/plain")
        assert response.status_code == 200, response.text
        assert response.json() == {"slept": 0.1}


def test_nginx_timeout_is_raised_to_the_gunicorn_timeout(tmp_path: Path) -> None:
    with stack_with_timeouts(tmp_path, nginx_seconds="5", gunicorn_seconds="45") as stack:
        assert "proxy_read_timeout 45s;" in (stack.work_dir / "nginx.conf").read_text()
