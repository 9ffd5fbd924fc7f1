"""service/connections.RestClient: the service's own posts to a model server's REST port, over
real sockets to a small scripted HTTP server (each test says what it answers), and the
``requests.Response`` that ``output_handler`` gets from them."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from sagemaker_tfs.service.routing.connections import RestClient, RestConnectionError
from sagemaker_tfs.wire.errors import HttpError
from sagemaker_tfs.wire.http_messages import is_chunked, read_chunked_body, read_header_fields

# (connection number, request number on it, body) -> raw answer, or None to close at once
Script = Callable[[int, int, bytes], bytes | None]


class ScriptedServer:
    """Accepts connections on localhost and answers each request by ``script``; counts the
    connections and keeps every request's head and body."""

    def __init__(self, script: Script, close_after_answer: bool = False) -> None:
        self.script = script
        self.close_after_answer = close_after_answer
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.connections = 0
        self.requests: list[tuple[dict[str, str], bytes]] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            number = self.connections
            threading.Thread(target=self._serve, args=(sock, number), daemon=True).start()

    def _serve(self, sock: socket.socket, number: int) -> None:
        reader = sock.makefile("rb")
        with sock, reader:
            for index in range(1_000):
                try:
                    if not reader.readline():
                        return
                except OSError:
                    return
                fields = read_header_fields(reader)
                try:
                    body = (
                        read_chunked_body(reader)
                        if is_chunked(fields)
                        else reader.read(int(fields.get("content-length", "0")))
                    )
                except ValueError:  # the request never ended: the connection closed
                    self.requests.append((fields, b"unfinished"))
                    return
                self.requests.append((fields, body))
                answer = self.script(number, index, body)
                if answer is None:
                    return
                try:
                    sock.sendall(answer)
                except OSError:  # the client closed the connection before reading it all
                    return
                if self.close_after_answer:
                    return

    def uri(self, path: str = "/v1/models/m:predict") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def close(self) -> None:
        self.listener.close()


def answer(body: bytes, status: str = "200 OK", extra: str = "") -> bytes:
    head = f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n{extra}"
    return head.encode() + b"Content-Length: %d\r\n\r\n" % len(body) + body


@pytest.fixture
def serve() -> Iterator[Callable[[Script], ScriptedServer]]:
    servers: list[ScriptedServer] = []

    def start(script: Script, close_after_answer: bool = False) -> ScriptedServer:
        servers.append(ScriptedServer(script, close_after_answer))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def test_posts_reuse_one_connection_and_answer_as_requests_would(serve) -> None:
    server = serve(lambda _c, index, body: answer(b'{"n": %d, "got": %s}' % (index, body)))
    client = RestClient()
    responses = [client.post(server.uri(), b"[%d]" % i, "application/json") for i in range(3)]
    assert [r.json() for r in responses] == [{"n": i, "got": [i]} for i in range(3)]
    assert server.connections == 1
    fields, body = server.requests[0]
    assert (fields["content-type"], fields["content-length"], body) == (
        "application/json",
        "3",
        b"[0]",
    )
    assert fields["host"] == f"127.0.0.1:{server.port}"
    response = responses[0]
    assert (response.status_code, response.reason, response.ok) == (200, "OK", True)
    assert response.headers["CONTENT-TYPE"] == "application/json"
    assert response.url == server.uri()
    assert (response.request.method, response.request.body) == ("POST", b"[0]")
    assert response.text == '{"n": 0, "got": [0]}'


def test_a_connection_closed_while_idle_is_replaced_without_an_error(serve) -> None:
    """The model server closes each connection after one answer without saying so (as one
    that restarted leaves its old connections): the next post must still be answered."""
    server = serve(lambda _c, index, _b: answer(b"{}") if index == 0 else None)
    client = RestClient()
    for _ in range(3):
        assert client.post(server.uri(), b"{}", "application/json").status_code == 200
    assert server.connections == 3


def test_a_chunked_answer_and_connection_close_are_honoured(serve) -> None:
    chunked = (
        b'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{"a\r\n5\r\n": 1}\r\n0\r\n\r\n'
    )
    server = serve(
        lambda _c, index, _b: (
            chunked if index == 0 else answer(b"{}", extra="Connection: close\r\n")
        )
    )
    client = RestClient()
    assert client.post(server.uri(), b"{}", "application/json").json() == {"a": 1}
    assert client.post(server.uri(), b"{}", "application/json").json() == {}
    assert client.post(server.uri(), b"{}", "application/json").json() == {"a": 1}
    assert server.connections == 2  # the second answer closed the first connection


def test_a_large_body_is_sent_whole(serve) -> None:
    server = serve(lambda _c, _i, body: answer(b'{"length": %d}' % len(body)))
    body = b"x" * (3 << 20)
    assert RestClient().post(server.uri(), body, "application/json").json() == {"length": len(body)}
    assert server.requests[0][1] == body


def test_no_model_server_listening_is_a_connection_error() -> None:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]  # closed on leaving: nothing listens there after
    with pytest.raises(RestConnectionError, match=f"127.0.0.1:{port}"):
        RestClient().post(f"http://127.0.0.1:{port}/v1/models/m:predict", b"{}", "application/json")


