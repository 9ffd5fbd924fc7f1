"""The REST way of a large body holds neither its request nor the model server's answer whole
(issue 53's bound: no process grows by more than the body plus its input and output tensors),
and answers as before: a bad body with its 400 (found while sent, or with no model server).

A CSV of words or JSON lines of strings (bodies the inputs' arrays do not take) goes through
the worker's ``Invoker`` to a stand-in model server on a real socket, which reads the request
a chunk at a time into one buffer (hashing it) and answers with a prepared answer about as
large as the body. ``tracemalloc`` sees what the service allocates on top of the body, from
reading it to the last byte of the answer passed on: a piece's work, not the request (1-1.45x
the body: every word quoted) and the answer (~1x), which the code before held whole.
"""

from __future__ import annotations

import hashlib
import socket
import threading
import time
from collections.abc import Callable, Iterator

import falcon
import numpy as np
import pytest
from memory_traces import traced_peak
from sagemaker_tfs.service.codecs import text_codecs
from sagemaker_tfs.service.codecs.content_types import StreamedBody, WrittenBody
from sagemaker_tfs.service.codecs.image_inputs import ImageOptions
from sagemaker_tfs.service.codecs.registry import answer_type
from sagemaker_tfs.service.codecs.text import text_scan
from sagemaker_tfs.service.codecs.text.text_rest import convert
from sagemaker_tfs.service.handlers.invoke import Invoker, Limits, Reply
from sagemaker_tfs.service.metrics import InvocationRecord
from sagemaker_tfs.service.request import ParsedRequest, RequestBody
from sagemaker_tfs.service.routing import connections, text_predict
from sagemaker_tfs.service.routing.model_servers import Candidates, ModelServer
from sagemaker_tfs.service.targets import ModelTarget
from sagemaker_tfs.wire import tensors
from sagemaker_tfs.wire.errors import HttpError
from sagemaker_tfs.wire.http_headers import CustomAttributes, MediaType, accept_list
from sagemaker_tfs.wire.http_messages import chunk_size, read_header_fields
from sagemaker_tfs.wire.signatures import Signature, TensorSpec

MB = 1 << 20
PIECE_BYTES = 32 << 10  # the conversion's pieces and windows, and the answer's
BOUND = 0.5  # of the body: a piece's work (the code before: 2.4-2.9x)
STRING = tensors.tf_dtype(np.dtype(object))
SIGNATURES = {
    "serving_default": Signature("serving_default", "tensorflow/serving/predict",
                                 {"x": TensorSpec("x", STRING, None)}, {})  # fmt: skip
}


class StandIn:
    """A model server that reads each request into one buffer a piece at a time, keeps its
    SHA-256, and answers ``answer`` (prepared before anything is traced); ``cut_at``: only
    that many bytes of it, then the connection closes."""

    def __init__(self, answer: bytes, cut_at: int | None = None) -> None:
        self.answer = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
        self.answer += b"Content-Length: %d\r\n\r\n%s" % (len(answer), answer[:cut_at])
        self.cut_short = cut_at is not None
        self.buffer = memoryview(bytearray(256 << 10))
        self.digests: list[str] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        with self.listener:  # one connection: the client keeps it alive
            sock, _ = self.listener.accept()
        reader = sock.makefile("rb")
        with sock, reader:
            while reader.readline():
                fields = read_header_fields(reader)
                digest = hashlib.sha256()
                try:
                    self._read_body(reader, fields, digest)
                except (ValueError, EOFError):  # cut short: the connection closed
                    return
                self.digests.append(digest.hexdigest())
                sock.sendall(self.answer)
                if self.cut_short:
                    return

    def _read_body(self, reader, fields: dict[str, str], digest) -> None:  # type: ignore[no-untyped-def]
        if "content-length" in fields:
            self._read(reader, int(fields["content-length"]), digest)
            return
        while size := chunk_size(reader.readline()):
            self._read(reader, size, digest)
            reader.readline()
        reader.readline()

    def _read(self, reader, size: int, digest) -> None:  # type: ignore[no-untyped-def]
        while size:
            got = reader.readinto(self.buffer[: min(size, len(self.buffer))])
            if not got:
                raise EOFError("the request ended early")
            digest.update(self.buffer[:got])
            size -= got


