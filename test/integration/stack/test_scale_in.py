"""Scale-in: SageMaker sends SIGTERM, then SIGKILL 30 s later.

Requests in flight finish (an asynchronous-inference-sized body included), new connections
are refused at once, and ``serve`` exits 0 well within the 30 s. A request that would run past
the stop budget (nginx gets 22 s) is cut: its client sees the connection close without an
answer, one warning line names nginx, and ``serve`` still exits 0 before the SIGKILL.
"""

from __future__ import annotations

import io
import json
import shutil
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import requests
from whole_stack import Stack, launch

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]
MB = 1 << 20
SIGKILL_AFTER_SECONDS = 30.0


def sleeper_stack(tmp_path: Path, test_models, env: dict[str, str] | None = None) -> Stack:
    shutil.copytree(test_models("sleeper"), tmp_path / "model" / "sleeper")
    (tmp_path / "work").mkdir()
    stack = launch(tmp_path / "model", tmp_path / "work", env)
    stack.wait_for_ping()
    return stack


def post_json_sleep(stack: Stack, seconds: float) -> requests.Response:
    return requests.post(
        stack.url + "/invocations",
        data=json.dumps({"instances": [seconds]}),
        headers={"Content-Type": "application/json"},
        timeout=120,
    )


def post_npy(stack: Stack, array: np.ndarray) -> requests.Response:
    body = io.BytesIO()
    np.save(body, array)
    headers = {"Content-Type": "application/x-npy", "Accept": "application/x-npy"}
    return requests.post(stack.url + "/invocations", data=body.getvalue(), headers=headers,
                         timeout=120)  # fmt: skip


def refuses_connections(stack: Stack) -> bool:
    try:
        socket.create_connection(("127.0.0.1", stack.port), timeout=1).close()
    except ConnectionRefusedError:
        return True
    return False


def stop_in_background(stack: Stack, pool: ThreadPoolExecutor):  # type: ignore[no-untyped-def]
    started = time.monotonic()
    return pool.submit(lambda: (stack.stop(timeout=60), time.monotonic() - started))


def test_requests_in_flight_finish_and_new_connections_are_refused(
    tmp_path: Path, test_models
) -> None:
    stack = sleeper_stack(tmp_path, test_models)
    try:
        large = np.zeros(200 * MB // 4, np.float32)
        large[-1] = 3.0  # the model sleeps 3 s after the 200 MB have arrived
        with ThreadPoolExecutor(3) as pool:
            slow = pool.submit(post_json_sleep, stack, 6.0)
            big = pool.submit(post_npy, stack, large)
            time.sleep(1.0)
            stopping = stop_in_background(stack, pool)
            time.sleep(0.5)
            assert refuses_connections(stack)
            slow_answer, big_answer = slow.result(), big.result()
            code, seconds = stopping.result()
        assert slow_answer.status_code == 200, slow_answer.text
        assert slow_answer.json() == {"predictions": [6.0]}
        assert big_answer.status_code == 200, big_answer.text[:300]
        np.testing.assert_array_equal(np.load(io.BytesIO(big_answer.content)), large)
        assert code == 0, stack.log_tail()
        assert seconds < SIGKILL_AFTER_SECONDS
        assert "cutting what it still had in flight" not in stack.log_text()
    finally:
        stack.kill_session()


def test_a_request_longer_than_the_budget_is_cut_and_serve_exits_0_in_time(
    tmp_path: Path, test_models
) -> None:
    stack = sleeper_stack(tmp_path, test_models, {"SAGEMAKER_MODEL_SERVER_TIMEOUT": "120"})
    try:
        with ThreadPoolExecutor(2) as pool:
            endless = pool.submit(post_json_sleep, stack, 90.0)
            time.sleep(1.0)
            stopping = stop_in_background(stack, pool)
            with pytest.raises(requests.ConnectionError):
                endless.result()
            code, seconds = stopping.result()
        assert code == 0, stack.log_tail()
        assert 21.5 <= seconds < SIGKILL_AFTER_SECONDS
        log = stack.log_text()
        assert "nginx did not stop in 2" in log
        assert "killing it, cutting what it still had in flight" in log
        assert "sagemaker_tfs.supervisor.stack_supervisor: stopped" in log
    finally:
        stack.kill_session()
