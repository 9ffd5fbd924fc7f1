"""The supervisor with the whole stack: real nginx, gunicorn and model server processes."""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import socket
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families
from whole_stack import (
    STANDBY_WAITING,
    Stack,
    StartStack,
    cmdline,
    descendant_pids,
    pid_alive,
    wait_for,
)

pytestmark = pytest.mark.slow

MODEL_SERVER_MARKER = "--rest_api_port"
STANDBY = "standby model server"  # its process title until it serves (model_server/standby.py)
INFERENCE_SCRIPT = """
import json
import time


def input_handler(data, context):
    body = json.loads(data.read().decode("utf-8"))
    arrived = body.pop("arrived", None)
    if arrived:
        open(arrived, "w").close()
    time.sleep(body.pop("sleep_seconds", 0))
    return json.dumps(body)


def output_handler(response, context):
    return response.content, "application/json"
"""


@pytest.fixture
def bundled_models(resources_dir: Path) -> Path:
    return resources_dir / "models"


@pytest.fixture
def models_with_script(resources_dir: Path, tmp_path: Path) -> Path:
    """half_plus_three plus a pass-through code/inference.py (puts gunicorn in the path)."""
    root = tmp_path / "model"
    shutil.copytree(resources_dir / "models" / "half_plus_three", root / "half_plus_three")
    (root / "code").mkdir()
    (root / "code" / "inference.py").write_text(INFERENCE_SCRIPT)
    return root


def predict(stack: Stack, instances: list[float], timeout: float = 30, **extra) -> list[float]:
    body = dict({"instances": instances}, **extra)
    response = requests.post(f"{stack.url}/invocations", json=body, timeout=timeout)
    assert response.status_code == 200, response.text
    return response.json()["predictions"]


def try_predict(stack: Stack) -> bool:
    try:
        return predict(stack, [2.0], timeout=5) == [4.0]
    except (requests.RequestException, AssertionError):
        return False


