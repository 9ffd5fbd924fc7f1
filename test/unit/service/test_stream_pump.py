"""stream_pump: the byte-bounded queue of a stream's messages and the keepalive's decisions,
against scripted connections (the real socket and library are exercised through the whole
stack in test/integration/stack/test_stream_as_sagemaker_opens_it.py)."""

from __future__ import annotations

import threading
import time

import pytest
from sagemaker_tfs.service.stream_pump import BoundedMessages, Keepalive, MessagePump
from websockets.exceptions import ConnectionClosedOK
from websockets.frames import Close


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


def test_messages_wait_in_order_up_to_the_budget() -> None:
    queue = BoundedMessages(10)
    assert queue.put(b"12345") is False and queue.put("678") is False
    filled = threading.Event()

    def put_more() -> None:
        queue.put(b"abcdef")  # 8 bytes wait: fits (the budget is not reached yet)
        queue.put(b"over")  # 14 bytes wait: waits for room
        filled.set()

    threading.Thread(target=put_more, daemon=True).start()
    assert not filled.wait(0.3)
    assert queue.get(1) == b"12345"
    assert filled.wait(5)
    assert [queue.get(1) for _ in range(3)] == ["678", b"abcdef", b"over"]
    with pytest.raises(TimeoutError):
        queue.get(0.05)


def test_a_message_larger_than_the_budget_passes_when_none_waits() -> None:
    queue = BoundedMessages(4)
    assert queue.put(b"x" * 100) is False
    assert queue.get(0) == b"x" * 100


def test_the_end_comes_after_the_queued_messages_and_stop_frees_the_writer() -> None:
    queue = BoundedMessages(1)
    queue.put(b"last")
    closed = ConnectionClosedOK(Close(1000, ""), Close(1000, ""), True)
    queue.end(closed)
    assert queue.get(0) == b"last"
    with pytest.raises(ConnectionClosedOK):
        queue.get(0)
    queue.put(b"fills it")
    queue.stop()
    started = time.monotonic()
    queue.put(b"never read")  # over the budget, yet returns at once: nobody reads any more
    assert time.monotonic() - started < 1


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


class Scripted(Pinged):
    """Gives ``incoming`` then closes (the client's close)."""

    def __init__(self, incoming: list[bytes | str]) -> None:
        super().__init__(answers=True)
        self.incoming = list(incoming)

    def recv(self, timeout: float | None = None) -> bytes | str:
        if self.incoming:
            return self.incoming.pop(0)
        raise ConnectionClosedOK(Close(1000, ""), Close(1000, ""), True)

    def send(self, message: bytes | str) -> None:
        pass


def test_the_pump_reads_ahead_of_the_handler_then_reports_the_close() -> None:
    connection = Scripted(["a", b"b", "c"])
    pump = MessagePump(connection, 1 << 20, 20).start()
    time.sleep(0.1)
    assert connection.incoming == []  # read before anyone asked
    assert [pump.recv(1) for _ in range(3)] == ["a", b"b", "c"]
    with pytest.raises(ConnectionClosedOK):
        pump.recv(1)
