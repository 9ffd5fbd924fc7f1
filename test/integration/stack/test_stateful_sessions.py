"""Stateful sessions through the whole stack (real nginx, two gunicorn workers, the Python
model server), with ``examples/inference/sessions`` as the handler: sessions opened in both
workers, used across 1,000 concurrent requests without one session's state reaching another,
closed, expired and bounded; and what they are without ``inference.py``.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests
from metrics_scrape import wait_for_samples
from whole_stack import (
    RunningStack,
    cmdline,
    descendant_pids,
    pid_alive,
    stack_with_code,
    wait_for,
)

pytestmark = pytest.mark.timeout(600)

REPO_ROOT = Path(__file__).resolve().parents[3]
MODEL = REPO_ROOT / "test" / "resources" / "models" / "half_plus_three"
SESSIONS_EXAMPLE = REPO_ROOT / "examples" / "inference" / "sessions" / "code"
NEW_SESSION = json.dumps({"requestType": "NEW_SESSION"})
CLOSE = json.dumps({"requestType": "CLOSE"})
SESSION_HEADER = "X-Amzn-SageMaker-Session-Id"
NEW_SESSION_HEADER = re.compile(r"(\d+-[0-9a-f]{32}); Expires=(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)")
OPEN_GAUGE = "sagemaker_tfs_sessions_open"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    env = {"SAGEMAKER_TFS_SESSIONS": "true", "SAGEMAKER_GUNICORN_WORKERS": "2"}
    root = tmp_path_factory.mktemp("sessions")
    with stack_with_code(root, MODEL, SESSIONS_EXAMPLE, env) as running:
        yield running


def open_session(stack: RunningStack) -> str:
    response = stack.post(NEW_SESSION, **{SESSION_HEADER: "NEW_SESSION"})
    assert response.status_code == 200, response.text
    match = NEW_SESSION_HEADER.fullmatch(response.headers["X-Amzn-SageMaker-New-Session-Id"])
    assert match, response.headers
    assert response.json() == {"session_id": match.group(1), "expires": match.group(2)}
    return match.group(1)


def in_session(stack: RunningStack, session_id: str, values: list[float]) -> requests.Response:
    return stack.post(json.dumps({"instances": values}), **{SESSION_HEADER: session_id})


def close(stack: RunningStack, session_id: str) -> requests.Response:
    return stack.post(CLOSE, **{SESSION_HEADER: session_id})


def sessions_in_both_workers(stack: RunningStack, wanted: int) -> list[str]:
    """Opened concurrently until each worker (slot 0 and 1) holds ``wanted`` sessions; the
    extra ones are closed."""
    kept: dict[str, list[str]] = {"0": [], "1": []}
    with ThreadPoolExecutor(16) as pool:
        for _ in range(20):
            for session_id in pool.map(lambda _: open_session(stack), range(16)):
                slot = session_id.split("-")[0]
                target = kept[slot] if len(kept[slot]) < wanted else None
                if target is not None:
                    target.append(session_id)
                else:
                    assert close(stack, session_id).status_code == 200
            if all(len(ids) == wanted for ids in kept.values()):
                return kept["0"] + kept["1"]
    pytest.fail(f"the sessions were not opened in both workers: {kept}")


def test_sessions_across_two_workers_and_a_thousand_requests(stack: RunningStack) -> None:
    """Each request adds one value to its session's history: at the end every session has
    seen exactly its own requests' predictions, whichever worker holds it."""
    sessions = sessions_in_both_workers(stack, 5)
    requests_of = {session_id: [] for session_id in sessions}
    work = [(sessions[i % len(sessions)], float(i)) for i in range(1000)]

    def call(item: tuple[str, float]) -> tuple[str, float, dict]:
        session_id, x = item
        response = in_session(stack, session_id, [x])
        assert response.status_code == 200, response.text
        return session_id, x, response.json()

    with ThreadPoolExecutor(8) as pool:
        for session_id, x, answer in pool.map(call, work):
            assert answer["predictions"] == [0.5 * x + 3]
            requests_of[session_id].append(x)
            assert 1 <= answer["seen"] <= len(work) // len(sessions)
    for session_id, xs in requests_of.items():
        final = in_session(stack, session_id, [0.0]).json()
        expected = [0.5 * x + 3 for x in xs] + [3.0]
        assert final["seen"] == len(expected), session_id
        assert final["total"] == pytest.approx(sum(expected)), session_id
    # a request outside any session sees no session's state
    assert stack.post(json.dumps({"instances": [1.0]})).json() == {"predictions": [3.5]}
    for session_id in sessions:
        closed = close(stack, session_id)
        assert closed.status_code == 200
        assert closed.headers["X-Amzn-SageMaker-Closed-Session-Id"] == session_id
    after = in_session(stack, sessions[0], [1.0])
    assert after.status_code == 400 and sessions[0] in after.json()["error"]
    found = wait_for_samples(f"{stack.url}/metrics", lambda s: s.value(OPEN_GAUGE) == 0)
    assert found.value(OPEN_GAUGE) == 0