class One(Candidates):
    """``server``, then (a failover) ``then``."""

    def __init__(self, server: ModelServer, then: ModelServer | None = None) -> None:
        self.server = server
        self.then = then or server

    def first(self) -> ModelServer:
        return self.server

    def next_after(self, failed: ModelServer, attempt: int) -> ModelServer:
        return self.then

    def unreachable(self, server: ModelServer) -> None:
        pass


def words(count: int) -> list[str]:
    letters = np.random.default_rng(4).integers(97, 123, (count, 10), dtype=np.uint8)
    return [row[: 3 + index % 8].tobytes().decode() for index, row in enumerate(letters)]


def csv_words(size: int) -> bytes:
    block = "\n".join(words(20_000)).encode() + b"\n"
    return block * max(1, size // len(block))


def json_lines(size: int) -> bytes:
    block = "".join(f'{{"x": "{word}"}}\n' for word in words(20_000)).encode()
    return block * max(1, size // len(block))


def echo_answer(size: int) -> bytes:
    """TF Serving's answer for about ``size`` bytes of words: indented, on many lines."""
    block = ",\n        ".join(f'"{word}"' for word in words(20_000)).encode()
    return (
        b'{\n    "predictions": [\n        '
        + b",\n        ".join([block] * max(1, size // len(block)))
        + b"\n    ]\n}"
    )


def request_of(kind: str, accept: str) -> ParsedRequest:
    accepted = accept_list(accept) if accept else ()
    return ParsedRequest(
        content_type=MediaType(kind),
        accept=accepted,
        answer=answer_type(accepted, ""),
        custom_attributes=CustomAttributes(),
        target=ModelTarget("m", None, "predict"),
        content_length=0,
    )


def passed_on(reply: Reply) -> Iterator[bytes]:
    """The answer's bytes as the edge sends them, a piece at a time."""
    if isinstance(reply.body, (StreamedBody, WrittenBody)):
        return (bytes(chunk) for chunk in reply.body.chunks)
    assert isinstance(reply.body, list)
    return iter(reply.body)


@pytest.mark.parametrize("accept", ["", "application/json"], ids=["as_written", "one_line"])
@pytest.mark.parametrize(
    ("kind", "make"),
    [("text/csv", csv_words), ("application/jsonlines", json_lines)],
    ids=["csv_words", "json_lines"],
)
def test_a_large_body_going_the_rest_way_holds_neither_request_nor_answer_whole(
    kind: str, make: Callable[[int], bytes], accept: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(text_scan, "WINDOW", PIECE_BYTES)
    monkeypatch.setattr(text_codecs, "CSV_PIECE_BYTES", PIECE_BYTES)
    monkeypatch.setattr(text_predict, "signature_for", lambda request, context: SIGNATURES)
    if hasattr(connections, "_ANSWER_PIECE_BYTES"):
        monkeypatch.setattr(connections, "_ANSWER_PIECE_BYTES", PIECE_BYTES)
    body = make(6 * MB)
    answer = echo_answer(len(body))
    expected = answer.replace(b"\n", b"") if accept else answer
    model_server = StandIn(answer)
    invoker = Invoker(connections.RestClient(), ImageOptions(1.0, 0.0), Limits(text_body_mb=64))
    request = request_of(kind, accept)
    answered = hashlib.sha256()

    def serve() -> int:
        reply = invoker.run(request, RequestBody(body), None,
                            One(ModelServer(1, model_server.port, None)),
                            InvocationRecord(None, falcon.Response()))  # fmt: skip
        for piece in passed_on(reply):
            answered.update(piece)
        return reply.status

    status, peak = traced_peak(serve)
    assert status == 200
    assert answered.hexdigest() == hashlib.sha256(expected).hexdigest()
    assert model_server.digests == [hashlib.sha256(convert(kind, body).encode()).hexdigest()]
    assert peak < BOUND * len(body), f"{peak / len(body):.2f}x the body"


def test_a_small_body_going_the_rest_way_is_sent_and_answered_whole() -> None:
    """Below 1 MiB the request is written whole and sent with its length, the answer read
    whole: the common case, as it was."""
    body = csv_words(200 << 10)
    answer = echo_answer(len(body))
    model_server = StandIn(answer)
    invoker = Invoker(connections.RestClient(), ImageOptions(1.0, 0.0), Limits())
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(text_predict, "signature_for", lambda request, context: SIGNATURES)
        reply = invoker.run(request_of("text/csv", ""), RequestBody(body), None,
                            One(ModelServer(1, model_server.port, None)),
                            InvocationRecord(None, falcon.Response()))  # fmt: skip
    assert (reply.status, reply.body) == (200, [answer])
    assert model_server.digests == [hashlib.sha256(convert("text/csv", body).encode()).hexdigest()]


def test_the_answer_is_passed_on_with_its_length_when_it_is_not_rewritten(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(text_predict, "signature_for", lambda request, context: SIGNATURES)
    body = json_lines(2 * MB)
    answer = echo_answer(len(body))
    model_server = StandIn(answer)
    invoker = Invoker(connections.RestClient(), ImageOptions(1.0, 0.0), Limits())
    reply = invoker.run(request_of("application/jsonlines", ""), RequestBody(body), None,
                        One(ModelServer(1, model_server.port, None)),
                        InvocationRecord(None, falcon.Response()))  # fmt: skip
    assert isinstance(reply.body, StreamedBody) and reply.body.length == len(answer)
    assert b"".join(reply.body.chunks) == answer


def bad_csv(size: int) -> bytes:
    """Words, then a row of two fields at the end: found bad only once written to there."""
    return csv_words(size) + b"a,b\n"


def test_a_csv_found_bad_while_sent_is_refused_in_convert_words_and_never_ends() -> None:
    body = bad_csv(2 * MB)
    model_server = StandIn(b"{}")
    invoker = Invoker(connections.RestClient(), ImageOptions(1.0, 0.0), Limits())
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(text_predict, "signature_for", lambda request, context: SIGNATURES)
        with pytest.raises(HttpError) as refused:
            invoker.run(request_of("text/csv", ""), RequestBody(body), None,
                        One(ModelServer(1, model_server.port, None)),
                        InvocationRecord(None, falcon.Response()))  # fmt: skip
    with pytest.raises(HttpError) as expected:
        convert("text/csv", body)
    assert (refused.value.status, refused.value.message) == (400, expected.value.message)
    assert model_server.digests == []  # the request was cut short: never answered


def test_a_bad_csv_is_refused_when_no_model_server_is_reached() -> None:
    """The body is written whole (not sent) once the model server cannot be reached: a bad
    one is refused at once, as before, rather than failed over for 10 s and answered 503."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # nothing listens there
    invoker = Invoker(connections.RestClient(), ImageOptions(1.0, 0.0), Limits())
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(text_predict, "signature_for", lambda request, context: SIGNATURES)
        started = time.monotonic()
        with pytest.raises(HttpError) as refused:
            invoker.run(request_of("text/csv", ""), RequestBody(bad_csv(2 * MB)), None,
                        One(ModelServer(1, port, None)),
                        InvocationRecord(None, falcon.Response()))  # fmt: skip
    assert refused.value.status == 400 and "Invalid CSV" in refused.value.message
    assert time.monotonic() - started < 5


def test_an_answer_that_breaks_off_once_passed_on_is_not_sent_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The status is sent once the model server's head has come: an answer that breaks off
    after that fails the client's answer (the edge resets its connection) rather than fail
    over to another model server, which never gets the request."""
    monkeypatch.setattr(text_predict, "signature_for", lambda request, context: SIGNATURES)
    body = json_lines(2 * MB)
    answer = echo_answer(len(body))
    broken, other = StandIn(answer, cut_at=len(answer) // 2), StandIn(answer)
    invoker = Invoker(connections.RestClient(), ImageOptions(1.0, 0.0), Limits())
    servers = One(ModelServer(1, broken.port, None), then=ModelServer(2, other.port, None))
    reply = invoker.run(request_of("application/jsonlines", ""), RequestBody(body), None,
                        servers, InvocationRecord(None, falcon.Response()))  # fmt: skip
    assert reply.status == 200 and isinstance(reply.body, StreamedBody)
    with pytest.raises(connections.RestConnectionError, match="the answer ended after"):
        for _ in reply.body.chunks:
            pass
    assert len(broken.digests) == 1 and other.digests == []
