"""The collection after unloads: a closed graph's reference cycles are freed soon, not
hundreds of loads later."""

from __future__ import annotations

import gc
import time
import weakref

from sagemaker_tfs.model_server.garbage import GarbageCollector


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
        collector = GarbageCollector(coalesce_seconds=0.1)
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
