"""Memory for multi-model loads: what is free, what a model will take, what it took.

The registry refuses a load with 507 when the model would not fit: before the load, from an
estimate (the size of the model's files in each process that loads it, plus the overhead
per model learned from the loads measured so far), and after it, from the memory actually
left. What a load took is measured as the growth of the resident set of the model server
processes that serve it (``ModelMemory``).
"""

from __future__ import annotations

import os
import threading
from collections import deque

from sagemaker_tfs.container_limits import CgroupView, memory_limit
from sagemaker_tfs.supervisor.processes.process_memory import proc_bytes

# Before any load has been measured: the overhead of one model in one model server besides
# its files (graph, session, bookkeeping). A loaded half_plus_three measures ~1 MB in the
# Python model server (docs/performance.md); a process per model teaches far more.
DEFAULT_OVERHEAD_BYTES = 16 * 1024 * 1024
# The overhead estimate is the largest of the last this many measured loads.
LEARNED_LOADS = 32


def cgroup_headroom(cgroups: CgroupView | None = None) -> int | None:
    """What the container's memory limit leaves (reclaimable file cache counted as free), or
    None without a limit: in a container run with ``--memory``, /proc/meminfo still shows
    the host's memory. Any cgroup layout (``container_limits.memory_limit``)."""
    limit = memory_limit(cgroups)
    return None if limit is None else limit.headroom()


def available_memory_bytes(
    meminfo: str = "/proc/meminfo", cgroups: CgroupView | None = None
) -> int | None:
    """The memory a new load may use: the smaller of MemAvailable and the cgroup's headroom."""
    free = (proc_bytes(meminfo, "MemAvailable"), cgroup_headroom(cgroups))
    return min((value for value in free if value is not None), default=None)


def files_bytes(base_path: str, versions: tuple[int, ...]) -> int:
    """The size of the files of the version directories of a model that will be served."""
    total = 0
    names = {int(entry.name): entry.path for entry in _version_entries(base_path)}
    for version in versions:
        for directory, _, files in os.walk(names.get(version, "")):
            for name in files:
                try:
                    total += os.stat(os.path.join(directory, name)).st_size
                except OSError:
                    continue
    return total


def _version_entries(base_path: str) -> list[os.DirEntry[str]]:
    try:
        return [entry for entry in os.scandir(base_path) if entry.name.isdigit()]
    except OSError:
        return []


class ModelMemory:
    """What a model will take (estimated before its load) and the overhead learned after."""

    def __init__(self) -> None:
        self._overheads: deque[int] = deque(maxlen=LEARNED_LOADS)
        self._lock = threading.Lock()

    def estimate(self, files: int, copies: int) -> int:
        """The model's files in each of ``copies`` processes, plus the overhead of a load."""
        with self._lock:
            overhead = max(self._overheads, default=DEFAULT_OVERHEAD_BYTES * copies)
        return files * copies + overhead

    def learn(self, measured: int, files: int, copies: int) -> None:
        """A load took ``measured`` bytes: what came on top of its files is the overhead."""
        with self._lock:
            self._overheads.append(max(0, measured - files * copies))