@pytest.mark.parametrize(
    "raw",
    [
        None,  # closed before answering, on a new connection
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{}",  # the answer cut short
        b"garbage\r\n\r\n",
    ],
)
def test_a_broken_answer_is_a_connection_error(serve, raw: bytes | None) -> None:
    server = serve(lambda *_: raw, close_after_answer=True)
    with pytest.raises(RestConnectionError):
        RestClient().post(server.uri(), b"{}", "application/json")


# --------------------------------------------------------------- send: the REST way, bounded


def pieces_of(*parts: bytes) -> Callable[[], Iterator[bytes]]:
    """A request written in ``parts``, counted each time it is written."""
    written: list[int] = []

    def write() -> Iterator[bytes]:
        written.append(1)
        yield from parts

    write.written = written  # type: ignore[attr-defined]
    return write


def test_a_request_of_unknown_length_is_sent_chunked_as_it_is_written(serve) -> None:
    server = serve(lambda _c, _i, body: answer(b'{"got": %d}' % len(body)))
    write = pieces_of(b'{"instances": [', b"", b"1," * 40_000, b"2]}")
    answer_ = RestClient().send(server.uri(), write, None, "application/json")
    assert (answer_.status, answer_.content, answer_.length) == (200, b'{"got": 80018}', None)
    fields, body = server.requests[0]
    assert fields["transfer-encoding"] == "chunked" and "content-length" not in fields
    assert body == b'{"instances": [' + b"1," * 40_000 + b"2]}"


def test_a_request_of_known_length_is_sent_with_it(serve) -> None:
    server = serve(lambda _c, _i, body: answer(b"{}"))
    RestClient().send(server.uri(), pieces_of(b"[", b"1" * 100_000, b"]"), 100_002, "x/y")
    fields, body = server.requests[0]
    assert (fields["content-length"], body) == ("100002", b"[" + b"1" * 100_000 + b"]")


def test_a_large_answer_is_passed_on_as_it_arrives_and_its_connection_kept_after(serve) -> None:
    large = b"[" + b"7," * 1_500_000 + b"7]"
    server = serve(lambda _c, index, _b: answer(large if index == 0 else b"{}"))
    client = RestClient()
    streamed = client.send(server.uri(), pieces_of(b"{}"), 2, "application/json")
    assert (streamed.status, streamed.content, streamed.length) == (200, b"", len(large))
    assert b"".join(streamed.stream) == large
    assert client.send(server.uri(), pieces_of(b"{}"), 2, "application/json").content == b"{}"
    assert server.connections == 1


def test_an_answer_left_part_read_closes_its_connection(serve) -> None:
    large = b"x" * (3 << 20)
    server = serve(lambda number, _i, _b: answer(large if number == 1 else b"{}"))
    client = RestClient()
    streamed = client.send(server.uri(), pieces_of(b"{}"), 2, "application/json")
    next(streamed.stream)
    streamed.stream.close()  # type: ignore[attr-defined]
    assert client.send(server.uri(), pieces_of(b"{}"), 2, "application/json").content == b"{}"
    assert server.connections == 2


def test_a_large_error_answer_is_read_whole(serve) -> None:
    error = b'{"error": "' + b"e" * (2 << 20) + b'"}'
    server = serve(lambda *_: answer(error, "400 Bad Request"))
    got = RestClient().send(server.uri(), pieces_of(b"{}"), 2, "application/json")
    assert (got.status, got.content, got.length) == (400, error, None)


def test_an_answer_cut_short_while_passed_on_is_a_connection_error(serve) -> None:
    cut = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % (4 << 20) + b"x" * (2 << 20)
    server = serve(lambda *_: cut, close_after_answer=True)
    streamed = RestClient().send(server.uri(), pieces_of(b"{}"), 2, "application/json")
    with pytest.raises(RestConnectionError, match="ended after 2097152 of 4194304 bytes"):
        b"".join(streamed.stream)


def test_a_request_found_bad_while_written_is_refused_and_the_model_server_gets_no_end(
    serve,
) -> None:
    def write() -> Iterator[bytes]:
        yield b'{"instances": [' + b'"a",' * 30_000
        raise HttpError(400, "Invalid CSV: row 3 has 2 fields, expected 1")

    server = serve(lambda *_: answer(b"{}"))
    client = RestClient()
    with pytest.raises(HttpError, match="row 3"):
        client.send(server.uri(), write, None, "application/json")
    assert client.send(server.uri(), pieces_of(b"{}"), None, "application/json").content == b"{}"
    # each connection's thread records its request: the two in either order, the cut one
    # once its thread has seen the connection close
    deadline = time.monotonic() + 5
    while len(server.requests) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sorted(body for _, body in server.requests) == [b"unfinished", b"{}"]
    assert server.connections == 2


def test_a_request_on_a_connection_closed_while_idle_is_written_again(serve) -> None:
    server = serve(lambda _c, index, body: answer(body) if index == 0 else None)
    client = RestClient()
    write = pieces_of(b"[", b"1" * 200_000, b"]")
    for _ in range(3):
        assert client.send(server.uri(), write, None, "application/json").content[:3] == b"[11"
    assert server.connections == 3
    assert len(write.written) == 5  # type: ignore[attr-defined]
