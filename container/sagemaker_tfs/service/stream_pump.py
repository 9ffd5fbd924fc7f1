"""One stream's reader: the client's messages read as they arrive, whatever the handler does,
and the stream server's keepalive pings.

The ``websockets`` library reads a connection's frames in a thread of its own, but once 16
messages wait for the handler it stops reading the socket, and the pongs (and SageMaker's
pings) behind them go unread: a handler busy with a long model call while audio keeps
arriving had its stream closed by the keepalive (1011). ``MessagePump`` takes each message
from the library as soon as it is whole, into a queue bounded in bytes (``budget_bytes``, the
largest message the stream takes): control frames are read for as long as less than that
waits. Only beyond it does reading stop, so that memory stays bounded, and the keepalive
stops counting (a missed pong there says nothing about the client).

The keepalive: a ping every ``keepalive_seconds`` (``SAGEMAKER_TFS_STREAM_KEEPALIVE_SECONDS``,
None for none); a client that has not answered within as long, while reading went on, is
closed with 1011 ``keepalive ping timeout``.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Protocol

from websockets.exceptions import ConnectionClosed
from websockets.frames import CloseCode

Message = bytes | str
KEEPALIVE_REASON = "keepalive ping timeout"


class PumpedConnection(Protocol):
    """What the pump uses of ``websockets.sync.server.ServerConnection``."""

    def recv(self, timeout: float | None = None) -> Message: ...

    def send(self, message: Message) -> None: ...

    def ping(self) -> threading.Event: ...

    def close(self, code: int = CloseCode.NORMAL_CLOSURE, reason: str = "") -> None: ...


class BoundedMessages:
    """Messages waiting for the handler, at most ``budget_bytes`` of them (one more always
    fits when none waits, so a message of the largest size gets through)."""

    def __init__(self, budget_bytes: int) -> None:
        self.budget_bytes = budget_bytes
        self._messages: deque[Message] = deque()
        self._bytes = 0
        self._ended: ConnectionClosed | None = None
        self._stopped = False
        self._changed = threading.Condition()

    def put(self, message: Message) -> bool:
        """Queue ``message``, waiting for room; True when it had to wait."""
        waited = False
        with self._changed:
            while self._bytes >= self.budget_bytes and not self._stopped:
                waited = True
                self._changed.wait()
            self._messages.append(message)
            self._bytes += len(message)
            self._changed.notify_all()
        return waited

    def end(self, closed: ConnectionClosed) -> None:
        """No message will come after those queued: the connection closed."""
        with self._changed:
            self._ended = closed
            self._changed.notify_all()

    def stop(self) -> None:
        """The handler is done: the pump never waits for room again."""
        with self._changed:
            self._stopped = True
            self._changed.notify_all()

    def get(self, timeout: float | None) -> Message:
        """The next message; TimeoutError after ``timeout``, ConnectionClosed once the queued
        ones are taken and the connection has closed."""
        with self._changed:
            if not self._changed.wait_for(lambda: self._messages or self._ended, timeout):
                raise TimeoutError
            if self._messages:
                message = self._messages.popleft()
                self._bytes -= len(message)
                self._changed.notify_all()
                return message
            assert self._ended is not None
            raise self._ended


class Keepalive:
    """When to ping and whether the last ping went unanswered (None: no keepalive)."""

    def __init__(
        self,
        connection: PumpedConnection,
        seconds: float | None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._connection = connection
        self.seconds = seconds
        self._clock = clock
        self._pong: threading.Event | None = None
        self._next = clock() + seconds if seconds else float("inf")

    def restart(self) -> None:
        """Reading stopped for a while: the unanswered ping is forgiven, the next one is a
        full period away."""
        self._pong = None
        if self.seconds:
            self._next = self._clock() + self.seconds

    def wait_seconds(self) -> float | None:
        """How long the pump may wait for a message before ``tick`` is due."""
        if not self.seconds:
            return None
        return max(0.0, self._next - self._clock())

    def tick(self) -> bool:
        """Ping when it is time; False when the last ping's pong is overdue."""
        if not self.seconds or self._clock() < self._next:
            return True
        if self._pong is not None and not self._pong.is_set():
            return False
        self._pong = self._connection.ping()
        self._next = self._clock() + self.seconds
        return True


class MessagePump:
    """Reads the connection's messages into ``messages`` in a thread of its own and keeps the
    connection alive; ``recv`` and ``send`` are what the handler's session uses."""

    def __init__(
        self, connection: PumpedConnection, budget_bytes: int, keepalive_seconds: float | None
    ) -> None:
        self._connection = connection
        self.messages = BoundedMessages(budget_bytes)
        self.keepalive = Keepalive(connection, keepalive_seconds)
        self._thread = threading.Thread(target=self._run, name="stream-reader", daemon=True)

    def start(self) -> MessagePump:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.messages.stop()

    def recv(self, timeout: float | None = None) -> Message:
        return self.messages.get(timeout)

    def send(self, message: Message) -> None:
        self._connection.send(message)

    def _run(self) -> None:
        while True:
            try:
                message = self._connection.recv(timeout=self.keepalive.wait_seconds())
            except TimeoutError:
                pass
            except ConnectionClosed as closed:
                self.messages.end(closed)
                return
            else:
                if self.messages.put(message):
                    self.keepalive.restart()
            self._keep_alive()

    def _keep_alive(self) -> None:
        """Ping when it is time; close a client that left the last ping unanswered (a
        connection closed meanwhile is seen at the next ``recv``)."""
        try:
            if not self.keepalive.tick():
                self._connection.close(CloseCode.INTERNAL_ERROR, KEEPALIVE_REASON)
        except ConnectionClosed:
            pass
