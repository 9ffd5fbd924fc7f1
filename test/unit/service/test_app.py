"""sagemaker_tfs.service.app: failover and how answers are handed to falcon.

A prediction whose model server is unreachable is sent again: other instances first, then
the same ones after a pause, within a bounded time; other errors are not retried. Small
answers are sent whole, large chunk lists in pieces.
"""

from __future__ import annotations

import socket
import time
import tracemalloc
from pathlib import Path

import falcon
import falcon.testing
import grpc
import numpy as np
import pytest
import requests
from gunicorn.http.body import Body, LengthReader
from gunicorn.http.unreader import IterUnreader
from sagemaker_tfs.config import Instance, load_config
from sagemaker_tfs.service import app
from sagemaker_tfs.service.app import SEND_PIECE_BYTES, _send, enlarge_send_buffer
from sagemaker_tfs.service.connections import Channels, rest_session
from sagemaker_tfs.service.errors import ModelServerUnavailable
from sagemaker_tfs.service.invoke import Reply, model_server_unreachable
from sagemaker_tfs.service.multi_model import ModelDirectory
from sagemaker_tfs.service.routing import TARGET_MODEL_HEADER, InstancePicker
from sagemaker_tfs.wire.errors import HttpError


class Unavailable(grpc.RpcError):
    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNAVAILABLE


class InvalidArgument(grpc.RpcError):
    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.INVALID_ARGUMENT


def test_rotation_starts_with_the_next_instance_and_covers_all() -> None:
    instances = [Instance(1, 2), Instance(3, 4), Instance(5, 6)]
    picker = InstancePicker(instances)
    assert picker.rotation() == tuple(instances)
    assert picker.rotation() == (instances[1], instances[2], instances[0])
    assert picker.next() == instances[2]


def test_the_next_candidate_answers() -> None:
    tried: list[int] = []

    def attempt(index: int) -> Reply:
        tried.append(index)
        if index == 0:
            raise ModelServerUnavailable("connection refused")
        return Reply(200, b"ok", "application/json")

    assert app.with_failover(attempt, 2).body == b"ok"
    assert tried == [0, 1]


def test_other_errors_are_not_retried() -> None:
    tried: list[int] = []

    def attempt(index: int) -> Reply:
        tried.append(index)
        raise HttpError(400, "bad input")

    with pytest.raises(HttpError):
        app.with_failover(attempt, 2)
    assert tried == [0]


def test_retries_stop_after_the_failover_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(app, "FAILOVER_SECONDS", 0.3)
    monkeypatch.setattr(app, "FAILOVER_PAUSE_SECONDS", 0.05)
    tried: list[int] = []

    def attempt(index: int) -> Reply:
        tried.append(index)
        raise ModelServerUnavailable("connection refused")

    with pytest.raises(ModelServerUnavailable) as caught:
        app.with_failover(attempt, 1)
    assert caught.value.status == 503
    assert 3 <= len(tried) <= 10  # paused between rounds, did not spin


def _raised_from(cause: BaseException) -> Exception:
    try:
        try:
            raise cause
        except BaseException as inner:
            raise ValueError("handler failed") from inner
    except ValueError as outer:
        return outer


def test_unreachable_model_server_is_recognised_through_user_exceptions() -> None:
    assert model_server_unreachable(requests.ConnectionError("refused"))
    assert model_server_unreachable(_raised_from(requests.ConnectionError("reset")))
    assert model_server_unreachable(_raised_from(Unavailable()))
    assert not model_server_unreachable(_raised_from(InvalidArgument()))
    assert not model_server_unreachable(ValueError("bad input"))
    assert not model_server_unreachable(requests.HTTPError("400"))


def test_an_unreachable_instance_is_tried_last_for_a_while() -> None:
    a, b = Instance(1, 2), Instance(3, 4)
    picker = InstancePicker([a, b], down_seconds=0.2)
    picker.mark_down(a)
    assert picker.rotation() == (b, a)
    assert picker.rotation() == (b, a)  # whatever the turn
    time.sleep(0.25)
    assert picker.rotation() in ((a, b), (b, a))
    assert {picker.rotation()[0], picker.rotation()[0]} == {a, b}  # round-robin again


def test_small_chunk_lists_are_sent_whole() -> None:
    resp = falcon.Response()
    _send(resp, Reply(200, [b"head", memoryview(b"-tail")], "application/x-npy"))
    assert resp.data == b"head-tail" and resp.stream is None
    assert resp.content_type == "application/x-npy"


def test_large_answers_stream_in_bounded_pieces_with_their_length() -> None:
    values = np.random.default_rng(0).integers(0, 256, 2 * SEND_PIECE_BYTES + 10, np.uint8)
    chunks = [b"header", memoryview(values), b"trailer"]
    resp = falcon.Response()
    _send(resp, Reply(200, chunks, "application/x-npz"))
    pieces = list(resp.stream)
    assert all(isinstance(piece, bytes) and len(piece) <= SEND_PIECE_BYTES for piece in pieces)
    assert b"".join(pieces) == b"header" + values.tobytes() + b"trailer"
    assert int(resp.content_length) == len(b"".join(pieces))


