"""Multi-model endpoints on shared model servers (the default): many models in one model
server process, a load that fails or crashes it beside healthy models, a killed model server
with many models loaded, several model servers, memory.

The whole stack runs (nginx, gunicorn, the supervisor, our Python model server); loads go
through the control API, invocations through nginx and the Python service.
"""

from __future__ import annotations

import os
import shutil
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import requests
from control_socket import control, load, predict_direct
from google.protobuf import text_format
from slow_model import make_slow_loading_model
from whole_stack import Stack, StartStack, descendant_pids, pid_alive, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


@pytest.fixture
def models_root(resources_dir: Path, tmp_path: Path) -> Path:
    """30 copies of half_plus_three (m00..m29), one with its own inference.py, a broken one."""
    root = tmp_path / "models"
    source = resources_dir / "models" / "half_plus_three"
    for index in range(30):
        shutil.copytree(source, root / f"m{index:02d}")
    shutil.copytree(source, root / "coded")
    shutil.copytree(resources_dir / "code" / "io_pair", root / "coded" / "code")
    broken = root / "broken" / "1"
    broken.mkdir(parents=True)
    (broken / "saved_model.pb").write_bytes(b"this is not a SavedModel")
    return root


def invoke(stack: Stack, name: str, value: float = 1.0) -> requests.Response:
    return stack.post(f"[{value}]", path=f"/models/{name}/invoke")


def answers(stack: Stack, name: str) -> bool:
    try:
        response = invoke(stack, name, 1.0)
    except requests.RequestException:
        return False
    return response.status_code == 200 and response.json() == {"predictions": [[3.5]]}


def model_server_pids(stack: Stack) -> list[int]:
    return stack.child_pids("--rest_api_port")


def served_in_file(stack: Stack) -> list[str]:
    from sagemaker_tfs.wire import protos

    config = protos.message_class("tensorflow.serving.ModelServerConfig")()
    text_format.Parse((stack.work_dir / "models.config").read_text(), config)
    return sorted(model.name for model in config.model_config_list.config)


def listed(stack: Stack) -> list[dict[str, Any]]:
    status, body = control(stack, "GET", "/registry")  # the stack's own view, with ports
    assert status == 200, body
    return sorted(body["models"], key=lambda model: model["model_name"])


def load_all(stack: Stack, names: list[str]) -> None:
    """Loads, four at a time."""
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda name: (name, load(stack, name, name)), names))
    for name, (status, body) in results:
        assert status == 200, (name, body)


# The tests of one model server's death: the default for multi-model is two.
ONE_SERVER = {"SAGEMAKER_TFS_INSTANCE_COUNT": "1"}


def test_many_models_share_the_default_two_model_servers(
    start_stack: StartStack, models_root: Path
) -> None:
    stack = start_stack(models_root, multi_model=True)
    stack.wait_until_settled()
    servers = sorted(model_server_pids(stack))
    assert len(servers) == 2  # config.MULTI_MODEL_INSTANCES
    processes = len(descendant_pids(stack.process.pid))
    names = [f"m{index:02d}" for index in range(12)]
    load_all(stack, names)
    assert load(stack, "coded", "coded")[0] == 200
    for name in names:
        assert invoke(stack, name, 2.0).json() == {"predictions": [[4.0]]}
    coded = stack.post("1.0", "text/csv", **{"X-Amzn-SageMaker-Target-Model": "coded"})
    assert coded.json() == {"predictions": [3.5], "handler": "io_pair", "model": "coded"}
    # two processes serve them all, on fixed ports: no process or port per model
    assert sorted(model_server_pids(stack)) == servers
    assert len(descendant_pids(stack.process.pid)) == processes
    assert len({(m["grpc_port"], m["rest_port"]) for m in listed(stack)}) == 1
    assert predict_direct(listed(stack)[0]["rest_port"], "m05", [1.0]) == [3.5]
    assert served_in_file(stack) == sorted([*names, "coded"])
    assert load(stack, "m00", "m01") == (409, {"error": "Model m00 is already loaded"})

    for name in names[:6]:
        assert control(stack, "DELETE", f"/models/{name}")[0] == 200
    for name in names[:6]:
        gone = invoke(stack, name)
        assert gone.status_code == 404 and gone.json() == {
            "error": f"Model {name} is not loaded yet."
        }
    assert all(answers(stack, name) for name in names[6:])
    assert served_in_file(stack) == sorted([*names[6:], "coded"])
    assert sorted(model_server_pids(stack)) == servers
    # the supervisor's gRPC channels and its forks leave each other alone
    assert "Bad file descriptor" not in stack.log_text()


