"""The service stops resending a prediction once its client is gone, and keeps resending one
whose client waits until a model server takes it (issue 55).

While the model servers restart, the service resends its own calls every 100 ms for up to
10 s (``model_servers.Failover``). nginx frees a gone client's admission slot at once
(test_gone_clients_free_their_slots.py) and closes its connection to the service; the
service used to go on resending for nobody until a model server answered or the 10 s
passed. Now the worker sees the closed connection before each attempt and stops.

Real nginx and gunicorn as the supervisor starts them, in front of a stand-in model server
that refuses every call (REST 503, gRPC UNAVAILABLE) until it is "back", and counts them:
with ``inference.py`` the service's resends are its REST posts; without, a JSON prediction
is handed by njs to the service, whose resends are gRPC calls.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests
from nginx_in_front import (
    MODEL_ANSWER,
    RestartingModelServer,
    nginx_and_gunicorn_before,
    send_invocation,
)

pytestmark = pytest.mark.timeout(120)

PASS_THROUGH = """
def input_handler(data, context):
    return data.read().decode()


def output_handler(response, context):
    return response.content.decode(), "application/json"
"""
GONE = b'{"instances": [1.0]}'
STAYS = b'{"instances": [2.0]}'
RESENDS_SEEN = 3  # attempts counted before a client goes (one every 100 ms)
SEEN_WITHIN_SECONDS = 0.3  # after the client's close, no attempt starts later than this
WATCHED_SECONDS = 1.0  # how long no attempt is looked for (10 before this change)


@dataclasses.dataclass
class Stack:
    port: int
    model_server: RestartingModelServer
    resends: Callable[[], int]  # the service's calls to the model server so far


@pytest.fixture(params=[True, False], ids=["inference.py (REST)", "no inference.py (gRPC)"])
def stack(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Stack]:
    code = PASS_THROUGH if request.param else None
    with nginx_and_gunicorn_before(tmp_path, code, RestartingModelServer) as (port, model_server):
        if request.param:
            resends = lambda: len(model_server.posts)  # noqa: E731
        else:
            resends = lambda: model_server.grpc_calls  # noqa: E731
        yield Stack(port, model_server, resends)


def invoke(port: int, body: bytes) -> requests.Response:
    return requests.post(f"http://127.0.0.1:{port}/invocations", data=body, timeout=30,
                         headers={"Content-Type": "application/json"})  # fmt: skip


def counted(stack: Stack, calls: int, timeout: float = 10.0) -> bool:
    """Whether the model server got ``calls`` calls within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while stack.resends() < calls and time.monotonic() < deadline:
        time.sleep(0.02)
    return stack.resends() >= calls


def test_a_gone_clients_prediction_stops_being_resent(stack: Stack) -> None:
    """A client sends a prediction while the model server restarts and closes its connection
    once it was resent 3 times: within 0.3 s the service stops resending it (before: every
    100 ms for the rest of its 10 s). A client that then sends one and waits gets its answer
    once the model server is back, after resends that went on meanwhile."""
    gone = send_invocation(stack.port, GONE)
    assert counted(stack, RESENDS_SEEN), "the service was not resending the prediction"
    gone.close()
    time.sleep(SEEN_WITHIN_SECONDS)
    after_the_close = stack.resends()
    time.sleep(WATCHED_SECONDS)
    assert stack.resends() == after_the_close, "resent after its client was gone"
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(invoke, stack.port, STAYS)
        assert counted(stack, after_the_close + RESENDS_SEEN), "the waiting one's not resent"
        stack.model_server.back = True
        answer = waiting.result()
    assert (answer.status_code, answer.content) == (200, MODEL_ANSWER)
    assert GONE not in stack.model_server.posts[-1:]
