"""The container's CPU count and memory limit, read from fake cgroup trees (cgroup_trees.py) in
each layout: cgroup v2 with and without a quota, v1, hybrid, nested paths, namespaced ones."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest
from cgroup_trees import V1_NO_LIMIT, CgroupTree, hybrid, legacy, unified
from sagemaker_tfs.container_limits import (
    CgroupView,
    cpu_count,
    cpu_quota,
    describe_memory,
    memory_limit,
)

GIB = 1 << 30


def count(tree: CgroupTree, affinity: int | None = 8, machine: int = 16) -> tuple[int, str]:
    found = cpu_count(tree.view(), affinity=lambda: affinity, machine=lambda: machine)
    return found.count, found.source


@pytest.mark.parametrize(
    ("cpu_max", "quota", "expected"),
    [
        ("max 100000", None, (8, "affinity")),
        ("200000 100000", Fraction(2), (2, "quota")),
        ("150000 100000", Fraction(3, 2), (2, "quota")),  # rounded up
        ("50000 100000", Fraction(1, 2), (1, "quota")),
        ("1000 100000", Fraction(1, 100), (1, "quota")),  # at least 1
        ("1600000 100000", Fraction(16), (8, "affinity")),  # affinity smaller than the quota
        ("800000 100000", Fraction(8), (8, "affinity")),  # a tie: the affinity names it
    ],
)
def test_v2_cpu_max(
    tmp_path: Path, cpu_max: str, quota: Fraction | None, expected: tuple[int, str]
) -> None:
    tree = unified(tmp_path).write("/sys/fs/cgroup", cpu_max=cpu_max)
    assert cpu_quota(tree.view()) == quota
    assert count(tree) == expected


def test_the_quota_smaller_than_the_affinity_and_the_reverse(tmp_path: Path) -> None:
    tree = unified(tmp_path).write("/sys/fs/cgroup", cpu_max="300000 100000")
    assert count(tree, affinity=8) == (3, "quota")
    assert count(tree, affinity=2) == (2, "affinity")
    assert count(tree, affinity=16, machine=16) == (3, "quota")


def test_without_limits_the_machine_counts(tmp_path: Path) -> None:
    tree = unified(tmp_path).write("/sys/fs/cgroup", cpu_max="max 100000")
    assert count(tree, affinity=16, machine=16) == (16, "machine")
    assert count(tree, affinity=None, machine=4) == (4, "machine")
    assert count(CgroupTree(tmp_path / "nothing"), affinity=None, machine=3) == (3, "machine")


@pytest.mark.parametrize(
    ("quota_us", "period_us", "expected"),
    [("-1", "100000", (8, "affinity")), ("250000", "100000", (3, "quota")),
     ("100000", "200000", (1, "quota")), ("25000", "50000", (1, "quota"))],
)  # fmt: skip
def test_v1_cfs_quota(tmp_path: Path, quota_us: str, period_us: str, expected: tuple) -> None:
    tree = legacy(tmp_path).write(
        "/sys/fs/cgroup/cpu,cpuacct", cpu_cfs_quota_us=quota_us, cpu_cfs_period_us=period_us
    )
    assert count(tree) == expected


def test_hybrid_reads_the_v1_controllers_beside_an_empty_v2_tree(tmp_path: Path) -> None:
    """As on this project's machines: v1 controllers, the process's own memory cgroup nested
    below the hierarchy's root, and cgroup2 at /sys/fs/cgroup/unified with no cpu or memory."""
    tree = hybrid(tmp_path)
    tree.write("/sys/fs/cgroup/cpu,cpuacct", cpu_cfs_quota_us="100000", cpu_cfs_period_us="100000")
    tree.write("/sys/fs/cgroup/memory", memory_limit_in_bytes=str(3 * GIB))
    assert count(tree) == (1, "quota")
    limit = memory_limit(tree.view())
    assert limit is not None and (limit.limit, limit.version) == (3 * GIB, 1)
    assert [h.version for h in tree.view().hierarchies()] == [1, 1, 1, 1, 1, 2]


