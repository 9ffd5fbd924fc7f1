"""stream_pump: the library's incoming queue bounded in bytes, with the ``websockets`` server
and client over loopback (a handler held busy while the client sends, pings or floods), and
the keepalive's decisions against scripted connections (the whole stack's keepalive is
exercised in test/integration/stack/test_stream_as_sagemaker_opens_it.py)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from sagemaker_tfs.service.stream.stream_pump import (
    FRAME_OVERHEAD_BYTES,
    FramesByBytes,
    Keepalive,
    StreamConnection,
    StreamKeepalive,
    read_ahead_bytes,
)
from websockets.frames import Frame, Opcode
from websockets.sync.client import ClientConnection, connect
from websockets.sync.server import ServerConnection, serve

BUDGET = 64 << 10


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Pinged:
    """A connection that counts pings; each pong is answered or not as ``answers`` says."""

    def __init__(self, answers: bool) -> None:
        self.answers = answers
        self.pings = 0
        self.closed: tuple[int, str] | None = None

    def ping(self) -> threading.Event:
        self.pings += 1
        pong = threading.Event()
        if self.answers:
            pong.set()
        return pong

    def close(self, code: int = 1000, reason: str = "") -> None:
        self.closed = (code, reason)


def test_the_keepalive_pings_each_period_and_fails_on_an_unanswered_ping() -> None:
    clock, silent = Clock(), Pinged(answers=False)
    keepalive = Keepalive(silent, 20, clock)
    assert keepalive.wait_seconds() == 20 and keepalive.tick() and silent.pings == 0
    clock.now = 20
    assert keepalive.tick() and silent.pings == 1
    clock.now = 39
    assert keepalive.tick() and keepalive.wait_seconds() == pytest.approx(1)
    clock.now = 40
    assert keepalive.tick() is False


def test_a_held_back_reader_forgives_the_unanswered_ping() -> None:
    clock, silent = Clock(), Pinged(answers=False)
    keepalive = Keepalive(silent, 20, clock)
    clock.now = 20
    keepalive.tick()
    clock.now = 100
    keepalive.restart()  # reading was held back: the pong may be behind unread messages
    assert keepalive.tick() and keepalive.wait_seconds() == 20


def test_an_answering_client_is_never_failed_and_none_disables_the_keepalive() -> None:
    clock, answering = Clock(), Pinged(answers=True)
    keepalive = Keepalive(answering, 20, clock)
    for now in range(20, 400, 20):
        clock.now = now
        assert keepalive.tick()
    assert answering.pings == 19
    off = Keepalive(answering, None, clock)
    assert off.wait_seconds() is None and off.tick()


class HeldHandler:
    """A stream handler held busy until ``release``; then it counts the messages to the end and
    sends the count and the last one."""

    def __init__(self) -> None:
        self.connections: list[ServerConnection] = []
        self.opened = threading.Event()
        self.released = threading.Event()

    def __call__(self, connection: ServerConnection) -> None:
        self.connections.append(connection)
        self.opened.set()
        self.released.wait(60)
        count, last = 0, None
        for message in connection:
            if message == "end":
                break
            count, last = count + 1, message
        connection.send(f"{count} {last!r}")

    def stream(self) -> StreamConnection:
        assert isinstance(self.connections[0], StreamConnection)
        return self.connections[0]

    def queued_bytes(self) -> int:
        return self.stream().recv_messages.frames.qsize()


def wait_until(condition: Callable[[], bool], seconds: float = 10) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


@contextmanager
def held_stream(
    connection_class: type[ServerConnection] = StreamConnection,
    max_queue: int | tuple[int, int] = read_ahead_bytes(BUDGET),
) -> Iterator[tuple[HeldHandler, ClientConnection]]:
    handler = HeldHandler()
    with serve(
        handler,
        "127.0.0.1",
        0,
        create_connection=connection_class,
        max_queue=max_queue,
        max_size=BUDGET,
        ping_interval=None,
        compression=None,
    ) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        port = server.socket.getsockname()[1]
        with connect(f"ws://127.0.0.1:{port}", ping_interval=None, compression=None) as client:
            assert handler.opened.wait(10)
            try:
                yield handler, client
            finally:
                handler.released.set()
        server.shutdown()


def payload(frame: Frame | None) -> bytes:
    assert frame is not None
    return bytes(frame.data)


def test_the_queue_counts_each_frames_bytes_and_overhead() -> None:
    frames = FramesByBytes()
    frames.put(Frame(Opcode.BINARY, b"x" * 1000))
    frames.put(Frame(Opcode.TEXT, b""))
    frames.put(None)  # the library's end of the stream: no bytes
    assert frames.qsize() == 1000 + 2 * FRAME_OVERHEAD_BYTES
    assert payload(frames.get()) == b"x" * 1000 and frames.qsize() == FRAME_OVERHEAD_BYTES
    assert payload(frames.get(timeout=1)) == b"" and frames.get() is None and frames.qsize() == 0


def test_pings_are_answered_while_the_handler_is_busy_and_messages_wait() -> None:
    """100 messages wait (more than the library's 16 by default, less than the budget): the
    client's ping is still answered, and the handler then reads every message in order."""
    with held_stream() as (handler, client):
        for number in range(100):
            client.send(f"chunk {number}".encode() * 10)
        assert wait_until(lambda: handler.queued_bytes() > 100 * FRAME_OVERHEAD_BYTES)
        assert client.ping().wait(5)
        assert not handler.stream().reading_held()
        handler.released.set()
        client.send("end")
        assert client.recv(timeout=10) == f"100 {b'chunk 99' * 10!r}"


def test_the_librarys_message_count_would_leave_the_ping_unanswered() -> None:
    """The same stream on the library as configured before issue 54 (16 frames): the pong
    waits behind the messages (what the byte count above avoids)."""
    with held_stream(ServerConnection, max_queue=16) as (handler, client):
        for number in range(100):
            client.send(f"chunk {number}".encode() * 10)
        assert wait_until(lambda: handler.connections[0].recv_messages.paused)
        assert not client.ping().wait(1)


@pytest.mark.parametrize("size", [1000, 0])
def test_a_flood_while_the_handler_is_busy_stops_reading_at_the_budget(size: int) -> None:
    """A client that floods a busy handler: at most the budget, and the frames of the socket
    read that crossed it, wait in memory; reading stops, and the keepalive is told; nothing is
    lost."""
    total = 20 * BUDGET // (size + FRAME_OVERHEAD_BYTES)
    with held_stream() as (handler, client):

        def flood() -> None:
            for _ in range(total):
                client.send(b"f" * size)

        flooding = threading.Thread(target=flood, daemon=True)
        flooding.start()
        assert wait_until(lambda: handler.stream().recv_messages.paused)
        time.sleep(0.2)
        assert handler.stream().reading_held()
        one_read = handler.connections[0].recv_bufsize // (size + 6) + 1  # masked: 6 B header
        assert BUDGET < handler.queued_bytes() <= BUDGET + one_read * (size + FRAME_OVERHEAD_BYTES)
        handler.released.set()
        flooding.join(30)
        client.send("end")
        assert client.recv(timeout=30) == f"{total} {b'f' * size!r}"


class Watched(Pinged):
    """A connection whose reading is held as ``held`` says."""

    def __init__(self, answers: bool, held: bool) -> None:
        super().__init__(answers)
        self.held = held
        self.closed_event = threading.Event()

    def reading_held(self) -> bool:
        return self.held

    def close(self, code: int = 1000, reason: str = "") -> None:
        super().close(code, reason)
        self.closed_event.set()


def test_the_keepalive_thread_closes_a_silent_client_unless_reading_is_held() -> None:
    held = Watched(answers=False, held=True)
    keepalive = StreamKeepalive(held, 0.05).start()
    assert not held.closed_event.wait(0.5) and held.pings == 0
    keepalive.stop()
    silent = Watched(answers=False, held=False)
    StreamKeepalive(silent, 0.05).start()
    assert silent.closed_event.wait(5)
    assert silent.closed == (1011, "keepalive ping timeout") and silent.pings == 1


def test_an_answering_client_keeps_its_stream_and_stop_ends_the_thread() -> None:
    answering = Watched(answers=True, held=False)
    keepalive = StreamKeepalive(answering, 0.02).start()
    time.sleep(0.3)
    keepalive.stop()
    keepalive._thread.join(5)
    assert answering.closed is None and answering.pings >= 3 and not keepalive._thread.is_alive()
