"""Deadlines of the REST requests that run on their connection's own thread.

TF Serving answers a REST prediction that outlives ``--rest_api_timeout_in_ms`` with 504 at
its deadline, while the run goes on to its end. Handing every prediction to another thread to
be able to answer at the deadline cost ~0.1 ms a request, a fifth of a small prediction
(docs/performance.md); instead the request runs where it was read, and one watcher thread per
server answers for the few that are still running at their deadline.

Requests are watched in the order they started; all of a server's requests have the same
timeout, so that is also the order of their deadlines, and the watcher only ever looks at the
oldest one still running. A finished request is dropped from the front when a new one comes,
so the queue holds no more than the requests started since the oldest one still running.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable


class Watch:
    """One request's deadline. Exactly one of the two happens: the request finishes first
    (``finish`` returns True: its thread answers), or the deadline passes first (the watcher
    calls ``on_expiry``, which answers 504; ``finish`` then waits for that answer to be written
    and returns False).

    One lock does both: the watcher holds it from the state's change until the 504 is written,
    so ``finish`` taking it also waits for that answer (an ``Event`` beside it cost ~5 us a
    request to make).
    """

    __slots__ = ("deadline", "_on_expiry", "_state", "_lock")

    RUNNING, FINISHED, EXPIRED = range(3)

    def __init__(self, deadline: float, on_expiry: Callable[[], None]) -> None:
        self.deadline = deadline
        self._on_expiry = on_expiry
        self._state = Watch.RUNNING
        self._lock = threading.Lock()

    @property
    def running(self) -> bool:
        return self._state == Watch.RUNNING

    def finish(self) -> bool:
        with self._lock:
            if self._state == Watch.RUNNING:
                self._state = Watch.FINISHED
                return True
        return False

    def expire(self) -> None:
        with self._lock:
            if self._state != Watch.RUNNING:
                return
            self._state = Watch.EXPIRED
            self._on_expiry()


class DeadlineWatcher:
    """The watcher thread of one server, started with its first request."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._watches: collections.deque[Watch] = collections.deque()
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None

    def watch(self, timeout: float, on_expiry: Callable[[], None]) -> Watch:
        watch = Watch(time.monotonic() + timeout, on_expiry)
        with self._changed:
            while self._watches and not self._watches[0].running:
                self._watches.popleft()
            self._watches.append(watch)
            if len(self._watches) == 1:
                self._changed.notify()
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
        return watch

    def _run(self) -> None:
        while True:
            self._next_expired().expire()

    def _next_expired(self) -> Watch:
        """The oldest request still running once its deadline has passed."""
        with self._changed:
            while True:
                while self._watches and not self._watches[0].running:
                    self._watches.popleft()
                if not self._watches:
                    self._changed.wait()
                    continue
                oldest = self._watches[0]
                delay = oldest.deadline - time.monotonic()
                if delay <= 0:
                    return self._watches.popleft()
                self._changed.wait(delay)
