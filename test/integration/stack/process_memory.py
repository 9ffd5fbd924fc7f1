"""The peak memory of a running stack's processes over one request, from ``/proc``.

Before the request every process's peak RSS is reset (``/proc/PID/clear_refs``, Linux 4.0 or
later; root or the stack's owner may write it); after it, each one's growth is its peak
(``VmHWM``) less its RSS before. Used by tests that bound the memory of a body's path
(test_text_cliffs.py) and by test/perf/bench_large_bodies.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from whole_stack import Stack, cmdline, descendant_pids


def process_name(pid: int, supervisor: int) -> str:
    """What a process of the stack is, from its command line (nginx and gunicorn set titles)."""
    line = cmdline(pid)
    if pid == supervisor:
        return "serve (supervisor)"
    for marker, name in (
        ("nginx: master", "nginx master"),
        ("nginx: worker", "nginx worker"),
        ("standby", "standby model server"),
        ("model-server", "model server"),
        ("gunicorn: master", "gunicorn master"),
        ("gunicorn: worker", "gunicorn worker (the service)"),
    ):
        if marker in line:
            return name
    if "gunicorn" in line:
        return "gunicorn"
    return line[:40] or f"pid {pid}"


def status_kb(pid: int, field: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def stack_processes(stack: Stack) -> dict[int, str]:
    supervisor = stack.process.pid
    pids = [supervisor, *descendant_pids(supervisor)]
    return {pid: process_name(pid, supervisor) for pid in pids}


def reset_peaks(pids: list[int]) -> None:
    for pid in pids:
        try:
            Path(f"/proc/{pid}/clear_refs").write_text("5")
        except OSError as error:
            raise SystemExit(f"cannot reset the peak RSS of pid {pid}: {error}") from None


class Peaks:
    """Each process's RSS before and peak since (bytes), by pid, with its name."""

    def __init__(self, stack: Stack) -> None:
        self.names = stack_processes(stack)
        self.before = {pid: status_kb(pid, "VmRSS") * 1024 for pid in self.names}
        self.peak: dict[int, int] = {}

    def read(self) -> None:
        self.peak = {pid: status_kb(pid, "VmHWM") * 1024 for pid in self.names}

    def growth(self, pid: int) -> int:
        return max(0, self.peak[pid] - self.before[pid])

    def worst(self) -> tuple[str, int]:
        """The process that grew most, and by how many bytes."""
        pid = max(self.names, key=self.growth)
        return self.names[pid], self.growth(pid)


@contextmanager
def measured_peaks(stack: Stack) -> Iterator[Peaks]:
    """The peaks of the stack's processes over the ``with`` block."""
    peaks = Peaks(stack)
    reset_peaks(list(peaks.names))
    yield peaks
    peaks.read()
