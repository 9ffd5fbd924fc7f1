"""One connection of the bidirectional stream: the user's ``stream_handler(messages, context)``
run in the connection's own thread, the client's messages in, what it yields out, and the close
code that tells the client how the stream ended.

The handler is a plain generator: ``messages`` is an iterator that blocks until the client's
next message, and each value it yields is sent before the generator is resumed. Both
directions therefore move at the pace of the slower side: a handler that does not read leaves
the client's messages in the library's queue (bounded in bytes: ``stream_pump``), then in
the socket, until
TCP stops the client; a client that does not read stops the handler at its next ``send``.

How a stream ends (``StreamEnd``), in the order they are checked:

- the handler raised: 1011 with the exception's type and text (one log line);
- the handler yielded something that is not ``bytes`` or ``str``: 1011 naming the type;
- the client closed, or broke the protocol (the library has already closed the connection:
  1009 for a message over the limit, 1007 for text that is not UTF-8, 1002 for a bad frame):
  nothing more is sent; the generator is closed (``GeneratorExit`` at its ``yield``);
- no message passed either way for the idle timeout while the handler waited for one (a
  message that arrived while the handler was busy is never idle time):
  1001 with a reason naming ``SAGEMAKER_TFS_STREAM_IDLE_TIMEOUT_SECONDS``;
- the handler returned: 1000.
"""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple, Protocol

from websockets.exceptions import ConnectionClosed
from websockets.frames import CloseCode

logger = logging.getLogger(__name__)

Message = bytes | str
StreamHandler = Callable[[Iterator[Message], Any], Any]
# A close frame's reason: at most 123 bytes of UTF-8 (RFC 6455, 5.5: 125 with the code).
MAX_REASON_BYTES = 123
IDLE_VARIABLE = "SAGEMAKER_TFS_STREAM_IDLE_TIMEOUT_SECONDS"


class Connection(Protocol):
    """What a session uses of ``websockets.sync.server.ServerConnection``."""

    def recv(self, timeout: float | None = None) -> Message: ...

    def send(self, message: Message) -> None: ...


class StreamEnd(NamedTuple):
    """The close frame to send, or None when the connection is already closed."""

    code: int
    reason: str


class HandlerMisuse(TypeError):
    """The handler's return value or one of its yields is not a message stream."""


def close_reason(text: str) -> str:
    """``text`` cut to fit a close frame, on a character boundary."""
    data = text.encode("utf-8")
    if len(data) <= MAX_REASON_BYTES:
        return text
    return data[: MAX_REASON_BYTES - 3].decode("utf-8", errors="ignore") + "..."


class Activity:
    """When a message last passed either way, and so when the connection counts as idle."""

    def __init__(self, idle_seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.idle_seconds = idle_seconds
        self._clock = clock
        self._last = clock()

    def touch(self) -> None:
        self._last = self._clock()

    def remaining(self) -> float:
        return self._last + self.idle_seconds - self._clock()


class IncomingMessages(Iterator[Message]):
    """The handler's ``messages``: each message of the client (``bytes`` for a binary one,
    ``str`` for text) as it arrives. Iteration ends when the client closes the connection,
    when the connection breaks, or after the idle timeout; ``closed`` and ``idle`` say which."""

    def __init__(self, connection: Connection, activity: Activity) -> None:
        self._connection = connection
        self._activity = activity
        self.closed = False
        self.idle = False

    def __iter__(self) -> IncomingMessages:
        return self

    def __next__(self) -> Message:
        while not (self.closed or self.idle):
            try:  # a message already waiting is taken even past the deadline
                message = self._connection.recv(timeout=max(0.0, self._activity.remaining()))
            except TimeoutError:
                # a message sent meanwhile may have pushed the deadline back
                self.idle = self._activity.remaining() <= 0
                continue
            except ConnectionClosed:
                self.closed = True
                break
            self._activity.touch()
            return message
        raise StopIteration


def outgoing(message: object) -> Message:
    """A yielded value as a frame's payload: ``str`` goes as text, bytes-like as binary."""
    if isinstance(message, (str, bytes)):
        return message
    if isinstance(message, (bytearray, memoryview)):
        return bytes(message)
    raise HandlerMisuse(f"stream_handler yielded {type(message).__name__}: yield bytes or str")


def outgoing_iterator(result: object) -> Iterator[object]:
    """What the handler returned, as the iterator of its messages."""
    if result is None or isinstance(result, (str, bytes, bytearray, memoryview)):
        raise HandlerMisuse(
            f"stream_handler returned {type(result).__name__}: it must yield its messages "
            "(a generator, or any iterable of bytes or str)"
        )
    try:
        return iter(result)  # type: ignore[call-overload]
    except TypeError:
        raise HandlerMisuse(
            f"stream_handler returned {type(result).__name__}, which is not iterable"
        ) from None


def where_raised(error: BaseException) -> str:
    """``file.py:12`` of the innermost frame of ``error``'s traceback ('' without one)."""
    frames = traceback.extract_tb(error.__traceback__)
    if not frames:
        return ""
    frame = frames[-1]
    return f" at {frame.filename.rsplit('/', 1)[-1]}:{frame.lineno}"


def run_handler(
    connection: Connection,
    handler: StreamHandler,
    context: Any,
    idle_seconds: float,
    clock: Callable[[], float] = time.monotonic,
) -> StreamEnd | None:
    """Run ``handler`` over the connection's messages until the stream ends (see the module's
    docstring); the returned ``StreamEnd`` is for the caller to send."""
    activity = Activity(idle_seconds, clock)
    messages = IncomingMessages(connection, activity)
    try:
        send_all(connection, outgoing_iterator(handler(messages, context)), activity)
    except ConnectionClosed:
        return None
    except HandlerMisuse as error:
        logger.warning("%s", error)
        return StreamEnd(CloseCode.INTERNAL_ERROR, close_reason(str(error)))
    except Exception as error:  # noqa: BLE001 - the user's code: any error ends this stream only
        kind = type(error).__name__
        logger.warning("stream_handler raised %s%s: %s", kind, where_raised(error), error)
        reason = close_reason(f"stream_handler raised {kind}: {error}")
        return StreamEnd(CloseCode.INTERNAL_ERROR, reason)
    if messages.closed:
        return None
    if messages.idle:
        reason = f"no message for {activity.idle_seconds:g} s ({IDLE_VARIABLE})"
        return StreamEnd(CloseCode.GOING_AWAY, reason)
    return StreamEnd(CloseCode.NORMAL_CLOSURE, "")


def send_all(connection: Connection, messages: Iterator[object], activity: Activity) -> None:
    """Send each message as the handler yields it; the generator is closed (not drained) when
    the stream ends early, so its ``finally`` blocks run."""
    try:
        for message in messages:
            connection.send(outgoing(message))
            activity.touch()
    finally:
        close = getattr(messages, "close", None)
        if callable(close):
            close()
