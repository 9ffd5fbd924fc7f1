"""A request's body read and a reply's body sent, for the edge (``app._serve``): in pieces
of at most 1 MiB, without a copy of a whole large body on either way.
"""

from __future__ import annotations

import contextlib
import errno
import io
import logging
import socket
from collections.abc import Iterator

import falcon

from sagemaker_tfs.service import errors
from sagemaker_tfs.service.codecs.content_types import StreamedBody, WrittenBody
from sagemaker_tfs.service.handlers.invoke import Reply
from sagemaker_tfs.service.handlers.streaming import PIECE_BYTES, HandlerStream, pieces

logger = logging.getLogger(__name__)

BODY_PIECE_BYTES = 1 << 20


def read_body(req: falcon.Request) -> bytes:
    """The whole body, in one allocation of its Content-Length (nginx always sends one).

    gunicorn reads a whole body into a growing buffer: an eighth more than the body, and a copy
    whenever the allocator cannot grow it in place. Here each piece goes straight into a buffer
    of the final size: a ``BytesIO`` over ``bytes`` that it alone holds is written in place,
    and ``getvalue()`` then hands on that very ``bytes``, no copy.
    """
    length = req.content_length
    if not length:
        return req.bounded_stream.read()
    buffer = io.BytesIO(bytes(length))
    with buffer.getbuffer() as view:
        filled = 0
        while filled < length:
            piece = req.bounded_stream.read(min(BODY_PIECE_BYTES, length - filled))
            if not piece:
                raise errors.HttpError(
                    400, f"The request body ended after {filled} of its {length} bytes"
                )
            view[filled : filled + len(piece)] = piece
            filled += len(piece)
    return buffer.getvalue()


# The send buffer of a connection that carries an answer larger than PIECE_BYTES.
# Under gevent, sendall waits in the hub each time the buffer is full until nginx has read
# some: with the kernel's default 208 KB that is ~260 waits for a 55 MB answer (the larger
# buffer saved 3-8 ms of ~120, docs/performance.md). The kernel caps it at net.core.wmem_max.
LARGE_ANSWER_SEND_BUFFER_BYTES = 4 << 20


# Tells nginx not to buffer the answer (it honours the header and hides it from the client).
NO_PROXY_BUFFERING = ("X-Accel-Buffering", "no")


def send_answer(req: falcon.Request, resp: falcon.Response, reply: Reply) -> None:
    """``reply`` as falcon's answer; a large one over a connection given a larger send buffer."""
    _send(resp, reply)
    if resp.stream is not None and not isinstance(reply.body, HandlerStream):
        enlarge_send_buffer(req.env.get("gunicorn.socket"))


def enlarge_send_buffer(connection: socket.socket | None) -> None:
    """Best effort: the answer is sent either way."""
    if connection is not None:
        with contextlib.suppress(OSError):
            connection.setsockopt(
                socket.SOL_SOCKET, socket.SO_SNDBUF, LARGE_ANSWER_SEND_BUFFER_BYTES
            )


def _send(resp: falcon.Response, reply: Reply) -> None:
    resp.status = reply.status
    resp.content_type = reply.content_type
    for name, value in reply.headers:
        resp.set_header(name, value)
    if isinstance(reply.body, bytes):
        resp.data = reply.body
        return
    if isinstance(reply.body, StreamedBody):
        _send_streamed(resp, reply.body)
        return
    if isinstance(reply.body, WrittenBody):  # no Content-Length: sent chunked as it is written
        resp.stream = _cut_short_on_failure(pieces(reply.body.chunks))
        return
    if isinstance(reply.body, HandlerStream):
        # no Content-Length: gunicorn sends each chunk as an HTTP/1.1 chunk as it comes
        resp.set_header(*NO_PROXY_BUFFERING)
        resp.stream = reply.body.chunks()
        return
    length = sum(len(chunk) for chunk in reply.body)
    if length <= PIECE_BYTES:
        resp.data = b"".join(reply.body)
        return
    resp.content_length = length
    resp.stream = pieces(reply.body)


def _send_streamed(resp: falcon.Response, body: StreamedBody) -> None:
    """An answer passed on while it arrives; a small one is gathered first."""
    if body.length <= PIECE_BYTES:
        try:
            resp.data = b"".join(body.chunks)
        except Exception as error:  # noqa: BLE001 - the model server's answer broke off
            logger.warning("model server answer broke off: %s", error)
            raise errors.HttpError(502, f"The model server's answer broke off: {error}") from None
        return
    resp.content_length = body.length
    resp.stream = _cut_short_on_failure(pieces(body.chunks))


def _cut_short_on_failure(chunks: Iterator[bytes]) -> Iterator[bytes]:
    """The chunks; if the answer breaks off midway (the model server failed, the status was
    sent long ago), one line is logged and the connection is reset, so that nginx and the
    client see a truncated answer at once rather than wait for the missing bytes."""
    try:
        yield from chunks
    except Exception as error:  # noqa: BLE001 - any failure here can only cut the answer
        logger.warning("answer cut short: the model server's answer broke off: %s", error)
        raise ConnectionResetError(errno.ECONNRESET, "answer cut short") from None
