"""Admission control on host stacks (real nginx, gunicorn, model servers; the ``sleeper`` test
model, which sleeps as many seconds as it is sent): past SAGEMAKER_TFS_MAX_CONCURRENT_INVOCATIONS
an invocation is answered 503 JSON with Retry-After at once and counted; under it nothing is
shed; a request still waiting when the invocation timeout passed is not sent to a model
server; a full batch queue is the same 503; and made-up model names leave /metrics as it was.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import io
import json
import os
import shutil
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import requests
from metrics_scrape import Scrape, scrape, wait_for_samples
from sagemaker_tfs.config import default_concurrent_invocations
from whole_stack import Stack, running_stack

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

SHED = "sagemaker_tfs_requests_shed_total"
LARGE_BODIES_WAITING = "sagemaker_tfs_service_large_bodies_waiting"
MODEL_SERVER_REQUESTS = ":tensorflow:serving:request_count_total"  # as the parser names it
ATTRIBUTES = "X-Amzn-SageMaker-Custom-Attributes"


@contextlib.contextmanager
def sleeper_stack(tmp_path: Path, test_models, env: dict[str, str]) -> Iterator[Stack]:
    model_dir = tmp_path / "model"
    shutil.copytree(test_models("sleeper"), model_dir / "sleeper")
    work_dir = tmp_path / "work"
    work_dir.mkdir()
    with running_stack(model_dir, work_dir, env) as stack:
        yield stack


def sleep_json(seconds: float) -> str:
    return json.dumps({"instances": [seconds]})


def sleep_npy(seconds: float) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.array([seconds], np.float32))
    return buffer.getvalue()


def post(stack: Stack, body: str | bytes, content_type: str = "application/json",
         **headers: str) -> tuple[requests.Response, float]:  # fmt: skip
    started = time.monotonic()
    response = requests.post(
        stack.url + "/invocations",
        data=body,
        headers={"Content-Type": content_type, **headers},
        timeout=60,
    )
    return response, time.monotonic() - started


def assert_shed(response: requests.Response, words: str) -> None:
    """The overload answer: 503, JSON naming the cause, Retry-After."""
    assert response.status_code == 503, response.text
    assert response.headers["Content-Type"].startswith("application/json")
    error = response.json()["error"]
    assert "overloaded" in error and words in error, error
    assert response.headers["Retry-After"] == "1"


def model_server_requests(stack: Stack) -> float:
    """The model server's own count of the sleeper's requests (every status)."""
    return scrape(stack.url + "/metrics").value(MODEL_SERVER_REQUESTS, model_name="sleeper")


def test_past_the_bound_invocations_are_shed_at_once(tmp_path: Path, test_models) -> None:
    """With a bound of 2 and two 3 s calls in flight, a third (JSON for njs, .npy for the
    Python service) is answered 503 at once, counted as overloaded; once they are done, two
    at a time are served again (nothing shed under the bound)."""
    with sleeper_stack(
        tmp_path, test_models, {"SAGEMAKER_TFS_MAX_CONCURRENT_INVOCATIONS": "2"}
    ) as stack:
        assert "limit_conn tfs_invocations 2;" in (stack.work_dir / "nginx.conf").read_text()
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            busy = [pool.submit(post, stack, sleep_json(3.0)) for _ in range(2)]
            time.sleep(1.0)
            for body, content_type in ((sleep_json(0.0), "application/json"),
                                       (sleep_npy(0.0), "application/x-npy")):  # fmt: skip
                response, seconds = post(stack, body, content_type)
                assert_shed(response, "SAGEMAKER_TFS_MAX_CONCURRENT_INVOCATIONS")
                assert seconds < 1.0
            assert stack.ping() == 200
            for future in busy:
                response, _ = future.result()
                assert response.status_code == 200, response.text
        found = wait_for_samples(stack.url + "/metrics", lambda s: s.value(SHED) >= 2)
        assert found.value(SHED, reason="overloaded") == 2
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            pair = [pool.submit(post, stack, sleep_json(1.0)) for _ in range(2)]
            assert [future.result()[0].status_code for future in pair] == [200, 200]
        assert scrape(stack.url + "/metrics").value(SHED) == 2


def test_a_request_that_waited_past_its_timeout_is_not_sent(tmp_path: Path, test_models) -> None:
    """SAGEMAKER_MODEL_SERVER_TIMEOUT=3 and one synchronous gunicorn worker: of three .npy
    calls of 1.8 s sent together, the third waits 3.6 s for the worker, past its timeout, and
    is answered 503 without reaching the model server (whose count grows by 2 only)."""
    env = {
        "SAGEMAKER_MODEL_SERVER_TIMEOUT": "3",
        "SAGEMAKER_GUNICORN_TIMEOUT_SECONDS": "30",
        "SAGEMAKER_GUNICORN_WORKER_CLASS": "sync",
    }
    with sleeper_stack(tmp_path, test_models, env) as stack:
        before = model_server_requests(stack)
        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            calls = [pool.submit(post, stack, sleep_npy(1.8), "application/x-npy")
                     for _ in range(3)]  # fmt: skip
            answers = sorted((f.result()[0] for f in calls), key=lambda a: a.status_code)
        assert [response.status_code for response in answers] == [200, 200, 503]
        assert_shed(answers[2], "past the invocation timeout (3 s)")
        found = wait_for_samples(stack.url + "/metrics", lambda s: s.value(SHED) >= 1)
        assert found.value(SHED, reason="expired", route="service") == 1
        assert model_server_requests(stack) - before == 2


def large_sleep_npy(seconds: float, size: int = 3 << 19) -> bytes:
    """A 1.5 MB .npy for the sleeper: a large body (1 MB or more) that sleeps ``seconds``."""
    values = np.zeros(size // 4, np.float32)
    values[0] = seconds
    buffer = io.BytesIO()
    np.save(buffer, values)
    return buffer.getvalue()


def test_large_bodies_are_served_in_turn(tmp_path: Path, test_models) -> None:
    """SAGEMAKER_TFS_MAX_BODY_MB_IN_FLIGHT=2 and a 3 s timeout: of three 1.5 MB bodies of 1.8
    s sent together, one is served at a time (the second answered after ~3.6 s, not ~1.8 s as
    when the model server sleeps them side by side), and the third, still waiting when its 3 s
    have passed, is answered 503 without reaching the model server; /metrics counts the two in
    line meanwhile. A small body does not wait."""
    env = {"SAGEMAKER_TFS_MAX_BODY_MB_IN_FLIGHT": "2", "SAGEMAKER_MODEL_SERVER_TIMEOUT": "3"}
    with sleeper_stack(tmp_path, test_models, env) as stack:
        before = model_server_requests(stack)
        npy = "application/x-npy"
        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            calls = [pool.submit(post, stack, large_sleep_npy(1.8), npy, Accept=npy)
                     for _ in range(3)]  # fmt: skip
            time.sleep(0.5)
            waiting = scrape(stack.url + "/metrics").value(LARGE_BODIES_WAITING)
            small, small_seconds = post(stack, sleep_npy(0.0), npy)
            answers = sorted((f.result() for f in calls), key=lambda a: a[0].status_code)
        assert small.status_code == 200 and small_seconds < 1.0, small.text
        assert waiting == 2  # one served, two in line
        assert scrape(stack.url + "/metrics").value(LARGE_BODIES_WAITING) == 0
        assert [response.status_code for response, _ in answers] == [200, 200, 503]
        assert max(seconds for _, seconds in answers[:2]) >= 3.4
        assert_shed(answers[2][0], "behind other large bodies")
        found = wait_for_samples(stack.url + "/metrics", lambda s: s.value(SHED) >= 1)
        assert found.value(SHED, reason="expired", route="service") == 1
        assert model_server_requests(stack) - before == 3  # the two large ones and the small


def test_njs_does_not_send_a_request_past_its_timeout(tmp_path: Path, test_models) -> None:
    """A JSON body that took longer than the invocation timeout (3 s) to arrive is answered
    503 by the njs without a call to the model server."""
    with sleeper_stack(tmp_path, test_models, {"SAGEMAKER_MODEL_SERVER_TIMEOUT": "3"}) as stack:
        before = model_server_requests(stack)
        body = sleep_json(0.0).encode()
        with socket.create_connection(("127.0.0.1", stack.port), timeout=30) as connection:
            connection.sendall(
                b"POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Connection: close\r\nContent-Length: %d\r\n\r\n" % len(body) + body[:5]
            )
            time.sleep(3.5)
            connection.sendall(body[5:])
            answer = b""
            while chunk := connection.recv(65536):
                answer += chunk
        head, _, payload = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 503"), answer
        assert b"\r\nRetry-After: 1" in head
        assert "past the invocation timeout (3 s)" in json.loads(payload)["error"]
        found = wait_for_samples(stack.url + "/metrics", lambda s: s.value(SHED) >= 1)
        assert found.value(SHED, reason="expired", route="njs") == 1
        assert model_server_requests(stack) == before
        response, _ = post(stack, sleep_json(0.0))
        assert response.status_code == 200, response.text


def test_a_full_batch_queue_is_an_overload(tmp_path: Path, test_models) -> None:
    """Batching with one batch thread and one enqueued batch of one: while one 3 s call runs
    and one waits, more calls are refused by the model server's batch queue, and the stack
    answers them as overloaded (no failover, no retry), on both routes."""
    env = {
        "SAGEMAKER_TFS_ENABLE_BATCHING": "true",
        "SAGEMAKER_TFS_MAX_BATCH_SIZE": "1",
        "SAGEMAKER_TFS_NUM_BATCH_THREADS": "1",
        "SAGEMAKER_TFS_MAX_ENQUEUED_BATCHES": "1",
    }
    with sleeper_stack(tmp_path, test_models, env) as stack:
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            busy = [pool.submit(post, stack, sleep_json(3.0))]
            time.sleep(0.5)
            busy.append(pool.submit(post, stack, sleep_json(0.5)))
            time.sleep(0.5)
            for body, content_type in ((sleep_json(0.0), "application/json"),
                                       (sleep_npy(0.0), "application/x-npy")):  # fmt: skip
                response, seconds = post(stack, body, content_type)
                assert_shed(response, "batch")
                assert seconds < 1.5
            assert [future.result()[0].status_code for future in busy] == [200, 200]
        found = wait_for_samples(stack.url + "/metrics", lambda s: s.value(SHED) >= 2)
        assert found.value(SHED, reason="queue_full", route="njs") == 1
        assert found.value(SHED, reason="queue_full", route="fast_path") == 1


def metrics_text(stack: Stack) -> str:
    response = requests.get(stack.url + "/metrics", timeout=30)
    assert response.status_code == 200
    return response.text


@pytest.fixture(scope="module")
def default_stack(tmp_path_factory: pytest.TempPathFactory, test_models) -> Iterator[Stack]:
    """The sleeper served with default settings."""
    with sleeper_stack(tmp_path_factory.mktemp("default"), test_models, {}) as stack:
        yield stack


def test_the_default_bound_sheds_nothing_at_32_connections(default_stack: Stack) -> None:
    """32 clients sending small JSON as fast as they are answered: every answer a 200."""
    stack = default_stack
    bound = default_concurrent_invocations(os.cpu_count() or 1)
    assert f"limit_conn tfs_invocations {bound};" in (stack.work_dir / "nginx.conf").read_text()

    def client(_: int) -> list[int]:
        with requests.Session() as session:
            return [
                session.post(stack.url + "/invocations", data=sleep_json(0.0),
                             headers={"Content-Type": "application/json"}, timeout=60).status_code
                for _ in range(25)
            ]  # fmt: skip

    with concurrent.futures.ThreadPoolExecutor(32) as pool:
        statuses = [status for statuses in pool.map(client, range(32)) for status in statuses]
    assert statuses == [200] * 800
    assert scrape(stack.url + "/metrics").value(SHED) == 0


def test_made_up_model_names_leave_the_metrics_as_they_were(default_stack: Stack) -> None:
    """3,000 requests naming models that do not exist (each a 404, half through njs, half
    through the Python service) add a few KB to /metrics (one ``unknown`` series per route),
    not one series per name, in the supervisor's counts or the model server's."""
    stack = default_stack

    def made_up(number: int) -> int:
        name = f"made-up-{uuid.uuid4().hex}"
        body, content_type = (
            (sleep_json(0.0), "application/json") if number % 2
            else (sleep_npy(0.0), "application/x-npy")
        )  # fmt: skip
        response, _ = post(stack, body, content_type, **{ATTRIBUTES: f"tfs-model-name={name}"})
        return response.status_code

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        assert set(pool.map(made_up, range(20))) == {404}
        # nginx writes its edge lines within 100 ms: the baseline must count the first 20.
        wait_for_samples(
            stack.url + "/metrics",
            lambda s: s.value("sagemaker_tfs_requests_total", model="unknown") >= 20,
        )
        before = metrics_text(stack)
        assert set(pool.map(made_up, range(3000))) == {404}
    after = wait_for_samples(
        stack.url + "/metrics",
        lambda s: s.value("sagemaker_tfs_requests_total", model="unknown") >= 3020,
    )
    text = metrics_text(stack)
    assert "made-up-" not in text
    assert len(text) - len(before) < 4096, (len(before), len(text))
    assert after.value("sagemaker_tfs_requests_total", model="unknown") == 3020
    unknown = Scrape(text).value(MODEL_SERVER_REQUESTS, model_name="unknown")
    assert unknown >= 1510  # the njs half (the service asks for metadata, not counted)
