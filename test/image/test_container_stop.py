"""``scripts/stop.sh`` on a container of the image under test (conftest.py says what is
substituted): SIGTERM reaches ``serve`` as PID 1 (no ``--init``), a request in flight finishes,
and the container exits 0 well within the 10 s SageMaker and Docker give before SIGKILL."""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests
from engine import engine_env, podman_succeeds
from image_scripts import REPO_ROOT, Image, start_container
from local_ports import free_port

pytestmark = pytest.mark.slow
IN_FLIGHT_SECONDS = 3.0


def follow_logs(image: Image) -> subprocess.Popen[str]:
    """The container's log as it is written, until it exits (stop.sh removes it then)."""
    return subprocess.Popen(
        ["podman", "logs", "--follow", image.container_name],
        env=engine_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def test_stop_lets_the_request_in_flight_finish_and_exits_0(
    image_under_test: Image, bin_dir: Path, tmp_path: Path
) -> None:
    shutil.copytree(
        REPO_ROOT / "test/resources/models/half_plus_three", tmp_path / "half_plus_three"
    )
    shutil.copytree(REPO_ROOT / "test/resources/code/slow", tmp_path / "code")
    container = start_container(image_under_test, bin_dir, free_port(), tmp_path)
    assert container.exec("cat", "/proc/1/cmdline").split("\0")[1].endswith("/serve")
    logs = follow_logs(image_under_test)

    def slow_request() -> requests.Response:
        return requests.post(
            container.url("/invocations"),
            data=str(IN_FLIGHT_SECONDS),
            headers={"Content-Type": "application/json"},
            timeout=60,
        )

    with ThreadPoolExecutor(1) as pool:
        in_flight = pool.submit(slow_request)
        time.sleep(1.0)
        stop_started = time.monotonic()
        stopped = container.stop()
        stop_seconds = time.monotonic() - stop_started
        response = in_flight.result()

    log_text = logs.communicate(timeout=30)[0]
    assert stopped.returncode == 0, stopped.stderr
    assert "exit code 0" in stopped.stdout
    assert response.status_code == 200, response.text
    assert response.json() == {"slept": IN_FLIGHT_SECONDS}
    assert stop_seconds < 10, f"stop.sh took {stop_seconds:.1f}s"
    assert "received SIGTERM" in log_text
    assert "stopping the stack" in log_text
    assert "sagemaker_tfs.supervisor.stack_supervisor: stopped" in log_text
    assert not podman_succeeds("container", "exists", image_under_test.container_name)
    print(f"stop.sh with a request in flight: {stop_seconds:.1f}s")


def test_a_request_longer_than_30_s_is_cut_and_serve_still_exits_0(
    image_under_test: Image, bin_dir: Path, tmp_path: Path
) -> None:
    """Scale-in with an asynchronous-inference-length request in flight: ``stop.sh`` gives 30
    s before SIGKILL, as SageMaker does. nginx gets 22 s to finish its requests, then the
    one still running is cut (its client sees the connection close, one warning names nginx)
    and ``serve`` exits 0 before the SIGKILL."""
    shutil.copytree(
        REPO_ROOT / "test/resources/models/half_plus_three", tmp_path / "half_plus_three"
    )
    shutil.copytree(REPO_ROOT / "test/resources/code/slow", tmp_path / "code")
    env = {"SAGEMAKER_MODEL_SERVER_TIMEOUT": "3600"}
    container = start_container(image_under_test, bin_dir, free_port(), tmp_path, env)

    def endless_request() -> requests.Response:
        return requests.post(
            container.url("/invocations"),
            data="120",
            headers={"Content-Type": "application/json"},
            timeout=300,
        )

    logs = follow_logs(image_under_test)
    with ThreadPoolExecutor(1) as pool:
        in_flight = pool.submit(endless_request)
        time.sleep(1.0)
        stop_started = time.monotonic()
        stopped = container.stop()
        stop_seconds = time.monotonic() - stop_started
        with pytest.raises(requests.ConnectionError):
            in_flight.result()
    log_text = logs.communicate(timeout=30)[0]
    assert stopped.returncode == 0, stopped.stderr
    assert "exit code 0" in stopped.stdout
    assert 21 <= stop_seconds < 30, f"stop.sh took {stop_seconds:.1f}s"
    # 22 s from the stop signal, less what the supervisor did before it waited for nginx.
    assert re.search(
        r"nginx did not stop in 2[12]\.\ds: killing it, cutting what it still had in flight",
        log_text,
    ), log_text[-2000:]
    assert "sagemaker_tfs.supervisor.stack_supervisor: stopped" in log_text
    print(f"stop.sh with a 120 s request in flight: {stop_seconds:.1f}s")
