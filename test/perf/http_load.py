"""An HTTP/1.1 load client for the benchmarks: one request, sent on a fixed schedule (open
loop) or as fast as answers come back (closed loop), over kept-alive connections.

Non-blocking sockets and one ``selectors`` loop, no asyncio: a request costs a ``send``, a
``recv`` or two and a search for the end of the head. On one core of this machine, against an
nginx answering from memory on the other (2026-11-29), it kept a schedule of 15,000 requests
a second (20,000: 6% not sent), where the asyncio client it replaced fell behind at 10,000
(15,000: 29% not sent); enough to step a one-CPU container to 3x its ~4,200 a second.

Each answer becomes a ``Result``: (status, seconds, JSON or not, shed, when it ended in epoch
seconds). Status 0: no answer within the timeout; -1: the connection failed or closed
early; -2: not sent, since ``MAX_IN_FLIGHT`` requests were waiting already.
"""

from __future__ import annotations

import json
import selectors
import socket
import time

Result = tuple[int, float, bool, bool, float]

# Past this many requests waiting, a request is counted as not sent (status -2), so that a
# client that cannot keep up with its schedule does not take every local port of the machine;
# at most this many idle connections are kept.
MAX_IN_FLIGHT = 1024
MAX_IDLE = 256
RECV_BYTES = 1 << 18
TIMEOUT_SCAN_SECONDS = 0.1


def http_request(port: int, body: bytes, path: str = "/invocations") -> bytes:
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


def answer_is_json(head: bytes, body: bytes, status: int) -> bool:
    if b"\r\ncontent-type: application/json" not in head.lower():
        return False
    if status == 200:
        return body[:1] in (b"{", b"[")
    try:
        return isinstance(json.loads(body), dict)
    except ValueError:
        return False


def dechunked(data: bytes | bytearray, start: int) -> tuple[bytes, int] | None:
    """A chunked body from ``start``: (the body, where it ends), or None while incomplete."""
    pieces, at = [], start
    while True:
        line_end = data.find(b"\r\n", at)
        if line_end < 0:
            return None
        size = int(bytes(data[at:line_end]).split(b";")[0], 16)
        at = line_end + 2
        if size == 0:
            trailer_end = data.find(b"\r\n\r\n", at - 2)
            return (b"".join(pieces), trailer_end + 4) if trailer_end >= 0 else None
        if len(data) < at + size + 2:
            return None
        pieces.append(bytes(data[at : at + size]))
        at += size + 2


class Exchange:
    """One request on one connection: what is left to send, what was read so far."""

    __slots__ = ("sock", "out", "data", "started", "head", "length")

    def __init__(self, sock: socket.socket, request: bytes, started: float) -> None:
        self.sock, self.out, self.started = sock, memoryview(request), started
        self.data = bytearray()
        self.head: bytes | None = None  # the answer's head, once it is in
        self.length: int | None = None  # of the body; None: chunked

    def answer(self) -> tuple[int, bytes, bytes] | None:
        """(status, head, body) once the whole answer is in, else None."""
        data = self.data
        if self.head is None:
            found = data.find(b"\r\n\r\n")
            if found < 0:
                return None
            self.head = bytes(data[: found + 4])
            lower = self.head.lower()
            marker = lower.find(b"\r\ncontent-length:")
            if marker >= 0:
                self.length = int(lower[marker + 17 : lower.find(b"\r\n", marker + 2)])
            elif b"\r\ntransfer-encoding: chunked" not in lower:
                raise ValueError("an answer without a length")
        head, body_at = self.head, len(self.head)
        if self.length is not None:
            if len(data) < body_at + self.length:
                return None
            return int(head[9:12]), head, bytes(data[body_at : body_at + self.length])
        chunked = dechunked(data, body_at)
        return None if chunked is None else (int(head[9:12]), head, chunked[0])


