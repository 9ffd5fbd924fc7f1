"""What the service makes of handler results and handler exceptions, and that user code runs
once: a failed call of its own is its error; a model server that cannot be reached between
``input_handler`` and ``output_handler`` is failed over without running either again (two
real HTTP servers on localhost stand for the model servers, one of them down)."""

from __future__ import annotations

import dataclasses
import json
import socket
import threading
import time
import types
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import falcon
import pytest
import requests
from sagemaker_tfs.service.codecs.image_inputs import ImageOptions
from sagemaker_tfs.service.codecs.registry import answer_type
from sagemaker_tfs.service.codecs.text import text_rest
from sagemaker_tfs.service.errors import Overloaded
from sagemaker_tfs.service.handlers.context import build_context
from sagemaker_tfs.service.handlers.invoke import (
    Invoker,
    Limits,
    Reply,
    model_server_error,
    queue_full,
)
from sagemaker_tfs.service.handlers.streaming import HandlerStream
from sagemaker_tfs.service.handlers.user_code import UserCode
from sagemaker_tfs.service.metrics import InvocationRecord
from sagemaker_tfs.service.request import ParsedRequest, RequestBody
from sagemaker_tfs.service.routing import fast_path, text_predict
from sagemaker_tfs.service.routing.connections import RestClient, RestConnectionError
from sagemaker_tfs.service.routing.model_servers import Candidates, ModelServer
from sagemaker_tfs.service.targets import ModelTarget
from sagemaker_tfs.wire.errors import BATCH_QUEUE_FULL, HttpError
from sagemaker_tfs.wire.http_headers import CustomAttributes, MediaType, accept_list

REQUEST = ParsedRequest(
    content_type=MediaType("text/csv"),
    accept=accept_list("text/csv"),
    answer=answer_type(accept_list("text/csv"), "text/csv"),
    custom_attributes=CustomAttributes(),
    target=ModelTarget("m", None, "predict"),
    content_length=3,
)


class Fixed(Candidates):
    """The given servers in turn."""

    def __init__(self, *servers: ModelServer) -> None:
        self.servers = servers
        self.round_size = len(servers)
        self.unreached: list[ModelServer] = []

    def first(self) -> ModelServer:
        return self.servers[0]

    def next_after(self, failed: ModelServer, attempt: int) -> ModelServer:
        return self.servers[attempt % len(self.servers)]

    def unreachable(self, server: ModelServer) -> None:
        self.unreached.append(server)


SERVER = ModelServer(9000, 8501, None)
CONTEXT = build_context(REQUEST, SERVER)


NO_LIMITS = Limits()


def invoke(user_code: UserCode | None, body: bytes, request: ParsedRequest, servers: Candidates,
           limits: Limits = NO_LIMITS) -> Reply:  # fmt: skip
    """One invocation by a worker's ``Invoker``, its record counting nothing."""
    invoker = Invoker(RestClient(), ImageOptions(1.0, 0.0), limits)
    return invoker.run(
        request, RequestBody(body), user_code, servers, InvocationRecord(None, falcon.Response())
    )


def run(result_or_error: Any) -> Reply:
    def handler(data, context):  # type: ignore[no-untyped-def]
        assert data.read() == b"abc" and context == CONTEXT
        if isinstance(result_or_error, Exception):
            raise result_or_error
        return result_or_error

    user_code = UserCode("x.py", handler=handler)
    return invoke(user_code, b"abc", REQUEST, Fixed(SERVER))


@pytest.mark.parametrize(
    ("result", "body", "content_type"),
    [
        ((b"\x00raw", "application/octet-stream"), b"\x00raw", "application/octet-stream"),
        (("text", "text/plain"), b"text", "text/plain"),
        (({"a": 1}, "application/json"), b'{"a": 1}', "application/json"),
        (b"bare bytes", b"bare bytes", "text/csv"),
        ("bare text", b"bare text", "text/csv"),
        ([1, 2], b"[1, 2]", "text/csv"),
        (("x", None), b"x", "text/csv"),
    ],
)
def test_handler_results(result: Any, body: bytes, content_type: str) -> None:
    assert run(result) == Reply(200, body, content_type)


def test_exception_text_is_the_error() -> None:
    with pytest.raises(HttpError) as raised:
        run(ValueError("bad things"))
    assert (raised.value.status, raised.value.message) == (500, "bad things")


