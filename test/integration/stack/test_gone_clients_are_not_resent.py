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
import socket
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import grpc
import pytest
import requests
from front_end import EXAMPLE_MODELS
from local_ports import free_port
from nginx_in_front import start_gunicorn, start_nginx, stop_gunicorn, stop_nginx
from sagemaker_tfs.config import load_config
from sagemaker_tfs.ports import Instance
from sagemaker_tfs.service.routing.connections import Channels

pytestmark = pytest.mark.timeout(120)

PASS_THROUGH = """
def input_handler(data, context):
    return data.read().decode()


def output_handler(response, context):
    return response.content.decode(), "application/json"
"""
GONE = b'{"instances": [1.0]}'
STAYS = b'{"instances": [2.0]}'
MODEL_ANSWER = b'{"predictions": [3.5]}'
RESENDING_SECONDS = 0.6  # the service resends every 100 ms meanwhile
SEEN_WITHIN_SECONDS = 0.3  # after the client's close, no attempt starts later than this
WATCHED_SECONDS = 1.0  # how long no attempt is looked for (10 before this change)


class RestartingModelServer:
    """A model server's REST port and gRPC socket that refuse every call as a restarting one
    does until ``back``; then REST answers MODEL_ANSWER and gRPC NOT_FOUND (the service then
    posts the JSON over REST). ``posts``: the REST bodies; ``grpc_calls``: their count."""

    def __init__(self, grpc_target: str) -> None:
        self.back = False
        self.posts: list[bytes] = []
        self.grpc_calls = 0
        self.rest = ThreadingHTTPServer(("127.0.0.1", 0), self._rest_handler())
        self.rest.daemon_threads = True
        threading.Thread(target=self.rest.serve_forever, daemon=True).start()
        self.grpc = grpc.server(ThreadPoolExecutor(4))
        self.grpc.add_generic_rpc_handlers([_Refusing(self)])
        self.grpc.add_insecure_port(grpc_target)
        self.grpc.start()

    def _rest_handler(self) -> type[BaseHTTPRequestHandler]:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802
                owner.posts.append(self.rfile.read(int(self.headers["Content-Length"])))
                status, body = (200, MODEL_ANSWER) if owner.back else (503, b'{"error": "x"}')
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                pass

        return Handler

    @property
    def rest_port(self) -> int:
        return self.rest.server_address[1]

    def close(self) -> None:
        self.grpc.stop(0)
        self.rest.shutdown()
        self.rest.server_close()


class _Refusing(grpc.GenericRpcHandler):
    def __init__(self, owner: RestartingModelServer) -> None:
        self.owner = owner

    def service(self, details: Any) -> grpc.RpcMethodHandler:
        return grpc.unary_unary_rpc_method_handler(self.call)

    def call(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        self.owner.grpc_calls += 1
        if self.owner.back:
            context.abort(grpc.StatusCode.NOT_FOUND, "no such model")
        context.abort(grpc.StatusCode.UNAVAILABLE, "the model server is restarting")


@dataclasses.dataclass
class Stack:
    port: int
    model_server: RestartingModelServer
    resends: Callable[[], int]  # the service's calls to the model server so far


@pytest.fixture(params=[True, False], ids=["inference.py (REST)", "no inference.py (gRPC)"])
def stack(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Stack]:
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (model_dir / "half_plus_three").symlink_to(EXAMPLE_MODELS / "half_plus_three")
    if request.param:
        (model_dir / "code").mkdir()
        (model_dir / "code" / "inference.py").write_text(PASS_THROUGH)
    config = load_config({}, model_dir=str(model_dir), work_dir=str(tmp_path / "w"),
                         port=free_port())  # fmt: skip
    grpc_port = free_port()
    Path(config.work.root).mkdir(parents=True)
    model_server = RestartingModelServer(Channels(config.work.grpc_socket_path).target(grpc_port))
    config = dataclasses.replace(config, instances=(Instance(grpc_port, model_server.rest_port),))
    gunicorn = start_gunicorn(config)
    nginx = start_nginx(config)
    if request.param:
        resends = lambda: len(model_server.posts)  # noqa: E731
    else:
        resends = lambda: model_server.grpc_calls  # noqa: E731
    yield Stack(config.port, model_server, resends)
    stop_nginx(nginx)
    stop_gunicorn(gunicorn)
    model_server.close()


def send_invocation(port: int, body: bytes) -> socket.socket:
    """An invocation sent on a raw connection, its answer not read."""
    connection = socket.create_connection(("127.0.0.1", port))
    head = "POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    connection.sendall(f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body)
    return connection


def invoke(port: int, body: bytes) -> requests.Response:
    return requests.post(f"http://127.0.0.1:{port}/invocations", data=body, timeout=30,
                         headers={"Content-Type": "application/json"})  # fmt: skip


def test_a_gone_clients_prediction_stops_being_resent(stack: Stack) -> None:
    """A client sends a prediction while the model server restarts and closes its connection
    0.6 s later: within 0.3 s the service stops resending it (before: every 100 ms for the
    rest of its 10 s). A client that then sends one and waits gets its answer once the model
    server is back, after resends that went on meanwhile."""
    gone = send_invocation(stack.port, GONE)
    time.sleep(RESENDING_SECONDS)
    assert stack.resends() >= 3, "the service was not resending the prediction"
    gone.close()
    time.sleep(SEEN_WITHIN_SECONDS)
    after_the_close = stack.resends()
    time.sleep(WATCHED_SECONDS)
    assert stack.resends() == after_the_close, "resent after its client was gone"
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(invoke, stack.port, STAYS)
        time.sleep(RESENDING_SECONDS)
        assert stack.resends() >= after_the_close + 3, "the waiting client's was not resent"
        stack.model_server.back = True
        answer = waiting.result()
    assert (answer.status_code, answer.content) == (200, MODEL_ANSWER)
    assert GONE not in stack.model_server.posts[-1:]