def test_a_model_that_fails_to_load_beside_healthy_ones(
    start_stack: StartStack, models_root: Path
) -> None:
    stack = start_stack(models_root, ONE_SERVER, multi_model=True)
    names = ["m00", "m01", "m02"]
    load_all(stack, names)
    (server,) = model_server_pids(stack)
    before = listed(stack)
    for _ in range(2):  # refused each time, never "already loaded"
        status, body = load(stack, "broken", "broken")
        assert status == 500, body
        assert body["error"].startswith("Model broken failed to load from broken: ")
        assert "broken" in body["error"] and "version: 1" in body["error"]
    assert control(stack, "GET", "/models/broken")[0] == 404
    assert invoke(stack, "broken").status_code == 404
    assert listed(stack) == before and served_in_file(stack) == names
    assert all(answers(stack, name) for name in names)
    assert model_server_pids(stack) == [server]
    assert load(stack, "m03", "m03")[0] == 200 and answers(stack, "m03")


def test_a_killed_model_server_comes_back_with_every_model(
    start_stack: StartStack, models_root: Path
) -> None:
    stack = start_stack(models_root, ONE_SERVER, multi_model=True)
    stack.wait_until_settled()
    names = [f"m{index:02d}" for index in range(30)]
    load_all(stack, names)
    before = listed(stack)
    (server,) = model_server_pids(stack)
    os.kill(server, signal.SIGKILL)
    assert wait_for(lambda: all(answers(stack, name) for name in names), 180), stack.log_tail()
    assert listed(stack) == before  # the registry did not change
    assert served_in_file(stack) == names
    (restarted,) = model_server_pids(stack)
    assert restarted != server and not pid_alive(server)
    # The supervisor's check that brings it in line may end after the models answer.
    assert wait_for(lambda: "serves the 30 loaded model(s)" in stack.log_text(), 60)
    assert load(stack, "m30", "m00")[0] == 200 and answers(stack, "m30")


def test_a_load_in_flight_when_its_model_server_dies_fails_alone(
    start_stack: StartStack, models_root: Path
) -> None:
    """A load never waits for other models' invocations, and a model server that dies while
    it loads (as a model that crashes it would make it) fails that load only: the others
    come back, the dying load is not in the registry nor in the restarted model server."""
    make_slow_loading_model(models_root / "slow")
    stack = start_stack(models_root, ONE_SERVER, multi_model=True)
    names = ["m00", "m01", "m02", "m03", "m04"]
    load_all(stack, names)
    (server,) = model_server_pids(stack)
    result: dict[str, tuple[int, Any]] = {}
    loading = threading.Thread(target=lambda: result.update(slow=load(stack, "slow", "slow")))
    loading.start()
    assert wait_for(lambda: "Loading servable version {name: slow" in stack.log_text(), 60)
    started = time.monotonic()
    assert answers(stack, "m00")  # the other models serve while it loads
    assert time.monotonic() - started < 2
    os.kill(server, signal.SIGKILL)
    loading.join(120)
    status, body = result["slow"]
    assert status == 500, body
    assert "exited while it loaded" in body["error"]
    assert wait_for(lambda: all(answers(stack, name) for name in names), 120), stack.log_tail()
    assert [m["model_name"] for m in listed(stack)] == names
    assert served_in_file(stack) == names
    status, body = load(stack, "slow", "slow")  # a load of its own works again
    assert status == 200, body
    response = stack.post('{"inputs": 5}', path="/models/slow/invoke")
    assert response.json() == {"outputs": 5.0}


def test_507_for_a_model_that_would_not_fit(start_stack: StartStack, models_root: Path) -> None:
    huge = models_root / "huge"
    shutil.copytree(models_root / "m00", huge)
    (variables,) = huge.glob("*/variables/variables.data-*")
    with open(variables, "r+b") as sparse:  # 4 TiB by its size, nothing on disk
        sparse.truncate(4 << 40)
    stack = start_stack(models_root, multi_model=True)
    assert load(stack, "m00", "m00")[0] == 200
    status, body = load(stack, "huge", "huge")
    assert status == 507, body
    assert body["error"].startswith("Not enough memory to load model huge: it needs about ")
    assert [m["model_name"] for m in listed(stack)] == ["m00"] and answers(stack, "m00")
    assert load(stack, "m01", "m01")[0] == 200


def test_two_shared_model_servers(start_stack: StartStack, models_root: Path) -> None:
    stack = start_stack(models_root, {"SAGEMAKER_TFS_INSTANCE_COUNT": "2"}, multi_model=True)
    names = ["m00", "m01", "m02"]
    load_all(stack, names)
    described = control(stack, "GET", "/registry/m01")[1]
    assert len(described["instances"]) == 2
    for _, rest_port in described["instances"]:  # both processes serve every model
        assert all(predict_direct(rest_port, name, [1.0]) == [3.5] for name in names)
    first, second = sorted(model_server_pids(stack))
    os.kill(first, signal.SIGKILL)
    # the other one answers meanwhile: no request fails
    for _ in range(20):
        assert all(answers(stack, name) for name in names)
    assert wait_for(lambda: len(model_server_pids(stack)) == 2, 120)
    assert wait_for(lambda: "serves the 3 loaded model(s)" in stack.log_text(), 120)
    for _, rest_port in described["instances"]:
        assert all(predict_direct(rest_port, name, [1.0]) == [3.5] for name in names)
    assert second in model_server_pids(stack)