def test_request_parsing_errors_are_400() -> None:
    try:
        json.loads("{")
    except json.JSONDecodeError as error:
        decode_error = error
    with pytest.raises(HttpError) as raised:
        run(decode_error)
    assert raised.value.status == 400
    assert "Expecting property name" in raised.value.message


def test_exception_without_text_uses_its_type() -> None:
    with pytest.raises(HttpError) as raised:
        run(KeyError())
    assert raised.value.message == "KeyError"


@pytest.mark.parametrize("body", ["[" * 100_000 + "]" * 100_000, "[" + "7" * 5000 + "]"])
def test_handlers_parsing_hostile_json_give_400(body: str) -> None:
    """A deep nesting (RecursionError) or a 5000-digit integer (ValueError from int()) raised
    while a handler parses the body is the request's fault."""
    try:
        json.loads(body)
    except (RecursionError, ValueError) as error:
        parse_error = error
    with pytest.raises(HttpError) as raised:
        run(parse_error)
    assert raised.value.status == 400


def model_server_response(status: int, body: bytes, reason: str = "") -> requests.Response:
    response = requests.Response()
    response.status_code, response._content, response.reason = status, body, reason
    return response


def test_a_model_server_error_is_passed_on_as_it_is() -> None:
    body = b'{ "error": "JSON Parse error: The document is empty. at offset: 0" }'
    assert model_server_error(model_server_response(400, body)) == Reply(
        400, body, "application/json"
    )


@pytest.mark.parametrize(
    ("body", "reason", "message"),
    [
        (b"<html>Bad Gateway</html>\n", "", "<html>Bad Gateway</html>"),
        (b"", "Bad Gateway", "Bad Gateway"),
    ],
)
def test_a_model_server_error_that_is_not_json_becomes_json(
    body: bytes, reason: str, message: str
) -> None:
    reply = model_server_error(model_server_response(502, body, reason))
    assert (reply.status, json.loads(reply.body)) == (502, {"error": message})


