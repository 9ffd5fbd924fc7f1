"""stream_session: one stream's handler run against a scripted connection (the protocol itself
is the websockets library's, exercised through the whole stack in
test/integration/stack/test_bidirectional_stream.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sagemaker_tfs.service.stream import stream_session
from sagemaker_tfs.service.stream.stream_session import (
    Activity,
    HandlerMisuse,
    IncomingMessages,
    StreamEnd,
    close_reason,
    outgoing,
    outgoing_iterator,
    run_handler,
)
from websockets.exceptions import ConnectionClosedOK
from websockets.frames import Close


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class ScriptedConnection:
    """Gives ``incoming`` one by one, then (``closes``) the client's close or a timeout; a
    timeout moves ``clock`` to the deadline asked. Sent messages are kept."""

    def __init__(self, incoming: list[bytes | str], closes: bool = True, clock=None) -> None:
        self.incoming = list(incoming)
        self.closes = closes
        self.clock = clock
        self.sent: list[bytes | str] = []
        self.timeouts: list[float | None] = []

    def recv(self, timeout: float | None = None) -> bytes | str:
        self.timeouts.append(timeout)
        if self.incoming:
            return self.incoming.pop(0)
        if self.closes:
            raise ConnectionClosedOK(Close(1000, ""), Close(1000, ""), True)
        if self.clock is not None and timeout is not None:
            self.clock.now += timeout
        raise TimeoutError

    def send(self, message: bytes | str) -> None:
        self.sent.append(message)


def echo(messages: Iterator[bytes | str], context: object) -> Iterator[bytes | str]:
    yield from messages


def test_close_reason_fits_a_frame_on_a_character_boundary() -> None:
    assert close_reason("short") == "short"
    cut = close_reason("é" * 100)  # 200 bytes
    assert len(cut.encode()) <= 123 and cut.endswith("...") and "\ufffd" not in cut


def test_outgoing_types() -> None:
    assert outgoing("text") == "text" and outgoing(b"bin") == b"bin"
    assert outgoing(bytearray(b"ab")) == b"ab" and outgoing(memoryview(b"cd")) == b"cd"
    with pytest.raises(HandlerMisuse, match="yielded dict: yield bytes or str"):
        outgoing({"a": 1})


@pytest.mark.parametrize("result", [None, "text", b"bytes", 5])
def test_a_handler_must_return_an_iterable_of_messages(result: object) -> None:
    with pytest.raises(HandlerMisuse, match="stream_handler returned"):
        outgoing_iterator(result)


def test_echo_until_the_client_closes() -> None:
    connection = ScriptedConnection(["a", b"b", "c"])
    assert run_handler(connection, echo, None, 300) is None  # closed by the client already
    assert connection.sent == ["a", b"b", "c"]


def test_a_handler_that_returns_ends_with_1000() -> None:
    def first_only(messages, context):
        yield next(messages).upper()

    connection = ScriptedConnection(["a", "b"])
    assert run_handler(connection, first_only, None, 300) == StreamEnd(1000, "")
    assert connection.sent == ["A"]


def test_a_handler_exception_ends_with_1011_and_one_log_line(caplog) -> None:
    def failing(messages, context):
        for message in messages:
            yield message
            raise KeyError("missing")

    connection = ScriptedConnection(["a", "b"])
    end = run_handler(connection, failing, None, 300)
    assert end == StreamEnd(1011, "stream_handler raised KeyError: 'missing'")
    assert connection.sent == ["a"]
    (record,) = [r for r in caplog.records if r.name == stream_session.__name__]
    assert "stream_handler raised KeyError at test_stream_session.py:" in record.getMessage()


def test_idle_ends_with_1001_after_the_timeout_without_messages() -> None:
    clock = Clock()
    connection = ScriptedConnection(["a"], closes=False, clock=clock)

    end = run_handler(connection, echo, None, 30, clock)
    assert end == StreamEnd(1001, "no message for 30 s (SAGEMAKER_TFS_STREAM_IDLE_TIMEOUT_SECONDS)")
    assert connection.sent == ["a"]
    assert connection.timeouts[-1] == pytest.approx(30)


def test_sending_pushes_the_idle_deadline_back() -> None:
    clock = Clock()
    activity = Activity(10, clock)
    clock.now += 8
    assert activity.remaining() == pytest.approx(2)
    activity.touch()
    assert activity.remaining() == pytest.approx(10)


def test_incoming_messages_end_for_good_once_closed() -> None:
    connection = ScriptedConnection(["x"])
    messages = IncomingMessages(connection, Activity(300))
    assert list(messages) == ["x"] and messages.closed
    assert list(messages) == [] and len(connection.timeouts) == 2


def test_a_client_gone_mid_stream_closes_the_generator_without_draining_it() -> None:
    produced: list[int] = []
    closed: list[bool] = []

    def endless(messages, context):
        try:
            n = 0
            while True:
                n += 1
                produced.append(n)
                yield str(n)
        finally:
            closed.append(True)

    class Leaving(ScriptedConnection):
        def send(self, message: bytes | str) -> None:
            if len(self.sent) == 3:
                raise ConnectionClosedOK(Close(1001, ""), Close(1001, ""), True)
            self.sent.append(message)

    connection = Leaving([])
    assert run_handler(connection, endless, None, 300) is None
    assert connection.sent == ["1", "2", "3"] and produced == [1, 2, 3, 4] and closed == [True]