def test_nested_v2_path_the_smallest_limit_up_to_the_mount_wins(tmp_path: Path) -> None:
    """No cgroup namespace: the process is in /kubepods/pod/ctr of the whole tree, its pod's
    limits above it count too."""
    tree = unified(tmp_path, path="/kubepods/pod/ctr")
    tree.write("/sys/fs/cgroup/kubepods/pod", cpu_max="150000 100000", memory_max=str(GIB))
    tree.write("/sys/fs/cgroup/kubepods/pod/ctr", cpu_max="max 100000", memory_max="max")
    tree.write("/sys/fs/cgroup/kubepods", cpu_max="400000 100000", memory_max=str(4 * GIB))
    assert count(tree) == (2, "quota")
    limit = memory_limit(tree.view())
    assert limit is not None and limit.limit == GIB
    assert limit.directory == tree.path("/sys/fs/cgroup/kubepods/pod")
    tree.write("/sys/fs/cgroup/kubepods/pod/ctr", cpu_max="50000 100000", memory_max="1000")
    assert count(tree) == (1, "quota")
    assert memory_limit(tree.view()).limit == 1000  # type: ignore[union-attr]


def test_a_sibling_cgroups_limits_do_not_count(tmp_path: Path) -> None:
    tree = unified(tmp_path, path="/system.slice/ours")
    tree.write("/sys/fs/cgroup/system.slice/ours", cpu_max="max 100000")
    tree.write("/sys/fs/cgroup/system.slice/other", cpu_max="100000 100000", memory_max="5")
    assert count(tree) == (8, "affinity")
    assert memory_limit(tree.view()) is None


def test_v1_mount_of_the_containers_own_cgroup(tmp_path: Path) -> None:
    """Docker/podman on v1 without a cgroup namespace: /proc/self/cgroup names the container's
    path on the host, and that path is what is mounted at /sys/fs/cgroup/CONTROLLER."""
    tree = legacy(tmp_path, path="/docker/abc123", mount_root="/docker/abc123")
    tree.write("/sys/fs/cgroup/cpu,cpuacct", cpu_cfs_quota_us="200000", cpu_cfs_period_us="100000")
    tree.write("/sys/fs/cgroup/memory", memory_limit_in_bytes=str(2 * GIB))
    assert count(tree) == (2, "quota")
    assert memory_limit(tree.view()).limit == 2 * GIB  # type: ignore[union-attr]


def test_v2_namespace_root_is_the_mount_point(tmp_path: Path) -> None:
    """Under a cgroup namespace the process's path is ``/`` and the limits sit at the mount."""
    tree = unified(tmp_path, path="/").write("/sys/fs/cgroup", cpu_max="100000 100000")
    assert count(tree) == (1, "quota")
    outside = unified(tmp_path / "b", path="/../../elsewhere")  # a path outside the namespace
    outside.write("/sys/fs/cgroup", cpu_max="200000 100000")
    assert count(outside) == (2, "quota")


def test_a_path_the_mount_does_not_show_falls_back_to_the_mount_point(tmp_path: Path) -> None:
    tree = unified(tmp_path, path="/not/mounted/here", mount_root="/some/other")
    tree.write("/sys/fs/cgroup", cpu_max="300000 100000")
    assert count(tree) == (3, "quota")


def test_mount_points_with_escaped_characters(tmp_path: Path) -> None:
    tree = CgroupTree(tmp_path).member(0, "", "/")
    tree.mount("/", "/sys/fs/cg root", "cgroup2", "rw")
    tree.write("/sys/fs/cg root", cpu_max="100000 100000")
    assert "cg\\040root" in tree.path("/proc/self/mountinfo").read_text()
    assert count(tree) == (1, "quota")


