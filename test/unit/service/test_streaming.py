"""A handler's iterator as a streamed answer (service/handlers/streaming.py,
invoke._handler_result): started before anything is sent, passed on chunk by chunk, cut short
when it fails, closed (not drained) when the client goes away, each ending counted."""

from __future__ import annotations

import errno
from collections.abc import Iterator
from typing import Any

import falcon
import pytest
from sagemaker_tfs.service.handlers.streaming import (
    CLOSED,
    COMPLETE,
    FAILED,
    PIECE_BYTES,
    HandlerStream,
    as_chunk,
    is_stream,
)
from sagemaker_tfs.service.metrics import InvocationRecord


class Outcomes(InvocationRecord):
    """A record that keeps the streamed outcomes it is told of."""

    def __init__(self) -> None:
        super().__init__(None, falcon.Response())
        self.outcomes: list[str] = []

    def streamed(self, outcome: str) -> None:
        self.outcomes.append(outcome)


class Tracked:
    """A generator's progress: how many chunks it gave and whether it was closed."""

    def __init__(self) -> None:
        self.given = 0
        self.closed = False

    def chunks(self, *chunks: Any, then: BaseException | None = None) -> Iterator[Any]:
        try:
            for chunk in chunks:
                self.given += 1
                yield chunk
            if then is not None:
                raise then
        except GeneratorExit:
            self.closed = True
            raise


def started(source: Iterator[Any], record: Outcomes) -> HandlerStream:
    return HandlerStream(source, "inference.py handler", record).start()


@pytest.mark.parametrize(
    ("body", "stream"),
    [(iter([b"a"]), True), ((c for c in "ab"), True), (map(str, [1]), True), (b"ab", False),
     ("ab", False), ([b"a"], False), ({"a": 1}, False), ((b"a", "text/plain"), False)],
)  # fmt: skip
def test_only_iterators_are_streams(body: Any, stream: bool) -> None:
    assert is_stream(body) is stream


def test_chunks_as_bytes() -> None:
    assert as_chunk("é") == "é".encode()
    assert as_chunk(bytearray(b"ab")) == b"ab" and as_chunk(memoryview(b"cd")) == b"cd"
    with pytest.raises(TypeError, match="must be bytes or str, got dict"):
        as_chunk({"a": 1})


def test_the_first_chunk_is_taken_before_anything_is_sent() -> None:
    record, tracked = Outcomes(), Tracked()
    stream = started(tracked.chunks(b"", "one", b"two"), record)
    assert tracked.given == 2  # the empty chunk is passed over, "one" taken
    assert list(stream.chunks()) == [b"one", b"two"]
    assert record.outcomes == [COMPLETE]


def test_an_error_before_the_first_chunk_is_raised_by_start() -> None:
    tracked = Tracked()
    with pytest.raises(ValueError, match="early"):
        started(tracked.chunks(then=ValueError("early")), Outcomes())


def test_a_bad_first_chunk_closes_the_generator() -> None:
    tracked = Tracked()
    with pytest.raises(TypeError):
        started(tracked.chunks(3, b"never"), Outcomes())
    assert tracked.closed


@pytest.mark.parametrize("failure", [RuntimeError("midway"), None])
def test_a_failure_midway_resets_the_connection(
    failure: Exception | None, caplog: pytest.LogCaptureFixture
) -> None:
    """A raise, or a chunk of the wrong type: the chunks so far, then ConnectionResetError,
    which gunicorn answers by closing the connection without the terminating chunk."""
    record, tracked = Outcomes(), Tracked()
    source = tracked.chunks(b"a", b"b", then=failure) if failure else tracked.chunks(b"a", 7)
    chunks = started(source, record).chunks()
    assert next(chunks) == b"a"
    if failure:
        assert next(chunks) == b"b"
    with pytest.raises(ConnectionResetError) as raised:
        next(chunks)
    assert raised.value.errno == errno.ECONNRESET
    assert record.outcomes == [FAILED]
    assert "streamed answer of inference.py handler cut short" in caplog.text
    assert ("RuntimeError: midway" if failure else "TypeError") in caplog.text


def test_a_client_that_leaves_closes_the_generator_without_draining_it() -> None:
    record, tracked = Outcomes(), Tracked()
    chunks = started(tracked.chunks(*[b"x"] * 1000), record).chunks()
    assert [next(chunks), next(chunks)] == [b"x", b"x"]
    chunks.close()  # what gunicorn does when a write to nginx fails
    assert tracked.closed and tracked.given == 2
    assert record.outcomes == [CLOSED]


def test_large_chunks_go_out_in_pieces() -> None:
    chunk = bytes(range(256)) * (PIECE_BYTES // 128 + 1)  # two pieces and a bit
    pieces = list(started(iter([chunk]), Outcomes()).chunks())
    assert [len(piece) for piece in pieces] == [PIECE_BYTES, PIECE_BYTES, len(chunk) % PIECE_BYTES]
    assert b"".join(pieces) == chunk


def test_an_empty_iterator_is_an_empty_answer() -> None:
    record = Outcomes()
    assert list(started(iter([]), record).chunks()) == []
    assert record.outcomes == [COMPLETE]
