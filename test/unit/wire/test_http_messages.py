"""wire/http_messages: HTTP/1.1 heads read without the ``email`` package, with ``http.server``'s
limits (64 KiB a line, 100 fields) and the field values it gave by name; chunked bodies."""

from __future__ import annotations

import io

import pytest
from sagemaker_tfs.wire.http_messages import (
    MAX_FIELDS,
    MAX_LINE_BYTES,
    HeadError,
    content_length,
    http_version,
    is_chunked,
    read_chunked_body,
    read_header_fields,
)


def fields_of(head: bytes) -> dict[str, str]:
    return read_header_fields(io.BytesIO(head))


def test_fields_by_lower_case_name_with_values_trimmed() -> None:
    stream = io.BytesIO(b"Host: x\r\nContent-Length:  12 \r\nX-Mixed-Case:a:b\r\n\r\nbody")
    assert read_header_fields(stream) == {
        "host": "x",
        "content-length": "12",
        "x-mixed-case": "a:b",
    }
    assert stream.read() == b"body"  # the body is left where it starts


def test_a_repeated_name_keeps_its_first_value_and_folded_lines_continue_a_field() -> None:
    head = b"Origin: a\r\norigin: b\r\nX-Long: one\r\n\t two\r\n  three\r\n\r\n"
    assert fields_of(head) == {"origin": "a", "x-long": "one two three"}


def test_bare_line_feeds_and_an_end_of_stream_also_end_the_head() -> None:
    assert fields_of(b"A: 1\nB: 2\n\n") == {"a": "1", "b": "2"}
    assert fields_of(b"A: 1\r\n") == {"a": "1"}


def test_limits_of_http_server_are_kept() -> None:
    enough = b"".join(b"F%d: v\r\n" % i for i in range(MAX_FIELDS)) + b"\r\n"
    assert len(fields_of(enough)) == MAX_FIELDS
    with pytest.raises(HeadError) as too_many:
        fields_of(b"F: v\r\n" + enough)
    assert too_many.value.status == 431
    with pytest.raises(HeadError) as too_long:
        fields_of(b"X: " + b"a" * MAX_LINE_BYTES + b"\r\n\r\n")
    assert (too_long.value.status, str(too_long.value)) == (431, "Line too long")


@pytest.mark.parametrize("line", [b"no colon here\r\n", b": no name\r\n", b"\r\r\n", b"\r"])
def test_a_line_that_is_not_a_field_is_a_bad_request(line: bytes) -> None:
    with pytest.raises(HeadError) as error:
        fields_of(b"Host: x\r\n" + line + b"\r\n")
    assert error.value.status == 400


@pytest.mark.parametrize(
    "text, version",
    [
        ("HTTP/1.1", (1, 1)),
        ("HTTP/1.0", (1, 0)),
        ("HTTP/01.01", (1, 1)),
        ("HTTP/2.0", (2, 0)),
        ("HTTP/1", None),
        ("HTTP/1.1.1", None),
        ("HTTP/a.1", None),
        ("HTTP/\u00b2.1", None),
        ("http/1.1", None),
        ("HTTP/12345678901.1", None),
    ],
)
def test_http_version(text: str, version: tuple[int, int] | None) -> None:
    assert http_version(text) == version


def test_a_chunked_body_is_read_whole_with_extensions_and_trailers_dropped() -> None:
    stream = io.BytesIO(b"4;ext=1\r\nWiki\r\n6\r\npedia \r\n0\r\nTrailer: x\r\n\r\nnext")
    assert read_chunked_body(stream) == b"Wikipedia "
    assert stream.read() == b"next"
    assert is_chunked({"transfer-encoding": "gzip, Chunked"})
    assert not is_chunked({"content-length": "3"})


@pytest.mark.parametrize(
    "body",
    [
        b"zz\r\nab\r\n0\r\n\r\n",
        b"10\r\nshort",
        b"-1\r\nab\r\n0\r\n\r\n",  # int() would read to the end of the stream
        b"0x2\r\nab\r\n0\r\n\r\n",
        b"1_0\r\n0123456789abcdef\r\n0\r\n\r\n",
        b"\r\nab\r\n",
    ],
)
def test_a_broken_chunked_body_is_a_bad_request(body: bytes) -> None:
    with pytest.raises(HeadError) as error:
        read_chunked_body(io.BytesIO(body))
    assert error.value.status == 400


def test_content_length_is_a_plain_decimal_number() -> None:
    assert content_length({"content-length": "42"}) == 42
    assert content_length({}) is None
    for text in ["+5", "-1", "1_000", " ", "", "\u00b2", "0x10"]:
        with pytest.raises(HeadError) as error:
            content_length({"content-length": text})
        assert error.value.status == 400
