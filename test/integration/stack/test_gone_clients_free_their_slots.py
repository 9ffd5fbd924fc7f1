"""An invocation whose client closed its connection while no model server could take it gives
its admission slot back at once (issue 55: docs/performance.md saw the bound's 503s with 48-64
connections after a ``wrk`` run that ended with requests in flight).

njs cannot see a client's close (its subrequests are background ones, and the main request's
reading is blocked while njs holds it), and it used to resend a refused prediction every
100 ms for up to 10 s, all that time holding its slot of
SAGEMAKER_TFS_MAX_CONCURRENT_INVOCATIONS. Now njs tries twice and hands the request to the
Python service, which resends it on its side; nginx proxying to the service sees the close.

The real nginx with the stack's configuration runs in front of two stand-ins: a model server
that refuses (503) the bodies of the clients that go away and answers the others after a
while, and a service on its unix socket that holds what it is handed (as the service's own
resends do while the model server is away) or answers it at once.
"""

from __future__ import annotations

import dataclasses
import json
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import requests
from local_ports import free_port
from nginx_in_front import (
    UnixStandIn,
    answer_json,
    read_request,
    send_invocation,
    start_nginx,
    stop_nginx,
)
from sagemaker_tfs.config import load_config
from sagemaker_tfs.ports import Instance

pytestmark = pytest.mark.timeout(120)

EXAMPLE_MODELS = Path(__file__).resolve().parents[2] / "resources" / "models"
BOUND = 4
REFUSED = b'{"instances": [1.0]}'  # the model server answers these 503 (it "restarts")
SERVED = b'{"instances": [2.0]}'  # and these 200, after SERVED_SECONDS
SERVED_SECONDS = 1.0
MODEL_ANSWER = b'{"predictions": [3.5]}'
SERVICE_ANSWER = b'{"predictions": [4.5]}'


class RefusingModelServer:
    """A model server's REST port that answers REFUSED bodies 503 at once and the others 200
    after SERVED_SECONDS (so that the served ones are in flight together)."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                owner.bodies.append(body)
                if body == REFUSED:
                    self._answer(503, b'{"error": "the model server is restarting"}')
                    return
                time.sleep(SERVED_SECONDS)
                self._answer(200, MODEL_ANSWER)

            def _answer(self, status: int, data: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def port(self) -> int:
        return self.server.server_address[1]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class StandInService(UnixStandIn):
    """The Python service's unix socket: each request read whole, then held until nginx closes
    the connection (``hold``) or answered SERVICE_ANSWER at once. Counts the requests it got
    and the connections nginx closed while one was held."""

    def __init__(self, path: str) -> None:
        self.hold = True
        self.requests: list[bytes] = []
        self.closed_while_held = 0
        super().__init__(path)

    def serve(self, connection: socket.socket, number: int) -> None:
        while (request := read_request(connection)) is not None:
            self.requests.append(request)
            if self.hold:
                connection.settimeout(60)
                if connection.recv(1) == b"":
                    self.closed_while_held += 1
                return
            answer_json(connection, SERVICE_ANSWER)


@dataclasses.dataclass
class Front:
    port: int
    model_server: RefusingModelServer
    service: StandInService


@pytest.fixture
def front(tmp_path: Path) -> Iterator[Front]:
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (model_dir / "half_plus_three").symlink_to(EXAMPLE_MODELS / "half_plus_three")
    model_server = RefusingModelServer()
    env = {"SAGEMAKER_TFS_MAX_CONCURRENT_INVOCATIONS": str(BOUND)}
    config = load_config(env, model_dir=str(model_dir), work_dir=str(tmp_path / "w"),
                         port=free_port())  # fmt: skip
    config = dataclasses.replace(config, instances=(Instance(free_port(), model_server.port),))
    Path(config.work.root).mkdir(parents=True)
    service = StandInService(config.work.service_socket)
    nginx = start_nginx(config)
    yield Front(config.port, model_server, service)
    stop_nginx(nginx)
    service.close()
    model_server.close()


def invoke(port: int, body: bytes) -> requests.Response:
    return requests.post(f"http://127.0.0.1:{port}/invocations", data=body, timeout=30,
                         headers={"Content-Type": "application/json"})  # fmt: skip


def test_clients_gone_during_resends_leave_the_whole_bound_free(front: Front) -> None:
    """The bound's count of clients send a prediction no model server takes and close their
    connections; 0.3 s later the bound's count of new ones are all admitted at once and
    served. (Before: all four answered 503 overloaded, the slots held by njs's resends for
    10 s.) The service's connections for the gone clients are closed by nginx."""
    gone = [send_invocation(front.port, REFUSED) for _ in range(BOUND)]
    time.sleep(0.5)  # each refused, sent again, refused again
    for connection in gone:
        connection.close()
    time.sleep(0.3)
    with ThreadPoolExecutor(BOUND) as pool:
        answers = list(pool.map(lambda _: invoke(front.port, SERVED), range(BOUND)))
    assert [(a.status_code, a.content) for a in answers] == [(200, MODEL_ANSWER)] * BOUND
    assert front.model_server.bodies.count(SERVED) == BOUND
    deadline = time.monotonic() + 5
    while front.service.closed_while_held < BOUND and time.monotonic() < deadline:
        time.sleep(0.05)
    assert front.service.closed_while_held == BOUND


def test_a_live_clients_refused_prediction_is_answered_by_the_service(front: Front) -> None:
    """A live client's prediction that no model server takes is tried twice here, then sent
    to the Python service as the client sent it (the service converts it and resends it to
    the model servers on its side), and the service's answer is the client's."""
    front.service.hold = False
    response = invoke(front.port, REFUSED)
    assert (response.status_code, response.content) == (200, SERVICE_ANSWER)
    assert front.model_server.bodies == [REFUSED, REFUSED]
    assert len(front.service.requests) == 1
    assert front.service.requests[0].endswith(b"\r\n\r\n" + REFUSED)
    assert b"content-type: application/json" in front.service.requests[0].lower()
    assert json.loads(response.content) == {"predictions": [4.5]}
