"""The container's CPU and memory limits, read from the process's own cgroups.

One CPU count sizes the whole stack (``cpu_count``): the CPU quota rounded up, or the affinity
mask, whichever is smaller, at least 1. ``os.cpu_count()`` is neither: a container run with
``--cpus 1`` (or a SageMaker inference component given 1 core of a 96-core instance) sees every
core of the machine there, so pools sized by it hold threads the quota never lets run at once.

The process's cgroup is found as the kernel shows it: ``/proc/self/cgroup`` gives its path in
each hierarchy (``0::/path`` for cgroup v2, ``N:cpu,cpuacct:/path`` for each v1 hierarchy),
``/proc/self/mountinfo`` where each hierarchy is mounted and which part of it (the mount's
root: ``/`` under a cgroup namespace, the container's own path when the host's tree is
bind-mounted). All three layouts are read the same way: v2 alone, v1 alone, and the hybrid
one (v1 controllers plus an empty v2 tree at ``/sys/fs/cgroup/unified``, as on the machines
whose podman runs this project's container tests). A limit may sit on an ancestor of the
process's cgroup (a systemd slice, a pod), so every directory from the process's cgroup up to
the mount point counts, and the smallest limit wins.

Everything is read under ``CgroupView.root`` (``/``), so tests point it at a fake tree.
"""

from __future__ import annotations

import functools
import math
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

# cgroup v1 writes "no limit" as the largest page-aligned 63-bit number (9223372036854771712
# with 4 KiB pages); anything from 2^62 bytes up is no real limit.
V1_UNLIMITED_BYTES = 1 << 62
_MOUNTINFO_ESCAPE = re.compile(r"\\([0-7]{3})")


@dataclass(frozen=True)
class Hierarchy:
    """One mounted cgroup hierarchy the process is in: its version (1 or 2), its controllers
    (v1: the mount's options; v2: empty, any may be enabled), the directory of the process's
    cgroup and the mount point (the highest ancestor visible here)."""

    version: int
    controllers: frozenset[str]
    directory: Path
    mount_point: Path

    def ancestry(self) -> Iterator[Path]:
        """The process's cgroup directory, then each parent up to the mount point."""
        directory = self.directory
        yield directory
        while directory != self.mount_point and self.mount_point in directory.parents:
            directory = directory.parent
            yield directory


class CgroupView:
    """The cgroup hierarchies of this process, read from files under ``root``."""

    def __init__(self, root: str | os.PathLike[str] = "/") -> None:
        self.root = Path(root)

    def _under_root(self, path: str) -> Path:
        return self.root / path.lstrip("/")

    def _read(self, path: str) -> str:
        try:
            return self._under_root(path).read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def membership(self) -> dict[frozenset[str], str]:
        """``/proc/self/cgroup``: the controllers of each hierarchy -> the process's path in it
        (cgroup v2's line ``0::/path`` is the empty set)."""
        paths: dict[frozenset[str], str] = {}
        for line in self._read("/proc/self/cgroup").splitlines():
            parts = line.split(":", 2)
            if len(parts) == 3:
                controllers = frozenset(name for name in parts[1].split(",") if name)
                paths[controllers] = parts[2]
        return paths

    def hierarchies(self) -> list[Hierarchy]:
        """Every mounted hierarchy the process belongs to, v1 ones first, each once."""
        membership = self.membership()
        found: dict[frozenset[str], Hierarchy] = {}
        for mount_root, mount_point, fstype, options in _cgroup_mounts(
            self._read("/proc/self/mountinfo")
        ):
            if fstype == "cgroup2":
                controllers: frozenset[str] = frozenset()
            else:
                listed = [set_ for set_ in membership if set_ and set_ <= options]
                if not listed:
                    continue
                controllers = max(listed, key=len)
            if controllers in found or controllers not in membership:
                continue
            point = self._under_root(mount_point)
            directory = _cgroup_directory(point, mount_root, membership[controllers])
            version = 2 if fstype == "cgroup2" else 1
            found[controllers] = Hierarchy(version, controllers, directory, point)
        return sorted(found.values(), key=lambda hierarchy: hierarchy.version)

    def holding(self, controller: str) -> list[Hierarchy]:
        """The hierarchies where ``controller``'s files may be: the v1 one that mounts it, and
        the v2 one (whose files exist only where the controller is enabled)."""
        return [h for h in self.hierarchies() if h.version == 2 or controller in h.controllers]


