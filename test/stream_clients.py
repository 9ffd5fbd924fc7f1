"""Clients of ``/invocations-bidirectional-stream`` for the host stack's tests and the container
suite: the ``websockets`` library's client as SageMaker's side would be, and a hand-written one
for frames no correct client sends (a text frame that is not UTF-8).
"""

from __future__ import annotations

import base64
import os
import socket
import struct
import threading
from collections.abc import Sequence
from urllib.parse import urlsplit

from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

STREAM_PATH = "/invocations-bidirectional-stream"
MAX_CLIENT_MESSAGE_BYTES = 64 << 20


def stream_url(base_url: str, path: str = STREAM_PATH, query: str = "") -> str:
    """``ws://host:port/invocations-bidirectional-stream`` (or ``path``, with ``?query``) for a
    stack's ``http://`` URL."""
    return "ws" + base_url.removeprefix("http") + path + (f"?{query}" if query else "")


def open_stream(
    base_url: str,
    path: str = STREAM_PATH,
    query: str = "",
    keepalive: float | None = 20,
    **headers: str,
) -> ClientConnection:
    """A connection to the stream path (headers as keyword arguments, ``_`` for ``-``); the
    client pings every ``keepalive`` seconds and gives up after as long without a pong."""
    extra = {name.replace("_", "-"): value for name, value in headers.items()}
    return connect(
        stream_url(base_url, path, query),
        additional_headers=extra,
        max_size=MAX_CLIENT_MESSAGE_BYTES,
        open_timeout=30,
        compression=None,
        ping_interval=keepalive,
        ping_timeout=keepalive,
    )


def exchange(connection: ClientConnection, messages: Sequence[bytes | str]) -> list[bytes | str]:
    """Send ``messages`` from a thread while this one receives as many answers: the client
    never waits for an answer before sending on, and reading keeps the server's sends moving."""
    failures: list[BaseException] = []

    def send_all() -> None:
        try:
            for message in messages:
                connection.send(message)
        except BaseException as error:  # reported by the caller
            failures.append(error)

    sender = threading.Thread(target=send_all)
    sender.start()
    answers = []
    try:
        for _ in messages:
            answers.append(connection.recv(timeout=60))
    finally:
        sender.join(60)
    if failures:
        raise failures[0]
    return answers


def close_of(connection: ClientConnection, timeout: float = 30) -> tuple[int | None, str]:
    """The code and reason of the close frame the server sends (read messages are dropped)."""
    try:
        while True:
            connection.recv(timeout=timeout)
    except ConnectionClosed as closed:
        frame = closed.rcvd
        return (frame.code, frame.reason) if frame is not None else (None, "")


def raw_handshake(base_url: str, timeout: float = 30, query: str = "") -> socket.socket:
    """A socket on which the opening handshake is done, for frames written by hand."""
    parts = urlsplit(base_url)
    sock = socket.create_connection((parts.hostname, parts.port), timeout=timeout)
    key = base64.b64encode(os.urandom(16)).decode()
    target = STREAM_PATH + (f"?{query}" if query else "")
    sock.sendall(
        (
            f"GET {target} HTTP/1.1\r\nHost: {parts.netloc}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        ).encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        piece = sock.recv(4096)
        if not piece:
            raise ConnectionError(f"handshake answer cut short: {head!r}")
        head += piece
    status = head.split(b"\r\n", 1)[0]
    if b" 101 " not in status + b" ":
        raise ConnectionError(f"handshake refused: {head!r}")
    return sock


def masked_frame(opcode: int, payload: bytes) -> bytes:
    """One final client frame (clients must mask), for payloads under 64 KiB."""
    mask = os.urandom(4)
    body = bytes(byte ^ mask[index % 4] for index, byte in enumerate(payload))
    if len(payload) < 126:
        header = struct.pack("!BB", 0x80 | opcode, 0x80 | len(payload))
    else:
        header = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, len(payload))
    return header + mask + body


def read_close_code(sock: socket.socket) -> int | None:
    """The code of the first close frame the server sends (other frames skipped)."""
    data = b""
    while True:
        while len(data) < 2:
            piece = sock.recv(4096)
            if not piece:
                return None
            data += piece
        opcode, length = data[0] & 0x0F, data[1] & 0x7F
        offset = 2
        if length == 126:
            length, offset = struct.unpack("!H", data[2:4])[0], 4
        elif length == 127:
            length, offset = struct.unpack("!Q", data[2:10])[0], 10
        while len(data) < offset + length:
            piece = sock.recv(65536)
            if not piece:
                return None
            data += piece
        payload, data = data[offset : offset + length], data[offset + length :]
        if opcode == 0x8:
            return struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else None
