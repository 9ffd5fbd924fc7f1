"""The collection after unloads: a closed graph's reference cycles are freed soon, not
hundreds of loads later."""

from __future__ import annotations

import gc
import time
import weakref

from sagemaker_tfs.model_server.serving.garbage import GarbageCollector


class Node:
    """Stands in for a graph: it and its operations refer to each other."""

    def __init__(self) -> None:
        self.other: object = self


def test_a_burst_of_unloads_is_collected_once_and_soon() -> None:
    gc.disable()  # as if no automatic full collection came along
    try:
        cycles = [Node() for _ in range(3)]
        refs = [weakref.ref(node) for node in cycles]
        del cycles
        assert all(ref() is not None for ref in refs)  # refcounting alone frees nothing
        collector = GarbageCollector(coalesce_seconds=0.1, min_interval_seconds=0.5)
        for _ in range(3):
            collector.collect_soon()
        deadline = time.monotonic() + 5
        while any(ref() is not None for ref in refs) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert all(ref() is None for ref in refs)
        time.sleep(0.3)
        assert collector.collections == 1
    finally:
        gc.enable()


def test_collections_are_spaced_out() -> None:
    collector = GarbageCollector(coalesce_seconds=0.01, min_interval_seconds=0.5)
    started = time.monotonic()
    collector.collect_soon()
    while collector.collections < 1:
        time.sleep(0.005)
    collector.collect_soon()  # right after the first: waits out the interval
    while collector.collections < 2:
        time.sleep(0.005)
    assert time.monotonic() - started >= 0.5