def _cgroup_mounts(mountinfo: str) -> Iterator[tuple[str, str, str, frozenset[str]]]:
    """``(mount root, mount point, fstype, super options)`` of each cgroup mount, in order."""
    for line in mountinfo.splitlines():
        fields = line.split()
        if "-" not in fields[6:]:
            continue
        separator = fields.index("-", 6)
        fstype, super_options = fields[separator + 1], fields[separator + 3 : separator + 4]
        if fstype not in ("cgroup", "cgroup2"):
            continue
        options = frozenset(super_options[0].split(",")) if super_options else frozenset()
        yield _unescape(fields[3]), _unescape(fields[4]), fstype, options


def _unescape(field: str) -> str:
    """mountinfo writes a space, tab, newline or backslash in a path as ``\\ooo`` (octal)."""
    return _MOUNTINFO_ESCAPE.sub(lambda match: chr(int(match.group(1), 8)), field)


def _cgroup_directory(mount_point: Path, mount_root: str, path: str) -> Path:
    """Where the cgroup ``path`` is under a mount of the hierarchy's ``mount_root``; the
    mount point itself when the path is not below the mount's root (a cgroup namespace whose
    root is the container's cgroup shows ``/``) or the directory is not there."""
    relative = os.path.relpath(path, mount_root) if path.startswith("/") else ".."
    if relative == "." or relative.startswith(".."):
        return mount_point
    directory = mount_point / relative
    return directory if directory.is_dir() else mount_point


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None


def _v2_quota(directory: Path) -> Fraction | None:
    """``cpu.max``: ``"max 100000"`` (none) or ``"QUOTA PERIOD"`` in microseconds."""
    text = _read_text(directory / "cpu.max")
    fields = text.split() if text else []
    if len(fields) != 2 or fields[0] == "max":
        return None
    return _cores(fields[0], fields[1])


def _v1_quota(directory: Path) -> Fraction | None:
    """``cpu.cfs_quota_us`` over ``cpu.cfs_period_us``; a quota of -1 is none."""
    quota = _read_text(directory / "cpu.cfs_quota_us")
    period = _read_text(directory / "cpu.cfs_period_us")
    if quota is None or period is None:
        return None
    return _cores(quota, period)


def _cores(quota: str, period: str) -> Fraction | None:
    try:
        quota_us, period_us = int(quota), int(period)
    except ValueError:
        return None
    if quota_us <= 0 or period_us <= 0:
        return None
    return Fraction(quota_us, period_us)


def cpu_quota(view: CgroupView) -> Fraction | None:
    """The CPUs the quota lets the process use (1.5 for 150000/100000), or None without one:
    the smallest quota on the process's cgroup and its ancestors, in every hierarchy."""
    quotas = [
        quota
        for hierarchy in view.holding("cpu")
        for directory in hierarchy.ancestry()
        if (quota := (_v2_quota if hierarchy.version == 2 else _v1_quota)(directory)) is not None
    ]
    return min(quotas, default=None)


def affinity_cpus() -> int | None:
    """The CPUs of this process's affinity mask (which a cpuset limits too), None where
    unknown."""
    try:
        return len(os.sched_getaffinity(0)) or None
    except (AttributeError, OSError):
        return None


