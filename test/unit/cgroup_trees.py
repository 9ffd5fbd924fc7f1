"""Fake cgroup trees for ``container_limits``: a directory standing for ``/``, with the
process's ``/proc/self/cgroup``, its ``/proc/self/mountinfo`` and the cgroup files the kernel
would show, in the three layouts a container may have.

The mountinfo lines have the kernel's shape (optional fields, the ``-`` separator, super
options), with the root filesystem, ``/proc`` and a tmpfs at ``/sys/fs/cgroup`` among them as
in a real container; the layouts are those of the machines' ``/proc/self/cgroup`` and
``/proc/self/mountinfo``: v2 (``0::/path``, one ``cgroup2`` mount), v1 (one ``cgroup`` mount per
controller group, named by its super options) and hybrid (v1 plus an empty ``cgroup2`` at
``/sys/fs/cgroup/unified``, as on the machines of this project's container tests).
"""

from __future__ import annotations

from pathlib import Path

from sagemaker_tfs.container_limits import CgroupView

V1_NO_LIMIT = "9223372036854771712"  # memory.limit_in_bytes without a limit (4 KiB pages)
V1_GROUPS = ("cpu,cpuacct", "cpuset", "memory", "pids", "name=systemd")
OTHER_MOUNTS = (
    "22 1 0:21 / / rw,relatime master:1 - overlay overlay rw,lowerdir=/l,upperdir=/u",
    "23 22 0:22 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw",
    "24 22 0:23 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime - tmpfs tmpfs rw,mode=755",
)


class CgroupTree:
    """A fake ``/`` under ``root``: write the membership, the mounts and the files."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._mounts: list[str] = list(OTHER_MOUNTS)
        self._membership: list[str] = []

    def path(self, absolute: str) -> Path:
        return self.root / absolute.lstrip("/")

    def member(self, hierarchy_id: int, controllers: str, path: str) -> CgroupTree:
        """A line of /proc/self/cgroup: ``ID:CONTROLLERS:PATH``."""
        self._membership.append(f"{hierarchy_id}:{controllers}:{path}")
        self.path("/proc/self").mkdir(parents=True, exist_ok=True)
        self.path("/proc/self/cgroup").write_text("\n".join(self._membership) + "\n")
        return self

    def mount(self, mount_root: str, mount_point: str, fstype: str, options: str) -> CgroupTree:
        """A line of /proc/self/mountinfo for a cgroup mount (``options``: super options)."""
        number = 30 + len(self._mounts)
        self._mounts.append(
            f"{number} 24 0:{number} {mount_root} {mount_point.replace(' ', chr(92) + '040')} "
            f"rw,nosuid,nodev,noexec,relatime shared:{number} - {fstype} cgroup {options}"
        )
        self.path(mount_point).mkdir(parents=True, exist_ok=True)
        self.path("/proc/self").mkdir(parents=True, exist_ok=True)
        self.path("/proc/self/mountinfo").write_text("\n".join(self._mounts) + "\n")
        return self

    def write(self, directory: str, **files: str) -> CgroupTree:
        """Cgroup files in ``directory`` (``cpu_max="max 100000"`` writes ``cpu.max``)."""
        folder = self.path(directory)
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            (folder / name.replace("_", ".", 1)).write_text(text + "\n")
        return self

    def view(self) -> CgroupView:
        return CgroupView(self.root)


def unified(root: Path, path: str = "/", mount_root: str = "/") -> CgroupTree:
    """cgroup v2 alone at /sys/fs/cgroup; the process in ``path`` (``/`` under a cgroup
    namespace); ``mount_root``: the part of the tree mounted there."""
    tree = CgroupTree(root).member(0, "", path)
    tree.mount(mount_root, "/sys/fs/cgroup", "cgroup2", "rw,nsdelegate,memory_recursiveprot")
    tree.write("/sys/fs/cgroup", cgroup_controllers="cpuset cpu io memory pids")
    return tree


def legacy(
    root: Path, path: str = "/", mount_root: str = "/", groups: tuple[str, ...] = V1_GROUPS
) -> CgroupTree:
    """cgroup v1 alone: one hierarchy per controller group at /sys/fs/cgroup/GROUP."""
    tree = CgroupTree(root)
    for number, group in enumerate(groups, start=1):
        tree.member(number, group, path)
        folder = group.removeprefix("name=")
        tree.mount(mount_root, f"/sys/fs/cgroup/{folder}", "cgroup", f"rw,{group}")
    return tree


def hybrid(root: Path, path: str = "/", mount_root: str = "/") -> CgroupTree:
    """v1 controllers plus an empty cgroup v2 tree at /sys/fs/cgroup/unified."""
    tree = legacy(root, path, mount_root)
    tree.member(0, "", path)
    tree.mount(mount_root, "/sys/fs/cgroup/unified", "cgroup2", "rw,nsdelegate")
    return tree.write("/sys/fs/cgroup/unified", cgroup_controllers="hugetlb")
