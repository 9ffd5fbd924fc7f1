"""User code runs once per request, whatever fails (issue 29): only the stack's own call to a
model server is failed over.

- A ``handler`` whose own call to an unrelated service fails runs once, and the client gets
  its error (500, its text), not a 503 as if the model server were down.
- A model server killed while a request is between ``input_handler`` and the stack's call to
  it: the call goes to the other model server, neither handler runs again.
- A gunicorn worker killed while a request is in ``input_handler``: nginx does not send the
  request again (it would run the handler twice); the client gets a 503 JSON to retry.
"""

from __future__ import annotations

import concurrent.futures
import os
import re
import shutil
import signal
import time
from pathlib import Path

import pytest
from whole_stack import StartStack, cmdline, descendant_pids, wait_for

pytestmark = pytest.mark.timeout(300)

REPO_ROOT = Path(__file__).resolve().parents[3]
MODEL = REPO_ROOT / "test" / "resources" / "models" / "half_plus_three"
CODE = REPO_ROOT / "test" / "resources" / "code"


def model_dir_with(tmp_path: Path, code: str) -> Path:
    shutil.copytree(MODEL, tmp_path / "model" / "half_plus_three")
    shutil.copytree(CODE / code, tmp_path / "model" / "code")
    return tmp_path / "model"


def test_a_handler_whose_own_call_fails_runs_once(start_stack: StartStack, tmp_path: Path) -> None:
    model_dir = model_dir_with(tmp_path, "calls_dead_service")
    stack = start_stack(model_dir, {"SAGEMAKER_TFS_INSTANCE_COUNT": "2"})
    started = time.monotonic()
    response = stack.post(b"[1.0]")
    assert time.monotonic() - started < 5  # no failover rounds
    assert response.status_code == 500, response.text
    assert response.json()["error"].startswith("the feature store is down: ")
    assert len((model_dir / "code" / "runs.log").read_text().splitlines()) == 1
    assert stack.post(b"[1.0]").status_code == 500  # and serving goes on
    assert len((model_dir / "code" / "runs.log").read_text().splitlines()) == 2


def test_a_model_server_killed_mid_request_fails_over_without_running_handlers_again(
    start_stack: StartStack, tmp_path: Path
) -> None:
    model_dir = model_dir_with(tmp_path, "io_waiting")
    env = {"SAGEMAKER_TFS_INSTANCE_COUNT": "2", "SAGEMAKER_TFS_STANDBY_MODEL_SERVER": "false"}
    stack = start_stack(model_dir, env)
    runs = model_dir / "code" / "runs.log"
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        answer = pool.submit(stack.post, b'{"instances": [1.0, 2.0]}')
        assert wait_for(runs.exists, 30), stack.log_tail()
        port = int(re.search(r":(\d+)/v1/", runs.read_text()).group(1))
        (pid,) = stack.child_pids(f"--rest_api_port={port} ")
        os.kill(pid, signal.SIGKILL)
        assert wait_for(lambda: stack.child_pids(f"--rest_api_port={port} ") != [pid], 10)
        (model_dir / "code" / "go").touch()
        response = answer.result(60)
    assert response.status_code == 200, response.text
    assert response.json() == {"predictions": [3.5, 4.0]}
    lines = runs.read_text().splitlines()
    assert [line.split()[0] for line in lines] == ["input", "output"], lines
    assert f":{port}/" in lines[0] and f":{port}/" not in lines[1]  # answered by the other


def test_a_gunicorn_worker_killed_in_a_handler_is_not_sent_again(
    start_stack: StartStack, tmp_path: Path
) -> None:
    """The request reached user code: nginx does not resend it to the successor worker (it
    would run input_handler again); the client gets a 503 JSON to retry, the next request is
    served (docs/reliability.md, "gunicorn worker")."""
    model_dir = model_dir_with(tmp_path, "io_waiting")
    stack = start_stack(model_dir)
    runs, go = model_dir / "code" / "runs.log", model_dir / "code" / "go"
    # Requests first, so that nginx's workers keep connections to the service: a request that
    # fails on a kept one is the one nginx would resend (on a new connection it has no try left).
    go.touch()
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        assert all(
            r.status_code == 200
            for r in pool.map(lambda _: stack.post(b'{"instances": [1.0]}'), range(16))
        )
    go.unlink()
    runs.unlink()
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        answer = pool.submit(stack.post, b'{"instances": [1.0, 2.0]}')
        assert wait_for(runs.exists, 30), stack.log_tail()
        (master,) = stack.child_pids("gunicorn")
        (worker,) = [pid for pid in descendant_pids(master) if "gunicorn" in cmdline(pid)]
        os.kill(worker, signal.SIGKILL)
        response = answer.result(60)
    assert response.status_code == 503, response.text
    assert response.json() == {"error": "The inference service is not available"}
    go.touch()  # a resent request would now run to its end
    time.sleep(1.0)
    assert [line.split()[0] for line in runs.read_text().splitlines()] == ["input"]
    assert stack.post(b'{"instances": [1.0, 2.0]}').status_code == 200  # the successor serves
