"""A gunicorn worker told to stop (SIGTERM: what the supervisor sends a killed master's worker
once its successor's serves) leaves once it holds no request in progress, although nginx had
kept-alive connections to it (issue 55: the old worker of a killed master took gunicorn's
30 s graceful timeout to leave in 2 of 10 kills in the image). gunicorn's gevent worker waits
for every connection, idle or not; nginx now closes an idle one to gunicorn after 1 s
(``nginx_config.SERVICE_KEEPALIVE_TIMEOUT_SECONDS``; 30 s before). A request in progress when
the worker was told still gets its answer.

Real nginx and gunicorn, each with the command line and configuration the supervisor gives
it, and an ``inference.py`` whose handler sleeps as many seconds as it is sent.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests
from front_end import EXAMPLE_MODELS
from local_ports import free_port
from nginx_in_front import start_gunicorn, start_nginx, stop_gunicorn, stop_nginx
from process_checks import alive
from sagemaker_tfs.config import load_config

pytestmark = pytest.mark.timeout(120)

SLEEPING_HANDLER = """
import json
import time


def handler(data, context):
    seconds = float(data.read() or 0)
    time.sleep(seconds)
    return json.dumps({"slept": seconds}), "application/json"
"""
GRACEFUL_TIMEOUT_SECONDS = 30  # the stack's (SAGEMAKER_GUNICORN_TIMEOUT_SECONDS)
LEAVES_WITHIN_SECONDS = 10.0


@dataclass
class Service:
    url: str
    gunicorn: subprocess.Popen[bytes]


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    """gunicorn on a socket held for it and nginx in front, as the supervisor starts them."""
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (model_dir / "half_plus_three").symlink_to(EXAMPLE_MODELS / "half_plus_three")
    (model_dir / "code").mkdir()
    (model_dir / "code" / "inference.py").write_text(SLEEPING_HANDLER)
    config = load_config({}, model_dir=str(model_dir), work_dir=str(tmp_path / "work"),
                         port=free_port())  # fmt: skip
    Path(config.work.root).mkdir(parents=True)
    gunicorn = start_gunicorn(config)
    nginx = start_nginx(config)
    yield Service(f"http://127.0.0.1:{config.port}", gunicorn)
    stop_nginx(nginx)
    stop_gunicorn(gunicorn)


def invoke(url: str, seconds: float) -> requests.Response:
    return requests.post(f"{url}/invocations", data=str(seconds), timeout=60,
                         headers={"Content-Type": "text/plain"})  # fmt: skip


def worker_pids(service: Service) -> list[int]:
    master = service.gunicorn.pid
    return [int(pid) for pid in Path(f"/proc/{master}/task/{master}/children").read_text().split()]


def test_a_stopping_worker_is_not_kept_by_nginxs_idle_connections(service: Service) -> None:
    """Two requests at once leave nginx two kept-alive connections to the worker; a 2 s
    request then takes one, and the worker is told to stop 0.5 s into it: the request is
    answered, and the worker leaves soon after, not after the 30 s graceful timeout."""
    with ThreadPoolExecutor(2) as pool:
        warm = list(pool.map(lambda _: invoke(service.url, 0.3), range(2)))
    assert [response.status_code for response in warm] == [200, 200]
    with ThreadPoolExecutor(1) as pool:
        busy = pool.submit(invoke, service.url, 2.0)
        time.sleep(0.5)
        (pid,) = worker_pids(service)
        os.kill(pid, signal.SIGTERM)
        told = time.monotonic()
        response = busy.result()
    assert (response.status_code, response.json()) == (200, {"slept": 2.0})
    deadline = told + GRACEFUL_TIMEOUT_SECONDS - 5
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    left_after = time.monotonic() - told
    assert not alive(pid), "the worker is still there 25 s after its SIGTERM"
    assert left_after <= LEAVES_WITHIN_SECONDS, left_after
