"""The traced peak of a reading, for the tests that bound a reader's memory."""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def traced_peak(read: Callable[[], T]) -> tuple[T, int]:
    """What ``read`` returns, and the peak of the allocations made while it ran."""
    gc.collect()
    tracemalloc.start()
    try:
        result = read()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
