"""Multi-model endpoints with a model server per model: the registry and its control API.

These talk to the control API on its unix socket (what nginx and the Python service use)
and look at the per-model model server processes (``SAGEMAKER_TFS_MODEL_SERVER_PER_MODEL``);
the public HTTP endpoints are tested by the request-path tests, the shared model servers by
test_multi_model_shared.py.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import requests
from control_socket import control, load, predict_direct
from sagemaker_tfs.ports import port_is_free
from whole_stack import Stack, StartStack, pid_alive, wait_for

pytestmark = pytest.mark.slow
PER_MODEL = {"SAGEMAKER_TFS_MODEL_SERVER_PER_MODEL": "true"}


def server_pid(stack: Stack, rest_port: int) -> int:
    (pid,) = stack.child_pids(f"--rest_api_port={rest_port}")
    return pid


@pytest.fixture
def models_root(resources_dir: Path, tmp_path: Path) -> Path:
    root = tmp_path / "models"
    source = resources_dir / "models" / "half_plus_three"
    shutil.copytree(source, root / "half_plus_three")
    shutil.copytree(source, root / "other")
    (root / "no_versions" / "not_a_version").mkdir(parents=True)
    shutil.copytree(source, tmp_path / "outside")
    return root


def test_two_models_at_once_without_blocking_the_rest(
    start_stack: StartStack, models_root: Path
) -> None:
    stack = start_stack(models_root, PER_MODEL, multi_model=True)
    assert control(stack, "GET", "/models") == (200, {"models": [], "nextPageToken": None})
    results: dict[str, tuple[int, Any]] = {}
    threads = [
        threading.Thread(target=lambda n=n, u=u: results.__setitem__(n, load(stack, n, u)))
        for n, u in (("a", "half_plus_three"), ("b", str(models_root / "other")))
    ]
    for thread in threads:
        thread.start()
    time.sleep(0.5)
    started = time.monotonic()
    assert control(stack, "GET", "/models")[0] == 200  # not blocked by the loads
    assert stack.ping() == 200
    assert time.monotonic() - started < 2
    for thread in threads:
        thread.join(180)
    for name in ("a", "b"):
        status, body = results[name]
        assert status == 200, body
        assert f"Successfully loaded model {name}" in body["message"]
        assert body["state"] == "AVAILABLE"
    a, b = results["a"][1], results["b"][1]
    assert {a["grpc_port"], a["rest_port"]}.isdisjoint({b["grpc_port"], b["rest_port"]})
    low, high = stack.port_range
    assert all(low <= p < high for p in (a["grpc_port"], a["rest_port"], b["rest_port"]))
    assert predict_direct(a["rest_port"], "a", [1.0]) == [3.5]
    assert predict_direct(b["rest_port"], "b", [3.0]) == [4.5]
    assert server_pid(stack, a["rest_port"]) != server_pid(stack, b["rest_port"])
    listed = control(stack, "GET", "/models")[1]
    assert listed == {
        "models": [
            {"modelName": "a", "modelUrl": "half_plus_three"},
            {"modelName": "b", "modelUrl": str(models_root / "other")},
        ],
        "nextPageToken": None,
    }
    assert control(stack, "GET", "/models/a") == (
        200,
        {"modelName": "a", "modelUrl": "half_plus_three"},
    )
    # the stack's own view, for the service (nginx does not proxy /registry)
    described = {key: value for key, value in a.items() if key != "message"}
    assert control(stack, "GET", "/registry/a") == (200, described)
    registered = control(stack, "GET", "/registry")[1]["models"]
    assert sorted(model["model_name"] for model in registered) == ["a", "b"]


def test_load_errors(start_stack: StartStack, models_root: Path, tmp_path: Path) -> None:
    stack = start_stack(models_root, PER_MODEL, multi_model=True)
    status, body = load(stack, "a", "half_plus_three")
    assert status == 200, body
    assert load(stack, "a", "other") == (409, {"error": "Model a is already loaded"})
    assert load(stack, "x", "missing") == (
        404,
        {"error": "Could not find valid base path missing for servable x"},
    )
    assert load(stack, "x", "no_versions")[0] == 404
    for url in ("../outside", str(tmp_path / "outside"), "/etc", "half_plus_three/../.."):
        status, body = load(stack, "x", url)
        assert status == 403 and "outside the models directory" in body["error"], url
    for bad_name in ("../x", 'a"b', "", "a" * 200):
        assert load(stack, bad_name, "other")[0] == 400
    assert control(stack, "POST", "/models", raw=b"{not json")[0] == 400
    assert control(stack, "POST", "/models", body=["a"])[0] == 400
    assert control(stack, "POST", "/models", body={"url": "other"})[0] == 400
    assert control(stack, "GET", "/models/nope") == (404, {"error": "Model nope is not loaded yet"})
    assert control(stack, "DELETE", "/models/nope")[0] == 404
    # a refused request's unread body must not be taken for a request of its own
    smuggled = b"DELETE /models/a HTTP/1.1\r\nHost: x\r\n\r\n"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as raw:
        raw.settimeout(10)
        raw.connect(str(stack.work_dir / "supervisor.sock"))
        raw.sendall(
            b"POST /nowhere HTTP/1.1\r\nHost: x\r\n"
            + f"Content-Length: {len(smuggled)}\r\n\r\n".encode()
            + smuggled
        )
        time.sleep(1)
        assert raw.recv(65536).count(b"HTTP/1.1 ") == 1
    assert control(stack, "GET", "/models/a")[0] == 200
    # nothing was started for the refused loads; the good model still answers
    assert len(stack.child_pids("--rest_api_port")) == 1
    assert predict_direct(body_rest_port(stack, "a"), "a", [1.0]) == [3.5]


def body_rest_port(stack: Stack, name: str) -> int:
    status, body = control(stack, "GET", f"/registry/{name}")
    assert status == 200, body
    return body["rest_port"]


def test_unload_ends_the_process_and_frees_its_ports(
    start_stack: StartStack, models_root: Path
) -> None:
    stack = start_stack(models_root, PER_MODEL, multi_model=True)
    status, body = load(stack, "a", "half_plus_three")
    assert status == 200, body
    pid = server_pid(stack, body["rest_port"])
    assert (stack.work_dir / "models" / "a.config").exists()
    assert control(stack, "DELETE", "/models/a")[0] == 200
    assert wait_for(lambda: not pid_alive(pid), 10)
    assert port_is_free(body["rest_port"]) and port_is_free(body["grpc_port"])
    assert not (stack.work_dir / "models" / "a.config").exists()
    assert control(stack, "GET", "/models/a")[0] == 404
    assert control(stack, "DELETE", "/models/a")[0] == 404
    assert control(stack, "GET", "/models") == (200, {"models": [], "nextPageToken": None})
    status, again = load(stack, "a", "half_plus_three")
    assert status == 200, again
    assert predict_direct(again["rest_port"], "a", [1.0]) == [3.5]


def test_507_when_the_port_range_is_exhausted(start_stack: StartStack, models_root: Path) -> None:
    stack = start_stack(models_root, PER_MODEL, multi_model=True, port_range_size=2)
    assert load(stack, "a", "half_plus_three")[0] == 200
    status, body = load(stack, "b", "other")
    assert status == 507 and "No free ports" in body["error"]
    assert control(stack, "DELETE", "/models/a")[0] == 200
    assert load(stack, "b", "other")[0] == 200


def test_crashed_model_process_is_restarted(start_stack: StartStack, models_root: Path) -> None:
    stack = start_stack(models_root, PER_MODEL, multi_model=True)
    status, body = load(stack, "a", "half_plus_three")
    assert status == 200, body
    pid = server_pid(stack, body["rest_port"])
    os.kill(pid, signal.SIGKILL)

    def answers_again() -> bool:
        try:
            return predict_direct(body["rest_port"], "a", [1.0]) == [3.5]
        except (requests.RequestException, AssertionError):
            return False

    assert wait_for(answers_again, 120), stack.log_tail(4000)
    assert server_pid(stack, body["rest_port"]) != pid
    assert control(stack, "GET", "/registry/a")[1]["state"] == "AVAILABLE"


def test_a_model_that_fails_to_load_leaves_nothing_behind(
    start_stack: StartStack, models_root: Path
) -> None:
    broken = models_root / "broken" / "1"
    broken.mkdir(parents=True)
    (broken / "saved_model.pb").write_bytes(b"this is not a SavedModel")
    stack = start_stack(models_root, PER_MODEL, multi_model=True, port_range_size=2)
    status, body = load(stack, "broken", "broken")
    assert status == 500
    assert body["error"].startswith("Model broken failed to load from broken: ")
    assert control(stack, "GET", "/models/broken")[0] == 404
    assert stack.child_pids("--rest_api_port") == []
    # its ports went back to the (two-port) range: another model can use them
    assert load(stack, "a", "half_plus_three")[0] == 200