class ModelServerStandIn(BaseHTTPRequestHandler):
    """Answers every POST with ``status`` and a JSON body naming its port; headers echo what it
    got (body, Content-Type) and the client's port. HTTP/1.1 keep-alive, as the model servers."""

    protocol_version = "HTTP/1.1"
    status = 200

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        got = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = json.dumps({"predictions": [self.server.server_address[1]]}).encode()
        self.send_response(self.status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("X-Got-Body", got.decode())
        self.send_header("X-Got-Type", self.headers["Content-Type"])
        self.send_header("X-Client-Port", str(self.client_address[1]))
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def http_server() -> Iterator[Callable[[int], int]]:
    """Starts a stand-in answering ``status``; returns its port."""
    servers = []

    def start(status: int) -> int:
        handler = type("Answering", (ModelServerStandIn,), {"status": status})
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server.server_address[1]

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_handler_whose_own_call_fails_runs_once_with_its_error() -> None:
    """An unrelated service that is down is the handler's failure (500, its text), not a model
    server's (503), and nothing runs it again."""
    runs = []
    port = closed_port()

    def handler(data, context):  # type: ignore[no-untyped-def]
        runs.append(context.rest_uri)
        requests.get(f"http://127.0.0.1:{port}/", timeout=5)

    other = ModelServer(9002, 8503, None)
    servers = Fixed(SERVER, other)
    with pytest.raises(HttpError) as raised:
        invoke(UserCode("x.py", handler=handler), b"abc", REQUEST, servers)
    assert raised.value.status == 500
    assert f"port={port}" in raised.value.message and "Connection refused" in raised.value.message
    assert len(runs) == 1
    assert servers.unreached == []  # nothing to do with the model servers


def test_a_handler_that_finds_its_model_server_down_runs_once_and_it_goes_last() -> None:
    """The handler's own REST call to ``context.rest_uri`` is refused: its error (500), once;
    the model server is reported unreachable so that the next requests go elsewhere."""
    runs = []

    def handler(data, context):  # type: ignore[no-untyped-def]
        runs.append(context.rest_uri)
        return requests.post(context.rest_uri, data=data.read(), timeout=5).content

    down = ModelServer(9000, closed_port(), None)
    servers = Fixed(down, SERVER)
    with pytest.raises(HttpError) as raised:
        invoke(UserCode("x.py", handler=handler), b"[1]", REQUEST, servers)
    assert raised.value.status == 500 and "Connection refused" in raised.value.message
    assert len(runs) == 1 and servers.unreached == [down]


@pytest.mark.parametrize("unreachable", ["refused", "503"])
def test_the_pairs_model_server_call_fails_over_without_running_the_handlers_again(
    http_server: Callable[[int], int], unreachable: str
) -> None:
    live = http_server(200)
    down = closed_port() if unreachable == "refused" else http_server(503)
    runs: list[str] = []

    def input_handler(data, context):  # type: ignore[no-untyped-def]
        runs.append(f"input {context.rest_uri}")
        return data.read()

    def output_handler(response, context):  # type: ignore[no-untyped-def]
        runs.append(f"output {context.rest_uri}")
        return response.content, "application/json"

    user_code = UserCode("x.py", input_handler=input_handler, output_handler=output_handler)
    servers = Fixed(ModelServer(1, down, None), ModelServer(2, live, None))
    reply = invoke(user_code, b"[1]", REQUEST, servers)
    assert (reply.status, json.loads(reply.body)) == (200, {"predictions": [live]})
    assert runs == [
        f"input http://127.0.0.1:{down}/v1/models/m:predict",
        f"output http://127.0.0.1:{live}/v1/models/m:predict",  # the one that answered
    ]


def test_a_request_past_its_deadline_is_shed_before_the_handler_runs() -> None:
    """Arrived 61 s ago with a 60 s invocation timeout: 503 overloaded, reason expired, and
    the handler never runs; a request within its time, or whose arrival is unknown, runs."""
    runs: list[str] = []

    def handler(data, context):  # type: ignore[no-untyped-def]
        runs.append("ran")
        return b"ok", "text/plain"

    user_code = UserCode("x.py", handler=handler)
    limits = Limits(invocation_timeout=60.0)
    now = time.time()
    late = dataclasses.replace(REQUEST, arrival=now - 61.0)
    with pytest.raises(Overloaded) as shed:
        invoke(user_code, b"abc", late, Fixed(SERVER), limits)
    assert shed.value.status == 503 and shed.value.reason == "expired"
    assert "waited 61" in shed.value.message and "overloaded" in shed.value.message
    assert runs == []
    for arrival in (now - 1.0, None):
        request = dataclasses.replace(REQUEST, arrival=arrival)
        reply = invoke(user_code, b"abc", request, Fixed(SERVER), limits)
        assert reply.body == b"ok"
    assert runs == ["ran", "ran"]


def test_a_full_batch_queue_is_an_overload_not_a_dead_model_server() -> None:
    error = queue_full('{"error": "' + BATCH_QUEUE_FULL + '"}')
    assert isinstance(error, Overloaded) and error.reason == "queue_full"
    assert error.status == 503 and "overloaded" in error.message


def test_a_generator_is_a_streamed_answer_started_at_once() -> None:
    produced: list[str] = []

    def events() -> Iterator[str]:
        for number in range(3):
            produced.append(f"event {number}")
            yield f"data: {number}\n\n"

    reply = run((events(), "text/event-stream"))
    assert (reply.status, reply.content_type) == (200, "text/event-stream")
    assert isinstance(reply.body, HandlerStream)
    assert produced == ["event 0"]  # the first chunk only, before anything is sent
    assert list(reply.body.chunks()) == [b"data: 0\n\n", b"data: 1\n\n", b"data: 2\n\n"]
    bare = run(iter(["a", "b"]))
    assert bare.content_type == "text/csv" and list(bare.body.chunks()) == [b"a", b"b"]


def test_a_generator_that_fails_before_its_first_chunk_is_a_500() -> None:
    def failing() -> Iterator[bytes]:
        raise RuntimeError("no chunk at all")
        yield b""

    with pytest.raises(HttpError) as raised:
        run((failing(), "text/plain"))
    assert (raised.value.status, raised.value.message) == (500, "no chunk at all")


def test_the_session_is_beside_the_context_fields() -> None:
    """Unpacking by position sees the eleven fields; the session is an attribute."""
    store: dict[str, Any] = {}
    context = build_context(REQUEST, SERVER, "0-" + "a" * 32, store)
    assert len(context) == 11 and tuple(context) == tuple(CONTEXT)
    assert context.session_id == "0-" + "a" * 32 and context.session is store
    assert CONTEXT.session_id is None and CONTEXT.session is None
    assert repr(context).startswith("Context(model_name='m'")


def test_a_failover_sends_the_body_converted_once(
    http_server: Callable[[int], int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """JSON without inference.py (classify: the REST path): the first model server is down, the
    second answers; the body was converted once, before the calls that failover repeats."""
    converted: list[bytes] = []
    convert = text_rest.convert

    def counted(content_type: str, body: bytes) -> str:
        converted.append(body)
        return convert(content_type, body)

    monkeypatch.setattr(text_rest, "convert", counted)
    live = http_server(200)
    servers = Fixed(ModelServer(1, closed_port(), None), ModelServer(2, live, None))
    json_body = MediaType("application/json")
    request = dataclasses.replace(
        REQUEST,
        content_type=json_body,
        accept=(),
        answer=answer_type((), ""),
        target=ModelTarget("m", None, "classify"),
    )
    reply = invoke(None, b"[1, 2]", request, servers)
    assert (reply.status, json.loads(b"".join(reply.body))) == (200, {"predictions": [live]})
    assert converted == [b"[1, 2]"]


@pytest.mark.parametrize("path", ["text", "binary"])
def test_a_request_that_runs_out_of_time_while_its_body_is_read_is_not_sent(
    path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Within its time on arrival, past it once its body is read (JSON over gRPC) or decoded
    (.npy, the fast path): shed as expired, and no Predict is sent."""
    sent: list[str] = []

    def slow_read(*args: Any) -> Any:
        time.sleep(0.3)
        return types.SimpleNamespace(arrays={}, columnar=False)

    monkeypatch.setattr(text_predict, "signature_for", lambda request, context: object())
    monkeypatch.setattr(text_predict, "read_inputs", slow_read)
    monkeypatch.setattr(text_predict, "predict", lambda *args: sent.append("text"))
    monkeypatch.setattr(fast_path, "check", lambda request: None)
    monkeypatch.setattr(fast_path, "signature_of", lambda context: object())
    monkeypatch.setattr(fast_path, "prepare", slow_read)
    monkeypatch.setattr(fast_path, "predict", lambda *args: sent.append("binary"))
    media = MediaType("application/json" if path == "text" else "application/x-npy")
    request = dataclasses.replace(REQUEST, content_type=media, arrival=time.time() - 59.8)
    if path == "text":
        request = dataclasses.replace(request, accept=(), answer=answer_type((), ""))
    with pytest.raises(Overloaded) as shed:
        invoke(None, b"[1]", request, Fixed(SERVER), Limits(invocation_timeout=60.0))
    assert shed.value.reason == "expired"
    assert sent == []


# --------------------------------------------------------------------------- RestClient
# What output_handler is given must behave as the requests.Response of ``requests.post`` (the
# reference container's handlers call .json(), .content, .text, .status_code, .headers).


def test_the_rest_client_answers_with_a_requests_response(
    http_server: Callable[[int], int],
) -> None:
    port = http_server(200)
    uri = f"http://127.0.0.1:{port}/v1/models/m:predict"
    response = RestClient().post(uri, b'{"instances": [1.0]}', "application/json")
    assert isinstance(response, requests.Response)
    assert (response.status_code, response.ok) == (200, True)
    assert response.json() == {"predictions": [port]}
    assert response.headers["X-Got-Body"] == '{"instances": [1.0]}'
    assert response.headers["x-got-type"] == "application/json"
    assert response.headers["content-type"] == "application/json; charset=utf-8"
    assert response.encoding == "utf-8"
    assert json.loads(response.text) == response.json()
    assert response.content == response.text.encode()
    assert response.url == uri
    assert (response.request.method, response.request.body) == ("POST", b'{"instances": [1.0]}')
    response.raise_for_status()


def test_the_rest_client_gives_an_error_status_as_an_answer(
    http_server: Callable[[int], int],
) -> None:
    uri = f"http://127.0.0.1:{http_server(400)}/v1/models/m:predict"
    response = RestClient().post(uri, b"{}", "application/json")
    assert (response.status_code, response.ok) == (400, False)
    with pytest.raises(requests.HTTPError):
        response.raise_for_status()


def test_the_rest_client_keeps_connections_alive(http_server: Callable[[int], int]) -> None:
    rest = RestClient()
    uri = f"http://127.0.0.1:{http_server(200)}/v1/models/m:predict"
    ports = {rest.post(uri, b"{}", "application/json").headers["X-Client-Port"] for _ in range(5)}
    assert len(ports) == 1


def test_the_rest_client_raises_at_once_for_a_server_it_cannot_reach() -> None:
    uri = f"http://127.0.0.1:{closed_port()}/v1/models/m:predict"
    with pytest.raises(RestConnectionError):  # Invoker.post: failover, no retry
        RestClient().post(uri, b"{}", "application/json")
