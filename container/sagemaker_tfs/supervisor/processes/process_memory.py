"""What a process holds in memory, read from ``/proc`` (the stack's metrics, the multi-model
registry's measure of what a load took)."""

from __future__ import annotations


def proc_bytes(path: str, field: str) -> int | None:
    """The ``field: N kB`` line of a /proc file (meminfo, a process's status) in bytes, or
    None where it cannot be read."""
    try:
        with open(path, encoding="ascii") as stream:
            for line in stream:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def process_rss_bytes(pid: int | None) -> int:
    """The resident set of process ``pid`` (0 when it is gone or ``pid`` is None)."""
    return 0 if pid is None else proc_bytes(f"/proc/{pid}/status", "VmRSS") or 0
