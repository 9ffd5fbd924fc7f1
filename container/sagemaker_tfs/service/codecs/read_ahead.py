"""A streamed answer's pieces read from the model server ahead of sending them.

Passing an answer on piece by piece in one loop makes the two hops take turns: while the
worker waits for nginx to take a piece, nobody asks gRPC for the next one, so the model server
stops for lack of flow-control window; while the worker waits for the next piece, the
connection to nginx is idle. ``read_ahead`` receives in a thread of its own (a greenlet under
gunicorn's gevent worker, whose monkey-patching makes ``threading`` and ``queue`` cooperative)
into a queue of a few pieces, so both hops move at once while the memory held stays bounded:
at most ``depth`` pieces besides the one being sent.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from typing import TypeVar

T = TypeVar("T")

# 4 pieces of the streamed Predict's 1 MiB: 4 MiB more held at most. Other depths were not
# measured; the gain itself was 3-7% on a 55 MB answer, on a loaded machine
# (docs/performance.md, "The 55 MB answer again").
DEPTH = 4

_END = object()


class _Failure:
    def __init__(self, error: BaseException) -> None:
        self.error = error


def read_ahead(items: Iterator[T], depth: int = DEPTH) -> Iterator[T]:
    """``items``, pulled by a reader thread up to ``depth`` ahead of the consumer. An error of
    ``items`` is raised to the consumer at its place; a consumer that stops early (a client
    gone) stops the reader too, which then drops ``items`` (cancelling a gRPC call)."""
    pending: queue.Queue[object] = queue.Queue(maxsize=depth)
    stopped = threading.Event()
    reader = threading.Thread(target=_read, args=(items, pending, stopped), daemon=True)
    reader.start()
    try:
        while True:
            item = pending.get()
            if item is _END:
                return
            if isinstance(item, _Failure):
                raise item.error
            yield item  # type: ignore[misc]
    finally:
        stopped.set()
        _drain(pending)


def _read(items: Iterator[T], pending: queue.Queue[object], stopped: threading.Event) -> None:
    try:
        for item in items:
            if not _put(pending, item, stopped):
                return
        _put(pending, _END, stopped)
    except BaseException as error:  # noqa: BLE001 - handed to the consumer, raised there
        _put(pending, _Failure(error), stopped)


def _put(pending: queue.Queue[object], item: object, stopped: threading.Event) -> bool:
    """Waits for room unless the consumer has gone; whether the item was queued."""
    while not stopped.is_set():
        try:
            pending.put(item, timeout=0.5)
            return True
        except queue.Full:
            continue
    return False


def _drain(pending: queue.Queue[object]) -> None:
    """Empties the queue so that a reader blocked on a full one sees ``stopped`` at once."""
    while True:
        try:
            pending.get_nowait()
        except queue.Empty:
            return
