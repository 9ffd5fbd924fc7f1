"""``request_reader``: HTTP/1.1 requests from bytes as they arrive, whatever the cut."""

from __future__ import annotations

import time

import pytest
from sagemaker_tfs.model_server.rest.request_reader import (
    Request,
    RequestReader,
    SilentClose,
    parse_request_line,
)
from sagemaker_tfs.wire.http_messages import HeadError

POST = b"POST /v1/models/m:predict?x=1 HTTP/1.1\r\nHost: h\r\nContent-Length: 11\r\n\r\nhello world"
CHUNKED = (
    b"POST /v1/models/m:predict HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nTrailer: t\r\n\r\n"
)


def read_all(data: bytes, step: int) -> list[Request]:
    """Feed ``data`` ``step`` bytes at a time and take every request it completes."""
    reader = RequestReader()
    requests = []
    for start in range(0, len(data), step):
        reader.feed(data[start : start + step])
        while (request := reader.next_request()) is not None:
            requests.append(request)
    assert reader.idle
    return requests


@pytest.mark.parametrize("step", [1, 2, 7, 64, 10_000])
def test_requests_come_whole_whatever_the_cut(step: int) -> None:
    requests = read_all(POST + CHUNKED + b"GET /v1/models/m HTTP/1.0\r\n\r\n", step)
    assert [(r.method, r.target, bytes(r.body), r.keep_alive) for r in requests] == [
        ("POST", "/v1/models/m:predict?x=1", b"hello world", True),
        ("POST", "/v1/models/m:predict", b"hello world", True),
        ("GET", "/v1/models/m", b"", False),
    ]
    assert requests[0].path == "/v1/models/m:predict"
    assert requests[0].fields == {"host": "h", "content-length": "11"}
    assert requests[2].version == (1, 0)


def test_a_large_body_is_kept_as_it_arrives_and_the_next_request_follows() -> None:
    body = bytes(range(256)) * 40_000  # ~10 MB
    head = b"POST /p HTTP/1.1\r\nContent-Length: %d\r\n\r\n" % len(body)
    requests = read_all(head + body + b"GET /q HTTP/1.1\r\n\r\n", 65_536)
    assert requests[0].body == body
    assert requests[1].target == "/q"


def test_connection_fields_decide_keep_alive() -> None:
    def keep_alive(request: bytes) -> bool:
        return read_all(request, 1000)[0].keep_alive

    assert keep_alive(b"GET / HTTP/1.1\r\n\r\n")
    assert not keep_alive(b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n")
    assert not keep_alive(b"GET / HTTP/1.0\r\n\r\n")
    assert keep_alive(b"GET / HTTP/1.0\r\nconnection: Keep-Alive\r\n\r\n")
    assert not keep_alive(b"GET /\r\n\r\n")  # HTTP/0.9


def test_expect_100_continue_is_asked_only_while_the_body_is_missing() -> None:
    reader = RequestReader()
    reader.feed(b"POST / HTTP/1.1\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n")
    assert reader.next_request() is None
    assert reader.wants_continue
    reader.wants_continue = False
    reader.feed(b"abc")
    assert bytes(reader.next_request().body) == b"abc"
    sent_with_body = RequestReader()
    sent_with_body.feed(b"POST / HTTP/1.1\r\nContent-Length: 1\r\nExpect: 100-continue\r\n\r\nx")
    assert sent_with_body.next_request() is not None
    assert not sent_with_body.wants_continue
    old = RequestReader()
    old.feed(b"POST / HTTP/1.0\r\nContent-Length: 1\r\nExpect: 100-continue\r\n\r\n")
    assert old.next_request() is None and not old.wants_continue


@pytest.mark.parametrize(
    "data, status, message",
    [
        (b"GET /" + b"a" * 70_000, 414, "Request-URI Too Long"),
        (b"GET /" + b"a" * 70_000 + b" HTTP/1.1\r\n\r\n", 414, "Request-URI Too Long"),
        (b"GET / HTTP/1.1\r\nX: " + b"a" * 70_000, 431, "Line too long"),
        (b"GET / HTTP/1.1\r\n" + b"X: v\r\n" * 30_000, 431, "Too many headers"),
        (b"GET / HTTP/1.1\r\nno colon\r\n\r\n", 400, "Bad header line"),
        (b"GET / HTTP/1.1\r\n\r\r\n\r\n", 400, "Bad header line"),
        (b"POST / HTTP/1.1\r\nContent-Length: 99999999999\r\n\r\n", 400, "Invalid Content-Length"),
        (b"POST / HTTP/1.1\r\nContent-Length: +5\r\n\r\n", 400, "Invalid Content-Length"),
        (b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0x10\r\n", 400, "Invalid chunked"),
        (b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n" + b"1" * 2000, 400, "Invalid"),
        (b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nfffffffff\r\n", 413, "too large"),
    ],
)
def test_bad_requests_raise_the_status_to_answer(data: bytes, status: int, message: str) -> None:
    reader = RequestReader()
    reader.feed(data)
    with pytest.raises(HeadError) as raised:
        reader.next_request()
    assert raised.value.status == status
    assert message in str(raised.value)


def test_a_head_still_within_its_limits_waits_for_more() -> None:
    reader = RequestReader()
    reader.feed(b"GET / HTTP/1.1\r\n" + b"X: v\r\n" * 50 + b"Y: " + b"a" * 60_000)
    assert reader.next_request() is None
    reader.feed(b"\r\n\r\n")
    assert len(reader.next_request().fields["y"]) == 60_000


@pytest.mark.parametrize(
    "line, status",
    [
        ("GET / HTTP/x.y", 400),
        ("GET / HTTP/2.0", 505),
        ("GET / extra HTTP/1.1", 400),
        ("POST /", 400),
        ("GET", 400),
    ],
)
def test_request_lines_are_checked_as_http_server_does(line: str, status: int) -> None:
    with pytest.raises(HeadError) as raised:
        parse_request_line(line)
    assert raised.value.status == status


def test_a_blank_request_line_closes_without_an_answer() -> None:
    reader = RequestReader()
    reader.feed(b"\r\n")
    with pytest.raises(SilentClose):
        reader.next_request()


def test_a_large_head_sent_in_small_pieces_is_searched_once() -> None:
    """100 fields of 60 KB (within the limits) sent 1 KB at a time: searching the whole
    buffer again for each piece took 33 s of the loop, all other connections waiting; each
    byte searched once takes ~0.03 s. The bound is 100x that, so only the quadratic search
    can fail it."""
    head = b"GET / HTTP/1.1\r\n" + b"".join(
        b"X-%03d: %s\r\n" % (n, b"a" * 60_000) for n in range(100)
    )
    reader = RequestReader()
    started = time.perf_counter()
    for start in range(0, len(head), 1024):
        reader.feed(head[start : start + 1024])
        assert reader.next_request() is None
    reader.feed(b"\r\n")
    request = reader.next_request()
    assert time.perf_counter() - started < 3
    assert request is not None and len(request.fields) == 100