def send_buffer(connection: socket.socket) -> int:
    return connection.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)


class FixedAnswer(app.Service):
    """A service that answers ``size`` bytes to every invocation."""

    def __init__(self, size: int) -> None:
        self.size = size

    def invoke(self, req: falcon.Request, name: str | None) -> Reply:
        return Reply(200, [bytes(self.size)], "application/x-npz")

    def describe(self) -> str:
        return "fixed answer"


@pytest.mark.parametrize("size, enlarged", [(SEND_PIECE_BYTES + 1, True), (100, False)])
def test_a_large_answer_leaves_through_a_larger_send_buffer(size: int, enlarged: bool) -> None:
    """gunicorn's socket to nginx gets a larger send buffer for answers sent in pieces (under
    gevent, each time the buffer fills, the worker waits in the hub for nginx to read)."""
    client = falcon.testing.TestClient(app.build_app(FixedAnswer(size)))
    gunicorn_side, nginx_side = socket.socketpair()
    with gunicorn_side, nginx_side:
        before = send_buffer(gunicorn_side)
        result = client.simulate_post("/invocations", extras={"gunicorn.socket": gunicorn_side})
        assert result.status_code == 200 and len(result.content) == size
        assert (send_buffer(gunicorn_side) > before) is enlarged


def test_enlarging_the_send_buffer_is_best_effort() -> None:
    enlarge_send_buffer(None)  # not served by gunicorn (e.g. falcon's test client)
    closed = socket.socket(socket.AF_UNIX)
    closed.close()
    enlarge_send_buffer(closed)  # OSError swallowed: the answer is sent either way


class NoModels:
    """The registry's control API with no model loaded."""

    def describe(self, name: str) -> None:
        return None


def models_dir(tmp_path: Path) -> str:
    (tmp_path / "models" / "m" / "1").mkdir(parents=True)
    (tmp_path / "models" / "m" / "1" / "saved_model.pb").write_bytes(b"")
    return str(tmp_path / "models")


def test_a_multi_model_endpoint_routes_by_model_name(tmp_path: Path) -> None:
    env = {"SAGEMAKER_MULTI_MODEL": "true"}
    config = load_config(env, models_dir(tmp_path), str(tmp_path), 8080, 1)
    directory = ModelDirectory(NoModels(), config.model_dir, config.work_dir)  # type: ignore[arg-type]
    service = app.MultiModelService(config, Channels(), rest_session(), directory)
    client = falcon.testing.TestClient(app.build_app(service))
    unnamed = client.simulate_post("/invocations", body="[1]")
    assert unnamed.status_code == 400 and TARGET_MODEL_HEADER in unnamed.json["error"]
    for answer in (
        client.simulate_post("/models/m/invoke", body="[1]"),
        client.simulate_post("/invocations", body="[1]", headers={TARGET_MODEL_HEADER: " m "}),
    ):
        assert answer.status_code == 404 and answer.json == {"error": "Model m is not loaded yet."}


def test_a_single_model_endpoint_has_no_model_routes(tmp_path: Path) -> None:
    config = load_config({}, models_dir(tmp_path), str(tmp_path), 8080, 1)
    service = app.make_service(config)
    assert isinstance(service, app.SingleModelService) and service.user_code is None
    client = falcon.testing.TestClient(app.build_app(service))
    assert client.simulate_post("/models/m/invoke", body="[1]").status_code == 404


def body_request(data: bytes, content_length: int) -> falcon.Request:
    """A request whose body gunicorn reads (its own Body and LengthReader), 64 KB per recv."""
    pieces = (data[start : start + (64 << 10)] for start in range(0, len(data), 64 << 10))
    headers = {"Content-Length": str(content_length)}
    env = falcon.testing.create_environ(method="POST", path="/invocations", headers=headers)
    env["wsgi.input"] = Body(LengthReader(IterUnreader(pieces), content_length))
    return falcon.Request(env)


def test_a_body_is_read_into_one_buffer_of_its_size() -> None:
    """Its bytes are allocated once: the peak of the read is the body and a 1 MiB piece, not the
    eighth more of a grown buffer (read whole, gunicorn's way: about 1.1x; tracemalloc sees
    every Python allocation)."""
    size = 128 << 20  # gunicorn's own pieces and buffers add ~3 MB whatever the size
    data = np.random.default_rng(1).integers(0, 256, size, np.uint8).tobytes()
    request = body_request(data, size)
    tracemalloc.start()
    try:
        body = app.read_body(request)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert type(body) is bytes and body == data
    assert peak < size * 1.06, f"peak {peak / size:.2f}x the body"


def test_a_body_shorter_than_its_content_length_is_a_400() -> None:
    with pytest.raises(HttpError, match="ended after 10 of its 20 bytes") as raised:
        app.read_body(body_request(b"x" * 10, 20))
    assert raised.value.status == 400