def test_an_id_no_worker_holds_is_a_400_naming_it(stack: RunningStack) -> None:
    for session_id in ("1-" + "0" * 32, "0-" + "f" * 32, "7-" + "0" * 32, "no-such-session"):
        response = in_session(stack, session_id, [1.0])
        assert response.status_code == 400, response.text
        assert session_id in response.json()["error"]
    no_header = stack.post(CLOSE)
    assert no_header.status_code == 400 and SESSION_HEADER in no_header.json()["error"]
    control = stack.post(b'{"instances": [1.0]}', **{SESSION_HEADER: "0-\x01"})
    assert control.status_code == 400 and "control characters" in control.json()["error"]


def test_a_worker_that_exits_takes_only_its_sessions(stack: RunningStack) -> None:
    """SIGKILL one gunicorn worker: its replacement takes its slot and socket; the killed
    worker's session answers 400 naming it, the other worker's lives on, and new sessions
    open in both slots again."""
    survivor_of = {}
    for session_id in sessions_in_both_workers(stack, 1):
        assert in_session(stack, session_id, [1.0]).json()["seen"] == 1
        survivor_of[session_id.split("-")[0]] = session_id
    workers = [pid for pid in descendant_pids(stack.process.pid)
               if "gunicorn: worker" in cmdline(pid)]  # fmt: skip
    assert len(workers) == 2
    os.kill(workers[0], signal.SIGKILL)
    assert wait_for(lambda: not pid_alive(workers[0]), 10)
    answers = {}
    for slot, session_id in survivor_of.items():
        answers[slot] = None
        deadline = time.monotonic() + 60
        while answers[slot] not in (200, 400) and time.monotonic() < deadline:
            answers[slot] = in_session(stack, session_id, [1.0]).status_code  # 503: restarting
            time.sleep(0.2)
    assert sorted(answers.values()) == [200, 400], answers
    lost = next(slot for slot, status in answers.items() if status == 400)
    error = in_session(stack, survivor_of[lost], [1.0]).json()["error"]
    assert survivor_of[lost] in error
    assert len(sessions_in_both_workers(stack, 2)) == 4


@pytest.fixture(scope="module")
def small_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    """No inference.py, one worker, sessions of 2 s, at most 2 at once."""
    env = {
        "SAGEMAKER_ENABLE_STATEFUL_SESSIONS": "true",
        "SAGEMAKER_TFS_SESSION_TTL_SECONDS": "2",
        "SAGEMAKER_TFS_MAX_SESSIONS": "2",
    }
    with stack_with_code(tmp_path_factory.mktemp("sessions_small"), MODEL, None, env) as running:
        yield running


def test_without_inference_py_a_session_only_pins_requests(small_stack: RunningStack) -> None:
    """The service converts the JSON itself (njs is left out with sessions on); the model
    server keeps no state."""
    session_id = open_session(small_stack)
    answer = in_session(small_stack, session_id, [1.0, 2.0])
    assert answer.status_code == 200 and answer.json() == {"predictions": [3.5, 4.0]}
    assert close(small_stack, session_id).status_code == 200
    assert in_session(small_stack, session_id, [1.0]).status_code == 400


def test_sessions_expire_and_are_bounded(small_stack: RunningStack) -> None:
    first, second = open_session(small_stack), open_session(small_stack)
    refused = small_stack.post(NEW_SESSION)
    assert refused.status_code == 503
    assert "SAGEMAKER_TFS_MAX_SESSIONS" in refused.json()["error"]
    opened_at = time.monotonic()
    assert in_session(small_stack, first, [1.0]).status_code == 200
    metrics = f"{small_stack.url}/metrics"
    # freed when they expire, with no request to sweep them (the sweeper runs each TTL)
    found = wait_for_samples(metrics, lambda s: s.value(OPEN_GAUGE) == 0, timeout=10)
    assert found.value(OPEN_GAUGE) == 0 and time.monotonic() - opened_at >= 1.5
    for session_id in (first, second):
        expired = in_session(small_stack, session_id, [1.0])
        assert expired.status_code == 400 and session_id in expired.json()["error"]
    assert Counter(open_session(small_stack).split("-")[0] for _ in range(2)) == {"0": 2}