def established_connections_to(port: int) -> int:
    """Client-side TCP connections to ``port`` (e.g. nginx's keepalive to a model server)."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "01" and int(fields[2].rsplit(":", 1)[1], 16) == port:
                count += 1
    return count


def connections_accepted_on(socket_path: Path) -> set[str]:
    """Inodes of the connected sockets that a unix socket at ``socket_path`` has accepted."""
    inodes = set()
    for line in Path("/proc/net/unix").read_text().splitlines()[1:]:
        fields = line.split()
        if len(fields) == 8 and fields[7] == str(socket_path) and fields[5] == "03":
            inodes.add(fields[6])
    return inodes


def test_nginx_keeps_its_connections_to_gunicorn_alive(
    start_stack: StartStack, bundled_models
) -> None:
    """Requests for the Python service reuse nginx's connections to gunicorn: once nginx's
    workers have one each, later requests open none."""
    stack = start_stack(bundled_models)
    body = io.BytesIO()
    np.save(body, np.array([1.0, 2.0], np.float32))
    headers = {"Content-Type": "application/x-npy", "Accept": "application/json"}

    def send(count: int) -> set[str]:
        for _ in range(count):
            response = requests.post(
                f"{stack.url}/invocations", data=body.getvalue(), headers=headers, timeout=30
            )
            assert response.status_code == 200, response.text
            assert response.json()["predictions"] == [3.5, 4.0]
        time.sleep(0.2)  # a connection nginx does not keep would be closed by now
        return connections_accepted_on(stack.work_dir / "gunicorn.sock")

    first = send(10)
    assert first, "no connection from nginx to gunicorn is kept"
    assert send(10) == first


def test_serves_and_stops_everything_on_sigterm(start_stack: StartStack, bundled_models) -> None:
    stack = start_stack(bundled_models)
    assert predict(stack, [1.0, 2.0, 5.0]) == [3.5, 4.0, 5.5]
    children = {
        name: stack.child_pids(marker)
        for name, marker in (
            ("nginx", "nginx"),
            ("gunicorn", "gunicorn"),
            ("model server", MODEL_SERVER_MARKER),
            ("stream server", "sagemaker_tfs.service.stream.stream_server"),
        )
    }
    assert all(len(pids) == 1 for pids in children.values()), children

    everything = descendant_pids(stack.process.pid)
    assert stack.stop() == 0
    assert wait_for(lambda: not any(pid_alive(pid) for pid in everything), 10), [
        pid for pid in everything if pid_alive(pid)
    ]
    log = stack.log_text()
    assert "configuration in effect" in log
    assert 'name: "half_plus_three"' in log  # the model config is logged
    assert "nginx config" in log and "listen" in log
    assert "received SIGTERM" in log and "stopped" in log
    assert not Path(stack.work_dir / "gunicorn.sock").exists()
    assert not Path(stack.work_dir / "stream.sock").exists()


def test_batching_variables_reach_the_file_the_flags_and_the_log(
    start_stack: StartStack, bundled_models
) -> None:
    env = {
        "SAGEMAKER_TFS_ENABLE_BATCHING": "true",
        "SAGEMAKER_TFS_MAX_BATCH_SIZE": "4",
        "SAGEMAKER_TFS_BATCH_TIMEOUT_MICROS": "500",
        "SAGEMAKER_TFS_NUM_BATCH_THREADS": "2",
        "SAGEMAKER_TFS_MAX_ENQUEUED_BATCHES": "7",
    }
    stack = start_stack(bundled_models, env=env)
    expected = (
        "max_batch_size { value: 4 }\n"
        "batch_timeout_micros { value: 500 }\n"
        "num_batch_threads { value: 2 }\n"
        "max_enqueued_batches { value: 7 }\n"
    )
    batching_file = stack.work_dir / "batching.config"
    assert batching_file.read_text() == expected
    log = stack.log_text()
    for line in expected.splitlines():
        assert line in log

    (server,) = stack.child_pids(MODEL_SERVER_MARKER)
    assert "--enable_batching=true" in cmdline(server)
    assert f"--batching_parameters_file={batching_file}" in cmdline(server)
    assert predict(stack, [1.0, 2.0]) == [3.5, 4.0]


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("SAGEMAKER_TFS_ENABLE_BATCHING", "yes", "must be 'true' or 'false', got 'yes'"),
        ("SAGEMAKER_TFS_IMAGE_SCALE", "abc", "must be a number, got 'abc'"),  # read by the service
    ],
)
def test_bad_configuration_stops_start_up_with_a_clear_message(
    start_stack: StartStack, bundled_models, name: str, value: str, message: str
) -> None:
    stack = start_stack(bundled_models, env={name: value}, wait=False)
    assert stack.process.wait(30) == 2
    assert f"invalid configuration: {name} {message}" in stack.log_text()
    assert "model-server" not in stack.log_text()  # nothing was started


def test_a_model_that_cannot_load_stops_start_up_clearly(
    start_stack: StartStack, tmp_path: Path
) -> None:
    version = tmp_path / "model" / "broken" / "1"
    version.mkdir(parents=True)
    (version / "saved_model.pb").write_bytes(b"not a SavedModel")
    stack = start_stack(tmp_path / "model", wait=False)
    assert stack.process.wait(60) == 1
    assert "start-up failed: model-server[0]" in stack.log_text()
    assert "broken" in stack.log_text().split("start-up failed: model-server[0]")[1]


def test_sigterm_during_start_up_stops_everything(start_stack: StartStack, bundled_models) -> None:

    stack = start_stack(bundled_models, wait=False)
    assert wait_for(lambda: stack.child_pids(MODEL_SERVER_MARKER) != [], 30)
    started = descendant_pids(stack.process.pid)
    stack.process.send_signal(signal.SIGTERM)
    assert stack.process.wait(60) == 0
    assert wait_for(lambda: not any(pid_alive(pid) for pid in started), 10)
    assert "nginx" not in stack.log_text().split("received SIGTERM")[1]


def test_public_port_in_use_stops_start_up_clearly(start_stack: StartStack, bundled_models) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        stack = start_stack(bundled_models, port=port, wait=False)
        assert stack.process.wait(120) == 1
    log = stack.log_text()
    assert f"cannot listen on port {port}: [Errno 98] Address already in use" in log
    assert stack.child_pids("") == []


def test_several_instances_all_serve(start_stack: StartStack, bundled_models) -> None:
    env = {"SAGEMAKER_TFS_INSTANCE_COUNT": "2", "SAGEMAKER_TFS_STANDBY_MODEL_SERVER": "false"}
    stack = start_stack(bundled_models, env=env)
    config = json.loads((stack.work_dir / "stack.json").read_text())
    rest_ports = [instance["rest_port"] for instance in config["instances"]]
    assert len(rest_ports) == 2 and len(stack.child_pids(MODEL_SERVER_MARKER)) == 2
    for port in rest_ports:
        status = requests.get(f"http://127.0.0.1:{port}/v1/models/half_plus_three", timeout=5)
        assert status.json()["model_version_status"][0]["state"] == "AVAILABLE"
    for _ in range(20):
        assert predict(stack, [1.0]) == [3.5]
    # nginx keeps connections to the model servers it used: both must have been used.
    connections = {port: established_connections_to(port) for port in rest_ports}
    assert all(count > 0 for count in connections.values()), connections
    # Turned off: a standby would have started within a watch round (0.1 s) of serving.
    assert stack.child_pids(STANDBY) == [] and "started standby" not in stack.log_text()
    # Each model server exports TF Serving's metrics (--monitoring_config_file) on its port.
    served = 0.0
    for port in rest_ports:
        url = f"http://127.0.0.1:{port}/monitoring/prometheus/metrics"
        text = requests.get(url, timeout=5).text
        for family in text_string_to_metric_families(text):
            if family.name == ":tensorflow:serving:request_count":
                served += sum(s.value for s in family.samples if s.labels["status"] == "OK")
    assert served >= 20


def test_a_killed_model_server_is_replaced_by_the_standby(
    start_stack: StartStack, bundled_models
) -> None:
    # The single standby (the default is the zygote: test_back_to_back_kills.py).
    stack = start_stack(bundled_models, env={"SAGEMAKER_TFS_MODEL_SERVER_ZYGOTE": "false"})
    assert wait_for(lambda: stack.child_pids(STANDBY_WAITING) != [], 120), stack.log_tail()
    (standby,) = stack.child_pids(STANDBY_WAITING)
    (old,) = stack.child_pids(MODEL_SERVER_MARKER)
    os.kill(old, signal.SIGKILL)
    # It serves as the model server, under the model server's command line.
    assert wait_for(lambda: stack.child_pids(MODEL_SERVER_MARKER) == [standby], 10)
    assert wait_for(lambda: try_predict(stack), 10), stack.log_tail(4000)
    assert "--model_config_file=" in cmdline(standby)
    assert f"started model-server[0] (pid {standby}) from the standby" in stack.log_text()

    # The next standby starts once the model server is ready; one that dies is replaced.
    assert wait_for(lambda: stack.child_pids(STANDBY) != [], 30), stack.log_tail(4000)
    (second,) = stack.child_pids(STANDBY)
    os.kill(second, signal.SIGKILL)
    assert wait_for(lambda: stack.child_pids(STANDBY) not in ([], [second]), 30)
    assert f"standby model server (pid {second}) was killed by SIGKILL" in stack.log_text()
    assert predict(stack, [2.0]) == [4.0]

    everything = descendant_pids(stack.process.pid)
    assert stack.stop() == 0
    assert wait_for(lambda: not any(pid_alive(pid) for pid in everything), 10)


@pytest.mark.parametrize("marker", [MODEL_SERVER_MARKER, "gunicorn", "nginx"])
def test_killed_child_is_restarted_and_the_endpoint_answers_again(
    start_stack: StartStack, models_with_script: Path, marker: str
) -> None:
    stack = start_stack(models_with_script)
    assert predict(stack, [2.0]) == [4.0]
    stack.wait_until_settled()  # start-up is over: a kill now is a crash of a serving child
    (old_pid,) = stack.child_pids(marker)
    os.kill(old_pid, signal.SIGKILL)
    assert wait_for(lambda: stack.child_pids(marker) not in ([], [old_pid]), 30), stack.log_tail()
    assert wait_for(lambda: try_predict(stack), 120), stack.log_tail(4000)
    assert f"(pid {old_pid}) was killed by SIGKILL after running" in stack.log_text()
    assert "restarting it now" in stack.log_text()


def test_nginx_killed_during_start_up_is_started_again(
    start_stack: StartStack, models_with_script: Path
) -> None:
    """Clients reach nginx a moment before the supervisor's start-up check sees it: a crash
    then is a crash of a serving nginx, not a failed start-up (CI once lost a stack to it)."""
    stack = start_stack(models_with_script, wait=False)
    seen: list[int] = []
    # nginx's own command line: "nginx" alone also matches a child forked but not yet exec'd,
    # whose command line is still the supervisor's (this test's directory name holds "nginx").
    nginx = str(stack.work_dir / "nginx.conf")

    def nginx_spawned() -> bool:
        # Read once per poll: a second read can miss the master for a moment (its title is
        # being rewritten), which once failed this test.
        seen[:] = stack.child_pids(nginx)
        return len(seen) == 1

    assert wait_for(nginx_spawned, 120, interval=0.002), stack.log_tail()
    (first,) = seen
    os.kill(first, signal.SIGKILL)
    during_start_up = (
        f"nginx (pid {first}) was killed by SIGKILL during start-up; starting it again"
    )
    # The kill lands before the start-up check saw nginx listen, almost always; after it, the
    # watch loop restarts it as it does any crash. Either way the dead master's workers may
    # answer a while longer, so /ping alone does not show that the supervisor noticed.
    after = f"nginx (pid {first}) was killed by SIGKILL after"

    def noticed() -> bool:
        log = stack.log_text()
        return during_start_up in log or after in log

    assert wait_for(noticed, 60), stack.log_tail()
    stack.wait_for_ping()
    assert predict(stack, [2.0]) == [4.0]
    assert stack.process.poll() is None


def test_sigterm_lets_an_in_flight_request_finish(
    start_stack: StartStack, models_with_script: Path
) -> None:
    stack = start_stack(models_with_script)
    results: list[object] = []
    arrived = stack.work_dir / "request-arrived"

    def slow_request() -> None:
        try:
            results.append(predict(stack, [4.0], sleep_seconds=3, arrived=str(arrived)))
        except Exception as error:  # reported by the assertion below
            results.append(error)

    thread = threading.Thread(target=slow_request)
    thread.start()
    assert wait_for(arrived.exists, 60, interval=0.05), stack.log_tail()  # in the handler
    stack.process.send_signal(signal.SIGTERM)
    thread.join(30)
    assert results == [[5.0]], stack.log_tail(4000)
    assert stack.process.wait(60) == 0
