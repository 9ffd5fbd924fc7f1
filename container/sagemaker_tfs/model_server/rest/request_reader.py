"""HTTP/1.1 requests read from a connection's bytes as they arrive.

The REST server's event loop hands ``RequestReader.feed`` whatever one ``recv`` gave and asks
``next_request`` for a whole request: nothing here blocks or touches a socket, so a client
that sends a byte at a time holds up no one. The checks and answers are ``http.server``'s,
which the server used before (400 for a bad request line or version, 505 from HTTP/2 on, 414
for a request line over 64 KiB, 431 for a head too large); the header fields are read by
``wire.http_messages`` as the service reads its answers.

A body is kept in one ``bytearray`` that grows as bytes arrive (never allocated ahead from
what ``Content-Length`` claims, which a client can make up), and handed over without a copy.
"""

from __future__ import annotations

import dataclasses
import io

from sagemaker_tfs.wire.http_messages import (
    CHUNK_SIZE_LINE_BYTES,
    MAX_FIELDS,
    MAX_LINE_BYTES,
    HeadError,
    chunk_size,
    content_length,
    http_version,
    is_chunked,
    read_header_fields,
)

MAX_BODY_BYTES = 2**31 - 1


class SilentClose(Exception):
    """The connection ends without an answer (a blank request line, as ``http.server``)."""


@dataclasses.dataclass
class Request:
    method: str
    target: str  # as sent: path and query
    version: tuple[int, int]
    fields: dict[str, str]  # by lower-case name
    body: bytes | bytearray
    keep_alive: bool
    path: str = dataclasses.field(init=False)  # the target without its query

    def __post_init__(self) -> None:
        self.path = self.target.split("?", 1)[0]


@dataclasses.dataclass
class _Head:
    method: str
    target: str
    version: tuple[int, int]
    keep_alive: bool
    fields: dict[str, str] = dataclasses.field(default_factory=dict)


