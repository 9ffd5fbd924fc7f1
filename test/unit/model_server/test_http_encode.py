"""``http_replies.encode``: the answer's bytes as clients read them."""

from __future__ import annotations

from sagemaker_tfs.model_server.rest.http_replies import HttpReply, encode


def test_an_answer_has_its_length_type_and_extra_headers() -> None:
    head, body = encode(HttpReply(200, b'{"a": 1}', headers=(("X-One", "1"),)), "POST", True)
    lines = head.decode("latin-1").split("\r\n")
    assert lines[0] == "HTTP/1.1 200 OK"
    assert lines[1].startswith("Date: ") and lines[1].endswith(" GMT")
    assert lines[2:] == ["Content-Type: application/json", "Content-Length: 8", "X-One: 1", "", ""]
    assert body == b'{"a": 1}'


def test_head_gets_no_body_and_closing_says_so() -> None:
    buffers = encode(HttpReply(404, b"{}"), "HEAD", keep_alive=False)
    assert len(buffers) == 1
    assert b"\r\nConnection: close\r\n" in buffers[0]
    assert b"\r\nContent-Length: 2\r\n" in buffers[0]
    closing = encode(HttpReply(504, b"{}", close=True), "POST", keep_alive=True)[0]
    assert closing.startswith(b"HTTP/1.1 504 Gateway Timeout\r\n")
    assert b"\r\nConnection: close\r\n" in closing


def test_a_status_without_a_phrase_still_has_one() -> None:
    assert encode(HttpReply(599, b""), "GET", True)[0].startswith(b"HTTP/1.1 599 Unknown\r\n")
