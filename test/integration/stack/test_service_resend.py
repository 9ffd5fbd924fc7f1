"""A request that its gunicorn worker took and then died with, on a new connection, is sent
once more (issue 55: one request in ~1,300 was answered 503 when a gunicorn worker was killed
under a request stream).

nginx sends again a request that failed on a kept-alive connection, but gives an upstream of
one server one try: a request cut on a fresh connection was answered 502 (503 to the client).
Now ``@python_service`` hands it to ``@python_service_again`` (nginx/service_retry.conf), only
where no inference.py can have run it. (Listing the socket twice, or again as a backup, also
resent it, but made worker kills cost 9-10 of ~1,200 requests instead of 0-1: the second entry
is tried once, so two dead kept-alive connections in a row ended a request.)

The real nginx with the stack's configuration runs in front of a stand-in for gunicorn on the
service's unix socket that takes the first connection's request and closes it unanswered, as
a killed worker does.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from local_ports import free_port
from nginx_in_front import UnixStandIn, answer_json, read_request, start_nginx, stop_nginx
from sagemaker_tfs.config import load_config

EXAMPLE_MODELS = Path(__file__).resolve().parents[2] / "resources" / "models"
ANSWER = b'{"predictions": [3.5]}'


class DyingFirstWorker(UnixStandIn):
    """A unix-socket HTTP server whose first ``dying`` connections die after their request was
    read."""

    def __init__(self, path: str, dying: int = 1) -> None:
        self.dying = dying
        self.silent_seconds = 0.0  # instead: each request held this long, unanswered
        super().__init__(path)

    def serve(self, connection: socket.socket, number: int) -> None:
        die = number <= self.dying
        while read_request(connection) is not None:
            if self.silent_seconds:
                time.sleep(self.silent_seconds)
                return
            if die:
                return  # closed with the request read and nothing answered
            answer_json(connection, ANSWER)


@pytest.fixture(params=[False, True], ids=["no inference.py", "inference.py"])
def front(
    tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[tuple[str, DyingFirstWorker, bool]]:
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (model_dir / "half_plus_three").symlink_to(EXAMPLE_MODELS / "half_plus_three")
    if request.param:
        (model_dir / "code").mkdir()
        (model_dir / "code" / "inference.py").write_text("def handler(data, context):\n    pass\n")
    timeouts = {"SAGEMAKER_NGINX_PROXY_READ_TIMEOUT_SECONDS": "2",
                "SAGEMAKER_GUNICORN_TIMEOUT_SECONDS": "2"}  # fmt: skip
    config = load_config(timeouts, model_dir=str(model_dir), work_dir=str(tmp_path / "w"),
                         port=free_port())  # fmt: skip
    Path(config.work.root).mkdir(parents=True)
    worker = DyingFirstWorker(config.work.service_socket)
    nginx = start_nginx(config)
    url = f"http://127.0.0.1:{config.port}"
    yield url, worker, request.param
    stop_nginx(nginx)
    worker.close()


def post_npy(url: str) -> requests.Response:
    """An invocation with a binary body: the Python service's route, never the njs's."""
    return requests.post(
        f"{url}/invocations", data=b"\x93NUMPY" + b"\x00" * 64, timeout=30,
        headers={"Content-Type": "application/x-npy", "Accept": "application/json"},
    )  # fmt: skip


def test_a_request_cut_by_its_workers_death_on_a_new_connection_is_sent_again(front) -> None:
    """Without inference.py (a prediction: idempotent) it is answered by the next worker;
    with it, never sent again: user code runs once per request, so the client gets the 503."""
    url, worker, user_code = front
    response = post_npy(url)
    if user_code:
        assert response.status_code == 503
        assert response.json() == {"error": "The inference service is not available"}
        assert worker.connections == 1
    else:
        assert (response.status_code, response.content) == (200, ANSWER)
        assert worker.connections == 2  # the first died with the request, the second answered


def test_a_request_whose_second_try_dies_too_is_answered_503_json_once(front) -> None:
    """The second try is the last: no loop between the two locations, and the answer is the
    stack's JSON 503, not nginx's page."""
    url, worker, user_code = front
    worker.dying = 1_000
    response = post_npy(url)
    assert response.status_code == 503
    assert response.json() == {"error": "The inference service is not available"}
    assert worker.connections == (1 if user_code else 2)


def test_a_timeout_is_still_the_stacks_json_504_and_not_sent_again(front) -> None:
    """The location that resends a dead worker's request has error pages of its own: nginx's
    other errors there are still the stack's JSON, and a timeout is never sent again."""
    url, worker, _ = front
    worker.silent_seconds = 5.0
    response = post_npy(url)
    assert response.status_code == 504
    assert response.json() == {"error": "No answer within 2 seconds"}
    assert worker.connections == 1
