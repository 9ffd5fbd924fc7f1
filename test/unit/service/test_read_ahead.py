"""sagemaker_tfs.service.codecs.numpy_codecs.read_ahead: a streamed answer's pieces received
ahead of sending."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator

import pytest
from sagemaker_tfs.service.codecs.numpy_codecs import read_ahead


def test_items_come_in_order_and_all() -> None:
    assert list(read_ahead(iter(range(100)), depth=3)) == list(range(100))


def test_the_reader_runs_ahead_by_depth_and_no_more() -> None:
    """While the consumer holds the first item, the reader takes ``depth`` more (the queue)
    plus the one it waits to put: memory stays bounded however long the answer."""
    taken: list[int] = []

    def source() -> Iterator[int]:
        for item in range(50):
            taken.append(item)
            yield item

    items = read_ahead(source(), depth=4)
    assert next(items) == 0
    deadline = time.monotonic() + 5
    while len(taken) < 6 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.2)  # room for a reader that would wrongly go on
    assert len(taken) == 6  # 0 consumed, 1-4 queued, 5 waiting for room
    assert list(items) == list(range(1, 50))


def test_an_error_of_the_source_is_raised_where_it_happened() -> None:
    def source() -> Iterator[int]:
        yield 1
        yield 2
        raise ConnectionError("the model server went away")

    items = read_ahead(source(), depth=2)
    assert [next(items), next(items)] == [1, 2]
    with pytest.raises(ConnectionError, match="went away"):
        next(items)


def test_a_consumer_that_stops_early_stops_the_reader_and_closes_the_source() -> None:
    closed = threading.Event()

    def source() -> Iterator[int]:
        try:
            yield from range(10**9)
        finally:
            closed.set()  # a gRPC answer's iterator being dropped: the call is cancelled

    items = read_ahead(source(), depth=2)
    assert next(items) == 0
    items.close()  # e.g. the client went away in the middle of the answer
    assert closed.wait(5)


def test_under_gevent_the_reader_is_a_greenlet_and_sending_overlaps_receiving() -> None:
    """gunicorn's gevent worker: while the consumer waits (sending to nginx), the reader
    greenlet receives."""
    script = textwrap.dedent("""
        from gevent import monkey
        monkey.patch_all()
        import time, gevent
        from sagemaker_tfs.service.codecs.numpy_codecs import read_ahead
        def source():
            for item in range(4):
                gevent.sleep(0.1)  # receiving one piece
                yield item
        start = time.monotonic()
        for item in read_ahead(source(), depth=4):
            gevent.sleep(0.1)  # sending it
        print(round(time.monotonic() - start, 1))
        """)
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert float(done.stdout) < 0.75  # one after the other would take 0.8 s