class RequestReader:
    """One connection's request bytes; ``next_request`` raises ``HeadError`` (answer its
    status, then close) or ``SilentClose``."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._head: _Head | None = None
        self._body = bytearray()
        self._body_left = 0  # Content-Length bytes still to come
        self._chunk_left = -1  # chunked: -1 before a size line, else data bytes still to come
        self._in_trailer = False
        self._chunked = False
        # the head still coming: its request line (parsed) and where it ends, the bytes
        # already searched for the blank line, the header lines counted so far
        self._request_line: tuple[_Head, int] | None = None
        self._scanned = 0
        self._header_lines = 0
        self.wants_continue = False  # a head asked for ``100 Continue``: the loop sends it once

    @property
    def idle(self) -> bool:
        """No part of a request received."""
        return self._head is None and not self._buffer

    def feed(self, data: bytes) -> None:
        if self._head is not None and self._body_left and not self._buffer:
            taken = min(len(data), self._body_left)
            self._body += memoryview(data)[:taken]  # straight into the body: no second copy
            self._body_left -= taken
            data = data[taken:]
        self._buffer += data

    def next_request(self) -> Request | None:
        """The next whole request, or None until more bytes come."""
        if self._head is None:
            self._head = self._read_head()
            if self._head is None:
                return None
        if not self._read_body():
            return None
        head, body = self._head, self._body
        self._head, self._body, self._chunk_left, self._in_trailer = None, bytearray(), -1, False
        return Request(head.method, head.target, head.version, head.fields, body, head.keep_alive)

    def _read_head(self) -> _Head | None:
        """The head, once its blank line has come. Each byte is searched once however the head
        arrives: when every piece started the search again, a 6 MB head (100 fields of 60 KB,
        within the limits) sent 1 KB at a time held the loop for 33 s."""
        buffer = self._buffer
        if self._request_line is None:
            line_end = buffer.find(b"\n", self._scanned)
            if line_end >= MAX_LINE_BYTES or (line_end < 0 and len(buffer) > MAX_LINE_BYTES):
                raise HeadError(414, "Request-URI Too Long")
            if line_end < 0:
                self._scanned = len(buffer)
                return None
            line = buffer[:line_end].decode("iso-8859-1").rstrip("\r\n")
            self._request_line = parse_request_line(line), line_end
            self._scanned = line_end
        head, line_end = self._request_line
        head_end = _blank_line_after(buffer, max(line_end, self._scanned - 2))
        if head_end < 0:
            self._header_lines += buffer.count(b"\n", max(line_end + 1, self._scanned))
            self._scanned = len(buffer)
            if self._header_lines > MAX_FIELDS or _last_line_too_long(buffer):
                read_header_fields(io.BytesIO(buffer[line_end + 1 :]))  # raises its 431
                raise HeadError(431, "Request header fields too large")
            return None
        head.fields = read_header_fields(io.BytesIO(buffer[line_end + 1 : head_end]))
        del buffer[:head_end]
        self._request_line, self._scanned, self._header_lines = None, 0, 0
        connection = head.fields.get("connection", "").lower()
        if connection == "close":
            head.keep_alive = False
        elif connection == "keep-alive" and head.version >= (1, 0):
            head.keep_alive = True
        self._start_body(head)
        return head

    def _start_body(self, head: _Head) -> None:
        expect = head.fields.get("expect", "").lower()
        self._chunked = is_chunked(head.fields)
        if self._chunked:
            self.wants_continue = expect == "100-continue" and head.version >= (1, 1)
            return
        length = content_length(head.fields) or 0
        if length > MAX_BODY_BYTES:
            raise HeadError(400, f"Invalid Content-Length: {length}")
        self._body_left = length - self._take_data(length)
        self.wants_continue = (
            expect == "100-continue" and head.version >= (1, 1) and self._body_left > 0
        )

    def _read_body(self) -> bool:
        if not self._chunked:
            self._body_left -= self._take_data(self._body_left)
            return self._body_left == 0
        return self._read_chunks()

    def _take_data(self, most: int) -> int:
        """Up to ``most`` bytes moved from the buffer to the body; how many."""
        taken = min(len(self._buffer), most)
        if taken:
            self._body += self._buffer[:taken]
            del self._buffer[:taken]
        return taken

    def _read_chunks(self) -> bool:
        """``Transfer-Encoding: chunked``: sizes, data and the trailer (read and dropped)."""
        while True:
            if self._chunk_left > 0:
                self._chunk_left -= self._take_data(self._chunk_left)
                if self._chunk_left:
                    return False
                self._chunk_left = -2  # the line ending the chunk's data
            line = self._take_line()
            if line is None:
                return False
            if self._in_trailer:
                if not line.strip():
                    return True
            elif self._chunk_left == -2:
                self._chunk_left = -1
            else:
                self._chunk_left = chunk_size(line)
                if len(self._body) + self._chunk_left > MAX_BODY_BYTES:
                    raise HeadError(413, "Request body too large")
                self._in_trailer = self._chunk_left == 0

    def _take_line(self) -> bytes | None:
        end = self._buffer.find(b"\n", 0, CHUNK_SIZE_LINE_BYTES)
        if end < 0:
            if len(self._buffer) >= CHUNK_SIZE_LINE_BYTES:
                raise HeadError(400, "Invalid chunked encoding: a size line over 1 KiB")
            return None
        line = bytes(self._buffer[: end + 1])
        del self._buffer[: end + 1]
        return line


def parse_request_line(line: str) -> _Head:
    """Method, target and version, as ``http.server`` checks them."""
    words = line.split()
    if not words:
        raise SilentClose
    version, keep_alive = (0, 9), False
    if len(words) >= 3:
        parsed = http_version(words[-1])
        if parsed is None:
            raise HeadError(400, f"Bad request version ({words[-1]!r})")
        if parsed >= (2, 0):
            raise HeadError(505, f"Invalid HTTP version ({words[-1][5:]})")
        version, keep_alive = parsed, parsed >= (1, 1)
    if not 2 <= len(words) <= 3:
        raise HeadError(400, f"Bad request syntax ({line!r})")
    if len(words) == 2 and words[0] != "GET":
        raise HeadError(400, f"Bad HTTP/0.9 request type ({words[0]!r})")
    return _Head(words[0], words[1], version, keep_alive)


def _blank_line_after(buffer: bytearray, line_end: int) -> int:
    """The index just past the blank line that ends the head, -1 if it has not come yet."""
    ends = [i for i in (buffer.find(b"\n\r\n", line_end), buffer.find(b"\n\n", line_end)) if i >= 0]
    if not ends:
        return -1
    end = min(ends)
    return end + (3 if buffer[end + 1] == 0x0D else 2)


def _last_line_too_long(buffer: bytearray) -> bool:
    """The unfinished last line is over ``MAX_LINE_BYTES`` (looking no further back)."""
    start = max(0, len(buffer) - MAX_LINE_BYTES - 1)
    return buffer.rfind(b"\n", start) < 0 and len(buffer) - start > MAX_LINE_BYTES
