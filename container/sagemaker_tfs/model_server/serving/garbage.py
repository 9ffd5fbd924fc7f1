"""Giving the memory of unloaded models back, and keeping Python's collector cheap.

A loaded version's ``tf.Graph`` is a web of reference cycles (graph <-> operations <->
tensors), so closing it frees nothing until Python's cyclic collector runs a full
collection, which it does only once the objects that survived since the last one grow by a
quarter: with a thousand models loaded, the memory of unloaded ones came back hundreds of
loads later (docs/performance.md). ``collect_soon`` runs that collection in the background
shortly after an unload, then hands freed heap pages back to the kernel (glibc's
``malloc_trim``), so an unload frees its memory within a second, or within
``MIN_INTERVAL_SECONDS`` of the previous collection: with a thousand models loaded a full
collection holds the GIL for a few hundred milliseconds, and a stream of unloads must not
turn into a stream of those.

A full collection walks every tracked object: TensorFlow's import alone leaves ~275,000 of
them, which never become garbage. ``freeze_imports`` moves them out of the collector's
sight (``gc.freeze``), so each full collection, whether ours or automatic, only walks what
the loaded models and requests made.
"""

from __future__ import annotations

import ctypes
import gc
import logging
import threading
import time

logger = logging.getLogger(__name__)

# Unloads this close together share one collection.
COALESCE_SECONDS = 0.2
# At most one collection this often, however many unloads come.
MIN_INTERVAL_SECONDS = 5.0


def freeze_imports() -> None:
    """Leave everything allocated so far (TensorFlow's import) out of every collection."""
    gc.collect()
    gc.freeze()


def _load_malloc_trim():  # type: ignore[no-untyped-def]
    try:
        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None


_malloc_trim = _load_malloc_trim()


def trim_heap() -> None:
    """Hand the heap's free pages back to the kernel (glibc's ``malloc_trim``; nothing
    elsewhere): freed arrays under glibc's mmap threshold stay in the heap, counted in RSS."""
    if _malloc_trim is not None:
        _malloc_trim(0)


class GarbageCollector:
    """One background thread that runs a full collection after each burst of unloads."""

    def __init__(
        self,
        coalesce_seconds: float = COALESCE_SECONDS,
        min_interval_seconds: float = MIN_INTERVAL_SECONDS,
    ) -> None:
        self._coalesce = coalesce_seconds
        self._min_interval = min_interval_seconds
        self._wanted = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.collections = 0

    def collect_soon(self) -> None:
        """Ask for a collection; returns at once."""
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="gc", daemon=True)
                self._thread.start()
        self._wanted.set()

    def _run(self) -> None:
        last = -self._min_interval
        while True:
            self._wanted.wait()
            time.sleep(max(self._coalesce, last + self._min_interval - time.monotonic()))
            self._wanted.clear()
            started = last = time.monotonic()
            freed = gc.collect()
            trim_heap()
            self.collections += 1
            logger.debug(
                "collected %d objects in %.0f ms", freed, (time.monotonic() - started) * 1000
            )


COLLECTOR = GarbageCollector()
