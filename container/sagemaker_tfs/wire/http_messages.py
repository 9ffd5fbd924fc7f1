"""HTTP/1.1 framing as both ends of the stack's REST hop read it: the model server's REST API
reads requests, the service reads the model server's answers.

Both used to go through the ``email`` package (``http.server`` and ``http.client`` parse
header fields with it), which built a full ``email.message.Message`` for every message: a
third of the model server's Python time for a small prediction, a sixth of the service's with
handlers. Here the fields go into a plain ``dict`` by lower-case name, with ``http.server``'s
limits: a line over 64 KiB or more than 100 fields is an error (431 for a request).
"""

from __future__ import annotations

import re
from io import BufferedIOBase

MAX_LINE_BYTES = 65536
MAX_FIELDS = 100
CHUNK_SIZE_LINE_BYTES = 1024
_CHUNK_SIZE = re.compile(rb"[0-9A-Fa-f]{1,15}")


class HeadError(ValueError):
    """A message the reader will not take; ``status`` is the HTTP status a server answers."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def http_version(text: str) -> tuple[int, int] | None:
    """``HTTP/<major>.<minor>`` as two numbers, or None when ``text`` is not such a version."""
    if not text.startswith("HTTP/"):
        return None
    parts = text[5:].split(".")
    if len(parts) != 2 or not all(p.isascii() and p.isdigit() and len(p) <= 10 for p in parts):
        return None
    return int(parts[0]), int(parts[1])


def read_header_fields(stream: BufferedIOBase) -> dict[str, str]:
    """The header fields up to the blank line, by lower-case name.

    A repeated name keeps its first value (what ``http.server``'s ``headers.get`` gave); an
    obsolete folded line (starting with a space or tab) continues the field before it.
    """
    fields: dict[str, str] = {}
    last_name: str | None = None
    for _ in range(MAX_FIELDS + 1):
        line = stream.readline(MAX_LINE_BYTES + 1)
        if len(line) > MAX_LINE_BYTES:
            raise HeadError(431, "Line too long")
        if line in (b"\r\n", b"\n", b""):
            return fields
        text = line.decode("iso-8859-1").rstrip("\r\n")
        if not text:  # stray carriage returns: no field, and not the blank line either
            raise HeadError(400, f"Bad header line ({line[:100]!r})")
        if text[0] in " \t":
            if last_name is not None:
                fields[last_name] += " " + text.strip()
            continue
        name, colon, value = text.partition(":")
        name = name.strip().lower()
        if not colon or not name:
            raise HeadError(400, f"Bad header line ({text[:100]!r})")
        last_name = None if name in fields else name
        fields.setdefault(name, value.strip())
    raise HeadError(431, f"Too many headers (more than {MAX_FIELDS})")


def is_chunked(fields: dict[str, str]) -> bool:
    return "chunked" in fields.get("transfer-encoding", "").lower()


def content_length(fields: dict[str, str]) -> int | None:
    """The ``Content-Length`` field's number, None without one; a value that is not a plain
    decimal number (``int()`` alone would take ``+5``, ``-1`` or ``1_000``) raises HeadError."""
    text = fields.get("content-length")
    if text is None:
        return None
    if not (text.isascii() and text.isdigit()):
        raise HeadError(400, f"Invalid Content-Length: {text[:100]}")
    return int(text)


def read_chunked_body(stream: BufferedIOBase) -> bytes:
    """A ``Transfer-Encoding: chunked`` body, whole (its trailer fields read and dropped)."""
    chunks: list[bytes] = []
    while True:
        size = chunk_size(stream.readline(CHUNK_SIZE_LINE_BYTES))
        if size == 0:
            while stream.readline(CHUNK_SIZE_LINE_BYTES).strip():
                pass
            return b"".join(chunks)
        chunk = stream.read(size)
        if len(chunk) < size:
            raise HeadError(400, "Invalid chunked encoding: the body ends inside a chunk")
        chunks.append(chunk)
        stream.readline(CHUNK_SIZE_LINE_BYTES)


def chunk_size(line: bytes) -> int:
    """A chunk's size line (extensions after ``;`` ignored); HeadError 400 if it is not hex."""
    text = line.split(b";", 1)[0].strip()
    if not _CHUNK_SIZE.fullmatch(text):  # int() alone would take -1, 0x10, 1_0
        raise HeadError(400, "Invalid chunked encoding")
    return int(text, 16)
