"""A request's head (its request line's version and its header fields), read without the
``email`` package that ``http.server`` parses headers with.

That parser built a full ``email.message.Message`` for every request: about a third of the
REST server's Python time for a small prediction. The server needs a handful of fields by name,
so they are read here into a plain ``dict``, with ``http.server``'s limits and answers: a line
over 64 KiB or more than 100 fields is 431.
"""

from __future__ import annotations

from io import BufferedIOBase

MAX_LINE_BYTES = 65536
MAX_FIELDS = 100


class HeadError(ValueError):
    """A head the server will not read; ``status`` is the answer's HTTP status."""

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
