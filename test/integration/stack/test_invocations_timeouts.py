"""nginx's proxy_read_timeout, gunicorn's timeout and the model server's REST timeout come from
the environment: each from its own variable, or all from ``SAGEMAKER_MODEL_SERVER_TIMEOUT``."""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import requests
from whole_stack import RunningStack, running_stack

pytestmark = pytest.mark.timeout(300)

REPO_ROOT = Path(__file__).resolve().parents[3]
MODEL = REPO_ROOT / "test" / "resources" / "models" / "half_plus_three"
SLOW_CODE = REPO_ROOT / "test" / "resources" / "code" / "slow"
GRPC_DEADLINE_CODE = REPO_ROOT / "test" / "resources" / "code" / "grpc_deadline"


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


def model_server_command_lines(stack: RunningStack) -> list[str]:
    return re.findall(r"started model-server\[\d+\] \(pid \d+\)[^:]*: (.*)", stack.log_text())


@contextlib.contextmanager
def sleeper_stack(
    tmp_path: Path,
    test_models,
    umbrella_seconds: str,
    code: Path | None = None,
    env: dict[str, str] | None = None,
) -> Iterator[RunningStack]:
    """The ``sleeper`` test model (it sleeps as many seconds as it is sent) served with
    ``SAGEMAKER_MODEL_SERVER_TIMEOUT`` (and ``env``), with ``code`` as its code/ if given."""
    model_dir = tmp_path / "model"
    shutil.copytree(test_models("sleeper"), model_dir / "sleeper")
    if code is not None:
        shutil.copytree(code, model_dir / "code")
    work_dir = tmp_path / "work"
    work_dir.mkdir()
    env = {"SAGEMAKER_MODEL_SERVER_TIMEOUT": umbrella_seconds, **(env or {})}
    with running_stack(model_dir, work_dir, env) as stack:
        yield stack


def post_seconds(stack: RunningStack, seconds: float) -> tuple[requests.Response, float]:
    started = time.monotonic()
    response = requests.post(
        stack.url + "/invocations",
        data=json.dumps({"instances": [seconds]}),
        headers={"Content-Type": "application/json"},
        timeout=120,
    )
    return response, time.monotonic() - started


def test_one_variable_lets_a_slow_json_call_finish(tmp_path: Path, test_models) -> None:
    """A 10 s model call on the JSON path (njs -> the model server's REST API, no Python)
    succeeds with SAGEMAKER_MODEL_SERVER_TIMEOUT=20, although TF Serving's own REST timeout
    (30 s) and the reference's gunicorn default (30 s) would not matter here: the model
    server's command line carries the 20 s, nginx waits 5 s longer."""
    with sleeper_stack(tmp_path, test_models, "20") as stack:
        (line,) = model_server_command_lines(stack)
        assert "--rest_api_timeout_in_ms=20000" in line.split()
        assert "proxy_read_timeout 25s;" in (stack.work_dir / "nginx.conf").read_text()
        assert all("--timeout=20" in line for line in gunicorn_command_lines(stack))
        response, seconds = post_seconds(stack, 10.0)
        assert response.status_code == 200, response.text
        assert response.json() == {"predictions": [10.0]}
        assert seconds >= 10.0


def test_a_json_call_past_the_timeout_is_a_504_from_the_model_server(
    tmp_path: Path, test_models
) -> None:
    """At 5 s the model server itself answers (its --rest_api_timeout_in_ms), before nginx
    (10 s): a 504 whose JSON names the timeout; the fast path's gRPC call has the same
    deadline; the stack serves on."""
    with sleeper_stack(tmp_path, test_models, "5") as stack:
        response, seconds = post_seconds(stack, 10.0)
        assert response.status_code == 504, response.text
        assert response.headers["Content-Type"].startswith("application/json")
        error = response.json()["error"]
        assert "DEADLINE_EXCEEDED" in error and "5000 ms (--rest_api_timeout_in_ms)" in error
        assert 4.5 <= seconds < 9.5
        npy = io.BytesIO()
        np.save(npy, np.array([10.0], np.float32))
        started = time.monotonic()
        binary = stack.post(npy.getvalue(), "application/x-npy")
        assert binary.status_code == 504, binary.text
        assert "Deadline Exceeded" in binary.json()["error"]
        assert time.monotonic() - started < 9.5
        response, _ = post_seconds(stack, 0.1)
        assert response.status_code == 200, response.text


def test_a_handlers_client_call_has_the_stacks_deadline(tmp_path: Path, test_models) -> None:
    """``sagemaker_tfs.client.predict`` in a handler, given no timeout, gets the deadline of
    SAGEMAKER_MODEL_SERVER_TIMEOUT (3 s here; gunicorn and nginx are given longer), not the
    client's own 60 s: a 10 s call ends at 3 s, a 1 s one is answered."""
    env = {
        "SAGEMAKER_GUNICORN_TIMEOUT_SECONDS": "30",
        "SAGEMAKER_NGINX_PROXY_READ_TIMEOUT_SECONDS": "40",
    }
    with sleeper_stack(tmp_path, test_models, "3", GRPC_DEADLINE_CODE, env) as stack:
        response = stack.post("10", "text/plain")
        assert response.status_code == 200, response.text
        ended = response.json()
        assert ended["code"] == "DEADLINE_EXCEEDED"
        assert 2.5 <= ended["after"] < 9.0
        response = stack.post("1", "text/plain")
        assert response.status_code == 200, response.text
        assert response.json()["slept"] == [1.0]
