"""The REST server's answers: what an application gives the loop (``HttpReply``, ``App``),
the bytes an answer is sent as (``encode``), and whether its client still waits for it
(``client_waits``).
"""

from __future__ import annotations

import dataclasses
import email.utils
import functools
import logging
import socket
import time
from collections.abc import Callable
from http import HTTPStatus
from typing import Protocol

from sagemaker_tfs.model_server.rest.request_reader import Request

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class HttpReply:
    status: int
    body: bytes | bytearray
    content_type: str | None = "application/json"
    headers: tuple[tuple[str, str], ...] = ()
    close: bool = False  # the connection closes once this answer has left


class App(Protocol):
    """What the loop asks of the application it serves (``server.RestServer``)."""

    def respond(self, request: Request) -> HttpReply: ...

    def runs_inline(self, request: Request) -> bool: ...

    def ran(self, request: Request, reply: HttpReply, seconds: float) -> None: ...

    def error_reply(self, status: int, message: str) -> HttpReply: ...

    def waited_too_long(self) -> HttpReply: ...

    def ran_too_long(self, request: Request) -> HttpReply | None: ...


def encode(reply: HttpReply, method: str, keep_alive: bool) -> list[bytes | bytearray]:
    """The answer's head and body (no body for HEAD); ``Connection: close`` when the
    connection ends after it."""
    lines = [
        f"HTTP/1.1 {reply.status} {_phrase(reply.status)}",
        f"Date: {_http_date(int(time.time()))}",
    ]
    if reply.content_type:
        lines.append(f"Content-Type: {reply.content_type}")
    if closes(reply, keep_alive):
        lines.append("Connection: close")
    lines.append(f"Content-Length: {len(reply.body)}")
    lines.extend(f"{name}: {value}" for name, value in reply.headers)
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return [head] if method == "HEAD" else [head, reply.body]


def closes(reply: HttpReply, keep_alive: bool) -> bool:
    return reply.close or not keep_alive


@functools.cache
def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"


@functools.lru_cache(maxsize=1)
def _http_date(second: int) -> str:
    """The ``Date`` header's text, made once a second (``email.utils`` takes ~5 us)."""
    return email.utils.formatdate(second, usegmt=True)


def encoded(app: App, reply: HttpReply, request: Request) -> tuple[list[bytes | bytearray], bool]:
    """``reply``'s bytes and whether the connection closes after them; an answer that cannot
    be written is a 500 instead (and the connection closes)."""
    try:
        return encode(reply, request.method, request.keep_alive), closes(reply, request.keep_alive)
    except Exception:
        logger.exception("REST answer to %s %s failed", request.method, request.path)
        reply = app.error_reply(500, "INTERNAL: the answer could not be written")
        return encode(reply, request.method, keep_alive=False), True


def client_waits(sock: socket.socket) -> Callable[[], bool]:
    """Whether the client of a connection still waits for its answer: the connection is
    neither closed (EOF: nginx closes its upstream connection when its client goes) nor
    reset. A peek: no byte is taken from what the reader reads next."""

    def waits() -> bool:
        try:
            return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) != b""
        except BlockingIOError:
            return True
        except OSError:
            return False

    return waits
