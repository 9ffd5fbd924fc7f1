"""sagemaker_tfs.service.edge.app: how answers are handed to falcon, and the routes of each mode.

Small answers are sent whole, large chunk lists in pieces.
"""

from __future__ import annotations

import socket
import tracemalloc
import types
from pathlib import Path
from typing import Any

import falcon
import falcon.testing
import numpy as np
import pytest
from gunicorn.http.body import Body, LengthReader
from gunicorn.http.unreader import IterUnreader
from sagemaker_tfs.config import load_config
from sagemaker_tfs.container_limits import CpuCount
from sagemaker_tfs.service.codecs.content_types import WrittenBody
from sagemaker_tfs.service.edge import app, http_bodies, sessions
from sagemaker_tfs.service.edge.body_budget import BodyBudget
from sagemaker_tfs.service.edge.http_bodies import _send, enlarge_send_buffer
from sagemaker_tfs.service.handlers.invoke import Reply
from sagemaker_tfs.service.handlers.multi_model import ModelDirectory
from sagemaker_tfs.service.handlers.streaming import PIECE_BYTES as SEND_PIECE_BYTES
from sagemaker_tfs.service.routing.connections import Channels, RestClient
from sagemaker_tfs.service.targets import ModelTarget
from sagemaker_tfs.wire.errors import HttpError
from sagemaker_tfs.wire.http_headers import SESSION_HEADER, TARGET_MODEL_HEADER


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


def test_a_written_answer_is_sent_as_it_is_written_without_a_length() -> None:
    def chunks() -> Any:
        yield b"{"
        yield bytes(SEND_PIECE_BYTES + 5)
        yield b"}"

    resp = falcon.Response()
    _send(resp, Reply(200, WrittenBody(chunks()), "application/json"))
    pieces = list(resp.stream)
    assert all(len(piece) <= SEND_PIECE_BYTES for piece in pieces)
    assert b"".join(pieces) == b"{" + bytes(SEND_PIECE_BYTES + 5) + b"}"
    assert resp.content_length is None  # gunicorn sends it chunked


def send_buffer(connection: socket.socket) -> int:
    return connection.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)


class FixedAnswer(app.Service):
    """A service that answers ``size`` bytes to every invocation."""

    metrics = None  # not counted
    sessions = None  # off
    body_budget = BodyBudget(0)  # no bound

    def __init__(self, size: int) -> None:
        self.size = size

    def parse(self, req: falcon.Request, path_name: str | None, body_length: int) -> Any:
        session_id = req.get_header(SESSION_HEADER)
        return types.SimpleNamespace(
            target=ModelTarget("m", None, "predict"), session_id=session_id
        )

    def invoke(self, request: object, body: object, record: object, state: object = None,
               still_wanted: object = None) -> Reply:  # fmt: skip
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


@pytest.mark.parametrize("session_id", ["NEW_SESSION", "0-" + "a" * 32])
def test_without_sessions_a_request_naming_one_is_a_400(session_id: str) -> None:
    client = falcon.testing.TestClient(app.build_app(FixedAnswer(10)))
    result = client.simulate_post("/invocations", headers={SESSION_HEADER: session_id})
    assert result.status_code == 400
    assert result.json == {"error": sessions.SESSIONS_OFF}
    assert client.simulate_post("/invocations").status_code == 200


def test_enlarging_the_send_buffer_is_best_effort() -> None:
    enlarge_send_buffer(None)  # not served by gunicorn (e.g. falcon's test client)
    closed = socket.socket(socket.AF_UNIX)
    closed.close()
    enlarge_send_buffer(closed)  # OSError swallowed: the answer is sent either way


class NoModels:
    """The registry's control API with no model loaded."""

    def loaded(self) -> list[dict]:
        return []

    def describe(self, name: str) -> dict | None:
        return None


ONE_CPU = CpuCount(1, "machine", None, 1, 1)


def models_dir(tmp_path: Path) -> str:
    (tmp_path / "models" / "m" / "1").mkdir(parents=True)
    (tmp_path / "models" / "m" / "1" / "saved_model.pb").write_bytes(b"")
    return str(tmp_path / "models")


def test_a_multi_model_endpoint_routes_by_model_name(tmp_path: Path) -> None:
    env = {"SAGEMAKER_MULTI_MODEL": "true"}
    config = load_config(env, models_dir(tmp_path), str(tmp_path), 8080, ONE_CPU)
    channels = Channels()
    directory = ModelDirectory(NoModels(), channels, config.model_dir)  # type: ignore[arg-type]
    service = app.MultiModelService(config, channels, RestClient(), directory)
    client = falcon.testing.TestClient(app.build_app(service))
    unnamed = client.simulate_post("/invocations", body="[1]")
    assert unnamed.status_code == 400 and TARGET_MODEL_HEADER in unnamed.json["error"]
    for answer in (
        client.simulate_post("/models/m/invoke", body="[1]"),
        client.simulate_post("/invocations", body="[1]", headers={TARGET_MODEL_HEADER: " m "}),
    ):
        assert answer.status_code == 404 and answer.json == {"error": "Model m is not loaded yet."}


def test_a_single_model_endpoint_has_no_model_routes(tmp_path: Path) -> None:
    config = load_config({}, models_dir(tmp_path), str(tmp_path), 8080, ONE_CPU)
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
        body = http_bodies.read_body(request)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert type(body) is bytes and body == data
    assert peak < size * 1.06, f"peak {peak / size:.2f}x the body"


def test_a_body_shorter_than_its_content_length_is_a_400() -> None:
    with pytest.raises(HttpError, match="ended after 10 of its 20 bytes") as raised:
        http_bodies.read_body(body_request(b"x" * 10, 20))
    assert raised.value.status == 400
