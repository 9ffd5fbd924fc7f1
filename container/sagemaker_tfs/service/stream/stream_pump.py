"""One stream's reading, bounded in bytes, and the stream server's keepalive pings.

The ``websockets`` library reads a connection's frames in a thread of its own and queues
them for the handler. Out of the box it stops reading the socket once 16 frames wait, and
the pongs (and SageMaker's pings) behind them go unread: a handler busy with a long model
call while audio keeps arriving had its stream closed by the keepalive (1011).
``StreamConnection`` makes the library's queue count bytes instead of frames, so that the
server's ``max_queue=(high, low)`` (``read_ahead_bytes``: the largest message a stream
takes) bounds what waits in memory (that, and the frames of the one socket read, at most
64 KiB of wire, that crossed it): control frames are read for as long as no more waits, and
only beyond it does reading stop. The handler reads the library's queue itself, so a message
costs no thread hand-off of ours (a reader thread between them cost 15-25% of the messages
per second with many streams at once).

The keepalive (``StreamKeepalive``, a thread per stream that sleeps between pings): a ping
every ``keepalive_seconds`` (``SAGEMAKER_TFS_STREAM_KEEPALIVE_SECONDS``, None for none); a
client that has not answered within as long, while reading went on, is closed with 1011
``keepalive ping timeout``. A period in which reading stopped for the byte bound does not
count (a missed pong there says nothing about the client).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from websockets.exceptions import ConnectionClosed
from websockets.frames import CloseCode, Frame
from websockets.sync.server import ServerConnection

KEEPALIVE_REASON = "keepalive ping timeout"
# What a queued frame costs beside its payload (the frame object and its bytes object): empty
# messages count too, so that a flood of them is bounded as well.
FRAME_OVERHEAD_BYTES = 200


def read_ahead_bytes(budget_bytes: int) -> tuple[int, int]:
    """The server's ``max_queue`` once its queue counts bytes: reading stops once more than
    ``budget_bytes`` wait and resumes when the handler has taken them down to a quarter."""
    return budget_bytes, budget_bytes // 4


class FramesByBytes(queue.SimpleQueue[Frame | None]):
    """The library's queue of incoming frames, its ``qsize`` the bytes they hold (what the
    library's high and low water marks compare)."""

    def __init__(self) -> None:
        self._bytes = 0
        self._count = threading.Lock()

    def put(self, item: Frame | None, block: bool = True, timeout: float | None = None) -> None:
        if item is not None:
            with self._count:
                self._bytes += len(item.data) + FRAME_OVERHEAD_BYTES
        super().put(item, block, timeout)

    def get(self, block: bool = True, timeout: float | None = None) -> Frame | None:
        item: Frame | None = super().get(block, timeout)
        if item is not None:
            with self._count:
                self._bytes -= len(item.data) + FRAME_OVERHEAD_BYTES
        return item

    def qsize(self) -> int:
        return self._bytes


class StreamConnection(ServerConnection):
    """The library's server connection, its incoming queue bounded in bytes; ``reading_held``
    tells whether reading stopped for that bound since it was last asked."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._held = False
        assembler = self.recv_messages
        with assembler.mutex:  # before the handshake: no frame can have been queued yet
            assert assembler.frames.empty()
            assembler.frames = FramesByBytes()
            pause = assembler.pause

            def pause_and_note() -> None:
                self._held = True
                pause()

            assembler.pause = pause_and_note

    def reading_held(self) -> bool:
        """Whether reading stopped (or is stopped) since the last call."""
        held, self._held = self._held, self.recv_messages.paused
        return held or self._held


class Pinger(Protocol):
    """What ``Keepalive`` uses of the connection."""

    def ping(self) -> threading.Event: ...


class KeptAlive(Pinger, Protocol):
    """What ``StreamKeepalive`` uses of the connection (``StreamConnection``)."""

    def close(self, code: int = CloseCode.NORMAL_CLOSURE, reason: str = "") -> None: ...

    def reading_held(self) -> bool: ...


class Keepalive:
    """When to ping and whether the last ping went unanswered (None: no keepalive)."""

    def __init__(
        self,
        connection: Pinger,
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
        """How long until ``tick`` is due."""
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


class StreamKeepalive:
    """Pings the connection in a thread of its own until ``stop``; closes a client that left
    a ping unanswered while reading went on."""

    def __init__(self, connection: KeptAlive, seconds: float | None) -> None:
        self._connection = connection
        self.keepalive = Keepalive(connection, seconds)
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stream-keepalive", daemon=True)

    def start(self) -> StreamKeepalive:
        if self.keepalive.seconds:
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stopped.set()

    def _run(self) -> None:
        while not self._stopped.wait(self.keepalive.wait_seconds()):
            if self._connection.reading_held():
                self.keepalive.restart()
            elif not self._keep_alive():
                return

    def _keep_alive(self) -> bool:
        """Ping when it is time; False once the connection is closed or closing."""
        try:
            if self.keepalive.tick():
                return True
            self._connection.close(CloseCode.INTERNAL_ERROR, KEEPALIVE_REASON)
        except ConnectionClosed:
            pass
        return False