@dataclass(frozen=True)
class CpuCount:
    """The stack's CPU count and where it came from: ``"quota"`` (the CPU quota, rounded up),
    ``"affinity"`` (the affinity mask holds fewer CPUs than the machine) or ``"machine"``."""

    count: int
    source: str
    quota: Fraction | None
    affinity: int | None
    machine: int

    def describe(self) -> str:
        quota = "none" if self.quota is None else f"{float(self.quota):g}"
        affinity = "unknown" if self.affinity is None else str(self.affinity)
        origin = {"quota": "the CPU quota, rounded up", "affinity": "the affinity mask"}.get(
            self.source, "the machine"
        )
        plural = "" if self.count == 1 else "s"
        return (
            f"{self.count} CPU{plural} from {origin} "
            f"(quota {quota}, affinity {affinity}, machine {self.machine})"
        )


def cpu_count(
    view: CgroupView | None = None,
    affinity: Callable[[], int | None] = affinity_cpus,
    machine: Callable[[], int | None] = os.cpu_count,
) -> CpuCount:
    """The CPU quota rounded up and the affinity mask, whichever is smaller; at least 1."""
    quota = cpu_quota(view or CgroupView())
    machine_cpus = machine() or 1
    mask = affinity()
    count, source = machine_cpus, "machine"
    if mask is not None and mask < machine_cpus:
        count, source = mask, "affinity"
    if quota is not None and math.ceil(quota) < count:
        count, source = math.ceil(quota), "quota"
    return CpuCount(max(1, count), source, quota, mask, machine_cpus)


@functools.cache
def stack_cpus() -> int:
    """This process's CPU count (``cpu_count`` of the real files), read once."""
    return cpu_count().count


@dataclass(frozen=True)
class MemoryLimit:
    """A memory limit in bytes, with the cgroup directory that sets it and its version."""

    limit: int
    directory: Path
    version: int

    def in_use(self) -> int | None:
        """What the cgroup holds that it cannot give back: its usage less the inactive file
        cache (which the kernel reclaims before it kills anything); None where unreadable."""
        usage_file = "memory.current" if self.version == 2 else "memory.usage_in_bytes"
        usage = _read_text(self.directory / usage_file)
        stat = _read_text(self.directory / "memory.stat") or ""
        counters = dict(line.partition(" ")[::2] for line in stat.splitlines())
        inactive = counters.get("total_inactive_file", counters.get("inactive_file", "0"))
        try:
            return max(0, int(usage or "") - int(inactive))
        except ValueError:
            return None

    def headroom(self) -> int | None:
        """What the limit still leaves, or None when the usage cannot be read."""
        used = self.in_use()
        return None if used is None else max(0, self.limit - used)


def _v2_memory(directory: Path) -> int | None:
    text = _read_text(directory / "memory.max")
    return int(text) if text and text.isdigit() else None


def _v1_memory(directory: Path) -> int | None:
    text = _read_text(directory / "memory.limit_in_bytes")
    if not text or not text.isdigit() or int(text) >= V1_UNLIMITED_BYTES:
        return None
    return int(text)


def memory_limit(view: CgroupView | None = None) -> MemoryLimit | None:
    """The smallest memory limit on the process's cgroup and its ancestors, in any
    hierarchy (v2 ``memory.max``, v1 ``memory.limit_in_bytes``), or None without one."""
    limits = [
        MemoryLimit(limit, directory, hierarchy.version)
        for hierarchy in (view or CgroupView()).holding("memory")
        for directory in hierarchy.ancestry()
        if (limit := (_v2_memory if hierarchy.version == 2 else _v1_memory)(directory)) is not None
    ]
    return min(limits, key=lambda found: found.limit, default=None)


def describe_memory(limit: MemoryLimit | None) -> str:
    """``"memory limit 512 MiB (cgroup v2)"`` or ``"no memory limit"``, for start-up logs."""
    if limit is None:
        return "no memory limit"
    return f"memory limit {limit.limit / (1 << 20):.0f} MiB (cgroup v{limit.version})"


def describe_limits() -> str:
    """The CPU count and the memory limit in one phrase, for the start-up log lines."""
    view = CgroupView()
    return f"{cpu_count(view).describe()}; {describe_memory(memory_limit(view))}"