class LoadClient:
    """Sends ``request`` to 127.0.0.1:``port``; an answer later than ``timeout`` is status 0."""

    def __init__(self, port: int, request: bytes, timeout: float) -> None:
        self.port, self.request, self.timeout = port, request, timeout
        self.selector = selectors.DefaultSelector()
        self.idle: list[socket.socket] = []
        self.in_flight: dict[socket.socket, Exchange] = {}
        self.results: list[Result] = []
        self._next_scan = 0.0

    def open_loop(
        self, rate: float, seconds: float, start_at: float, offset: float
    ) -> list[Result]:
        """``rate`` requests a second for ``seconds``, the first at epoch ``start_at`` +
        ``offset``, each at its time whatever the answers before it."""
        count = int(rate * seconds)
        begin = time.monotonic() + max(0.0, start_at - time.time()) + offset
        sent = 0
        while sent < count or self.in_flight:
            now = time.monotonic()
            while sent < count and begin + sent / rate <= now:
                self._start(now)
                sent += 1
            wait = begin + sent / rate - now if sent < count else TIMEOUT_SCAN_SECONDS
            self._serve(max(0.0, min(wait, TIMEOUT_SCAN_SECONDS)))
        return self._finish()

    def closed_loop(self, clients: int, seconds: float) -> list[Result]:
        """``clients`` connections, each sending its next request when its answer is in."""
        ends = time.monotonic() + seconds
        for _ in range(clients):
            self._start(time.monotonic())
        while self.in_flight:
            before = len(self.results)
            self._serve(TIMEOUT_SCAN_SECONDS)
            now = time.monotonic()
            if now < ends:
                for _ in range(len(self.results) - before):
                    self._start(now)
        return self._finish()

    def _finish(self) -> list[Result]:
        for sock in self.idle:
            sock.close()
        self.idle.clear()
        self.selector.close()
        return self.results

    def _start(self, now: float) -> None:
        if len(self.in_flight) >= MAX_IN_FLIGHT:
            self.results.append((-2, 0.0, False, False, time.time()))
            return
        try:
            sock = self.idle.pop() if self.idle else self._connect()
        except OSError:
            self.results.append((-1, time.monotonic() - now, False, False, time.time()))
            return
        exchange = Exchange(sock, self.request, now)
        self.in_flight[sock] = exchange
        self._send(exchange)

    def _connect(self) -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=5)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setblocking(False)
        return sock

    def _send(self, exchange: Exchange) -> None:
        try:
            sent = exchange.sock.send(exchange.out)
        except BlockingIOError:
            sent = 0
        except OSError:
            self._end(exchange, -1)
            return
        exchange.out = exchange.out[sent:]
        events = selectors.EVENT_WRITE if exchange.out else selectors.EVENT_READ
        try:
            self.selector.modify(exchange.sock, events, exchange)
        except KeyError:
            self.selector.register(exchange.sock, events, exchange)

    def _serve(self, wait: float) -> None:
        for key, events in self.selector.select(wait):
            exchange: Exchange = key.data
            if events & selectors.EVENT_WRITE:
                self._send(exchange)
            else:
                self._receive(exchange)
        self._expire()

    def _receive(self, exchange: Exchange) -> None:
        try:
            data = exchange.sock.recv(RECV_BYTES)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._end(exchange, -1)
            return
        exchange.data += data
        try:
            answer = exchange.answer()
        except ValueError:
            self._end(exchange, -1)
            return
        if answer is None:
            return
        status, head, body = answer
        seconds = time.monotonic() - exchange.started
        shed = status == 503 and b"overloaded" in body
        keep = b"\r\nconnection: close" not in head.lower() and len(self.idle) < MAX_IDLE
        self.results.append(
            (status, seconds, answer_is_json(head, body, status), shed, time.time())
        )
        self._release(exchange, keep)

    def _expire(self) -> None:
        now = time.monotonic()
        if not self.in_flight or now < self._next_scan:
            return
        self._next_scan = now + TIMEOUT_SCAN_SECONDS
        oldest = now - self.timeout
        for exchange in [e for e in self.in_flight.values() if e.started < oldest]:
            self._end(exchange, 0)

    def _end(self, exchange: Exchange, status: int) -> None:
        seconds = time.monotonic() - exchange.started
        self.results.append((status, seconds, False, False, time.time()))
        self._release(exchange, keep=False)

    def _release(self, exchange: Exchange, keep: bool) -> None:
        del self.in_flight[exchange.sock]
        self.selector.unregister(exchange.sock)
        if keep:
            self.idle.append(exchange.sock)
        else:
            exchange.sock.close()
