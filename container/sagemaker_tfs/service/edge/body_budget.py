"""Large request bodies served a few at a time, in the order they came.

A large body costs several times its size while it is served (the body read, the tensor, the
request to the model server, the model server's own copies, the answer), and on a machine's
few cores serving many at once is no faster than serving them in turn, only larger. Measured
with 100 MB ``.npy`` bodies on 2 cores (docs/performance.md): one at a time 2.9-3.4 answers a
second, eight at once 2.0-2.7, and at 32 at once every answer took longer than 8 s while the
stack's memory peaked at 8 GB.

So a body of ``LARGE_BODY_BYTES`` or more takes a share of a byte budget
(``SAGEMAKER_TFS_MAX_BODY_MB_IN_FLIGHT``) before it is read, and gives it back once its answer
is sent. One that does not fit waits, still in nginx's temp file, behind the large bodies
that came before it; one larger than the whole budget is served alone, so any body the stack
accepts is served. A request whose deadline passes while it waits is shed (503, "expired"),
as everywhere else. Smaller bodies never wait here: ``max_concurrent_invocations`` bounds them.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator

LARGE_BODY_BYTES = 1 << 20


class BodyBudget:
    """Bytes of large bodies being served at once by this worker, at most ``limit_bytes``
    (0: no bound). Waiting is first come, first served. Under gunicorn's gevent worker,
    ``threading`` is patched to be cooperative, so waiting requests wait as greenlets.
    ``on_waiting``: told how many wait each time that changes (the metrics' gauge)."""

    def __init__(self, limit_bytes: int, on_waiting: Callable[[int], None] | None = None) -> None:
        self.limit_bytes = limit_bytes
        self.in_use = 0
        self._on_waiting = on_waiting
        self._line: deque[object] = deque()
        self._changed = threading.Condition()

    def counts(self, size: int) -> bool:
        """Whether a body of ``size`` bytes takes a share (and may wait)."""
        return self.limit_bytes > 0 and size >= LARGE_BODY_BYTES

    def take(self, size: int, timeout: float | None) -> bool:
        """Wait until ``size`` fits, after those that waited before; False if ``timeout``
        seconds passed first (None: wait as long as it takes)."""
        ticket = object()
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._changed:
            if not self._line and self._fits(size):
                self.in_use += size
                return True
            self._line.append(ticket)
            self._report_waiting()
            try:
                while self._line[0] is not ticket or not self._fits(size):
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        return False
                    self._changed.wait(remaining)
                self.in_use += size
                return True
            finally:
                self._line.remove(ticket)
                self._report_waiting()
                self._changed.notify_all()

    def give_back(self, size: int) -> None:
        with self._changed:
            self.in_use -= size
            self._changed.notify_all()

    def waiting(self) -> int:
        with self._changed:
            return len(self._line)

    def _report_waiting(self) -> None:
        if self._on_waiting is not None:
            self._on_waiting(len(self._line))

    def _fits(self, size: int) -> bool:
        return self.in_use == 0 or self.in_use + size <= self.limit_bytes


class GivenBackWhenClosed:
    """An answer's chunks, as a WSGI iterable whose ``close`` (which the server calls once
    the answer is sent, or the client gone) gives the body's share back. A class rather than
    a generator: a generator closed before its first chunk would never run its ``finally``."""

    def __init__(self, chunks: Iterable[bytes], give_back: Callable[[], None]) -> None:
        self._chunks: Iterator[bytes] = iter(chunks)
        self._give_back: Callable[[], None] | None = give_back

    def __iter__(self) -> GivenBackWhenClosed:
        return self

    def __next__(self) -> bytes:
        return next(self._chunks)

    def close(self) -> None:
        give_back, self._give_back = self._give_back, None
        if give_back is None:
            return
        try:
            close = getattr(self._chunks, "close", None)
            if close is not None:
                close()
        finally:
            give_back()
