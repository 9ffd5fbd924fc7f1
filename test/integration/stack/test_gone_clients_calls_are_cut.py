"""A call waiting on a hung model server is cut off as soon as its client goes (issue 55).

The service stops resending a gone client's prediction (test_gone_clients_are_not_resent.py);
a call already in flight used to run to its deadline (60 s by default) on a model server that
accepts and does not answer, the worker and the model server working for no one. Now the
worker watches nginx's connection while the call waits and, when nginx closes it, cancels a
gRPC call (the model server sees it cancelled) or closes its REST connection.

Real nginx and gunicorn as the supervisor starts them, in front of a stand-in model server that
answers GetModelMetadata and then hangs every Predict and REST post until its caller lets go
(``slow_model_server.py``): with ``inference.py`` the call is the service's REST post between
the handlers; without, the fast path's gRPC Predict (a 4 MB body: the streamed Predict).
"""

from __future__ import annotations

import dataclasses
import io
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from nginx_in_front import nginx_and_gunicorn_before
from slow_model_server import SlowModelServer

pytestmark = pytest.mark.timeout(120)

PASS_THROUGH = """
def input_handler(data, context):
    return '{"instances": [1.0]}'


def output_handler(response, context):
    return response.content.decode(), "application/json"
"""
CUT_WITHIN_SECONDS = 1.0  # the stand-in sees the call let go this soon (before: at 60 s)


@dataclasses.dataclass
class Stack:
    port: int
    model_server: SlowModelServer


@pytest.fixture
def stack(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Stack]:
    code = PASS_THROUGH if request.param else None
    with nginx_and_gunicorn_before(tmp_path, code, SlowModelServer) as (port, model_server):
        yield Stack(port, model_server)


def npy(rows: int) -> bytes:
    out = io.BytesIO()
    np.save(out, np.ones((rows, 1), np.float32))
    return out.getvalue()


CASES = {  # with inference.py?, rows of the .npy body
    "inference.py: REST post": (True, 1),
    "fast path: gRPC Predict": (False, 1),
    "fast path, 4 MB: streamed Predict": (False, 1 << 20),
}


@pytest.mark.parametrize(("stack", "rows"), CASES.values(), ids=CASES.keys(), indirect=["stack"])
def test_a_gone_clients_call_is_cut_off(stack: Stack, rows: int) -> None:
    """A client whose prediction waits on a hung model server closes its connection: the
    model server sees the call cancelled (gRPC) or its connection closed (REST) within a
    second, and is not called again."""
    body = npy(rows)
    with socket.create_connection(("127.0.0.1", stack.port)) as client:
        head = "POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-npy\r\n"
        client.sendall(f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body)
        deadline = time.monotonic() + 30
        while stack.model_server.calls < 1:
            assert time.monotonic() < deadline, "the call did not reach the model server"
            time.sleep(0.02)
    assert stack.model_server.let_go.wait(CUT_WITHIN_SECONDS), "the call went on"
    time.sleep(0.3)
    assert stack.model_server.calls == 1