def test_unreadable_or_odd_values_are_no_limit(tmp_path: Path) -> None:
    tree = unified(tmp_path).write("/sys/fs/cgroup", cpu_max="garbage", memory_max="lots")
    assert cpu_quota(tree.view()) is None and memory_limit(tree.view()) is None
    tree.write("/sys/fs/cgroup", cpu_max="0 100000")
    assert cpu_quota(tree.view()) is None


@pytest.mark.parametrize(
    ("layout", "folder", "files", "expected"),
    [
        (unified, "/sys/fs/cgroup", {"memory_max": "max"}, None),
        (unified, "/sys/fs/cgroup", {"memory_max": str(512 << 20)}, (512 << 20, 2)),
        (legacy, "/sys/fs/cgroup/memory", {"memory_limit_in_bytes": V1_NO_LIMIT}, None),
        (legacy, "/sys/fs/cgroup/memory", {"memory_limit_in_bytes": str(GIB)}, (GIB, 1)),
        (hybrid, "/sys/fs/cgroup/memory", {"memory_limit_in_bytes": V1_NO_LIMIT}, None),
        (hybrid, "/sys/fs/cgroup/memory", {"memory_limit_in_bytes": str(GIB)}, (GIB, 1)),
    ],
)
def test_memory_limit_in_every_layout(
    tmp_path: Path,
    layout,
    folder: str,
    files: dict[str, str],
    expected: tuple | None,  # noqa: ANN001
) -> None:
    tree = layout(tmp_path).write(folder, **files)
    limit = memory_limit(tree.view())
    assert (None if limit is None else (limit.limit, limit.version)) == expected


def test_headroom_v2_counts_inactive_file_cache_as_free(tmp_path: Path) -> None:
    tree = unified(tmp_path).write(
        "/sys/fs/cgroup",
        memory_max=str(GIB),
        memory_current=str(900 << 20),
        memory_stat=f"anon 1\ninactive_file {100 << 20}\nactive_file 5",
    )
    limit = memory_limit(tree.view())
    assert limit is not None and limit.headroom() == 224 << 20


def test_headroom_v1_reads_usage_in_bytes_and_the_hierarchys_inactive_file(
    tmp_path: Path,
) -> None:
    tree = legacy(tmp_path, path="/ctr").write(
        "/sys/fs/cgroup/memory/ctr",
        memory_limit_in_bytes=str(GIB),
        memory_usage_in_bytes=str(GIB),
        memory_stat=f"inactive_file 7\ntotal_inactive_file {24 << 20}",
    )
    limit = memory_limit(tree.view())
    assert limit is not None and limit.headroom() == 24 << 20
    tree.write("/sys/fs/cgroup/memory/ctr", memory_usage_in_bytes="unreadable")
    assert limit.headroom() is None


def test_descriptions_name_the_source() -> None:
    from sagemaker_tfs.container_limits import CpuCount, MemoryLimit

    assert CpuCount(1, "quota", Fraction(1, 2), 2, 2).describe() == (
        "1 CPU from the CPU quota, rounded up (quota 0.5, affinity 2, machine 2)"
    )
    assert CpuCount(2, "affinity", None, 2, 4).describe() == (
        "2 CPUs from the affinity mask (quota none, affinity 2, machine 4)"
    )
    assert CpuCount(4, "machine", None, None, 4).describe() == (
        "4 CPUs from the machine (quota none, affinity unknown, machine 4)"
    )
    assert describe_memory(None) == "no memory limit"
    limit = MemoryLimit(2 * GIB, Path("/x"), 1)
    assert describe_memory(limit) == "memory limit 2048 MiB (cgroup v1)"


def test_this_machines_files_give_a_count_within_the_affinity() -> None:
    found = cpu_count(CgroupView("/"))
    assert 1 <= found.count <= (found.affinity or found.machine)
    assert cpu_count(CgroupView("/"), affinity=lambda: 1).count == 1
