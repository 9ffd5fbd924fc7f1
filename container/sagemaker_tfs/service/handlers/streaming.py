"""Response streaming: a handler's answer given as an iterator of chunks.

A ``handler`` or ``output_handler`` that returns an iterator (a generator, typically), alone
or as ``(iterator, content_type)``, is answered as it produces: the service takes the first
chunk at once (an exception before it is an ordinary error answer, 500 JSON), then sends the
status, the headers and each chunk as its own HTTP/1.1 chunk (no Content-Length), which
nginx passes on unbuffered (``proxy_buffering off``; the answer also says
``X-Accel-Buffering: no``).

How a stream ends, counted in ``sagemaker_tfs_streamed_answers_total{outcome}``:

- ``complete``: the iterator was exhausted; the zero-length chunk ends the body.
- ``failed``: it raised, or gave a chunk that is neither bytes nor str. One log line names
  the handler and the error, and the connection is reset without the terminating chunk, so
  that nginx, and every HTTP client after it, sees a body cut short (curl: ``(18) transfer
  closed with outstanding read data remaining``; urllib3/requests: ``ProtocolError`` /
  ``ChunkedEncodingError``), never a complete answer.
- ``closed``: the client went away (nginx closes the connection to the worker, whose next
  write fails); the iterator is closed (``generator.close()``: ``GeneratorExit`` at its
  ``yield``, its ``finally`` blocks run), not drained.
"""

from __future__ import annotations

import errno
import logging
from collections.abc import Iterable, Iterator
from typing import Any

from sagemaker_tfs.service.metrics import InvocationRecord

logger = logging.getLogger(__name__)

# A chunk larger than this goes out in pieces of this size (gunicorn copies each one it sends).
PIECE_BYTES = 1 << 20
COMPLETE = "complete"
FAILED = "failed"
CLOSED = "closed"


def is_stream(body: Any) -> bool:
    """An iterator (generator, ``iter(...)``, ``map``...) rather than a body: bytes, str,
    lists and dicts are iterable but not iterators."""
    return isinstance(body, Iterator)


def as_chunk(chunk: Any) -> bytes:
    """A chunk as bytes: bytes-like as they are, str in UTF-8."""
    if isinstance(chunk, bytes):
        return chunk
    if isinstance(chunk, str):
        return chunk.encode("utf-8")
    if isinstance(chunk, (bytearray, memoryview)):
        return bytes(chunk)
    raise TypeError(f"a streamed chunk must be bytes or str, got {type(chunk).__name__}")


class HandlerStream:
    """A handler's iterator, started: its first chunk taken (``start``), the rest sent by
    ``chunks()``, which gunicorn iterates and closes."""

    def __init__(self, source: Iterator[Any], origin: str, record: InvocationRecord) -> None:
        self._source = source
        self._origin = origin
        self._record = record
        self._first: bytes | None = None

    def start(self) -> HandlerStream:
        """Takes the first non-empty chunk: what the handler raises until then is raised here,
        before anything is sent (and the iterator is closed)."""
        try:
            for chunk in self._source:
                first = as_chunk(chunk)
                if first:
                    self._first = first
                    break
        except BaseException:
            _close(self._source)
            raise
        return self

    def chunks(self) -> Iterator[bytes]:
        outcome = CLOSED
        try:
            if self._first is not None:
                yield from pieces((self._first,))
                self._first = None
            for chunk in self._source:
                yield from pieces((as_chunk(chunk),))
            outcome = COMPLETE
        except Exception as error:  # noqa: BLE001 - any failure can only cut the answer short
            outcome = FAILED
            logger.warning(
                "streamed answer of %s cut short: %s: %s", self._origin, type(error).__name__, error
            )
            raise ConnectionResetError(errno.ECONNRESET, "streamed answer cut short") from None
        finally:
            _close(self._source)
            self._record.streamed(outcome)


def _close(source: Iterator[Any]) -> None:
    """``generator.close()``, for iterators that have it."""
    close = getattr(source, "close", None)
    if close is not None:
        close()


def pieces(chunks: Iterable[bytes | memoryview]) -> Iterator[bytes]:
    """The chunks as ``bytes`` of at most ``PIECE_BYTES`` (WSGI servers take bytes; copying a
    large answer piece by piece reuses the same memory instead of faulting in one more copy),
    empty ones left out (an empty HTTP chunk would end a chunked body). A view of a whole
    ``bytes`` (a message as received from the model server) is that ``bytes``, not a copy."""
    for chunk in chunks:
        if isinstance(chunk, memoryview):
            chunk = _whole_bytes(chunk) or chunk
        if isinstance(chunk, bytes) and len(chunk) <= PIECE_BYTES:
            if chunk:
                yield chunk
            continue
        view = memoryview(chunk)
        for start in range(0, len(view), PIECE_BYTES):
            yield bytes(view[start : start + PIECE_BYTES])


def _whole_bytes(view: memoryview) -> bytes | None:
    """The ``bytes`` object ``view`` shows all of, if it is one."""
    whole = view.obj
    if isinstance(whole, bytes) and view.nbytes == len(whole) and view.c_contiguous:
        return whole
    return None
