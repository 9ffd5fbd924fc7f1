"""A model's base path on disk: its version directories (``list_versions``), and a stamp that
tells the manager's poller they have not changed since it last listed them (``directory_stamp``).
"""

from __future__ import annotations

import os
import time

# A directory changed this recently may change again within its mtime's granularity unseen.
SETTLED_SECONDS = 2.0


def directory_stamp(base_path: str) -> tuple[int, int] | None:
    """(inode, mtime) of a settled base path: the same stamp means the same version
    directories (adding, removing or renaming one changes the mtime). None when the
    directory is missing or changed too recently to tell."""
    try:
        stat = os.stat(base_path)
    except OSError:
        return None
    if time.time_ns() - stat.st_mtime_ns < SETTLED_SECONDS * 1e9:
        return None
    return stat.st_ino, stat.st_mtime_ns


def list_versions(base_path: str) -> dict[int, str]:
    """Version number -> directory; hidden and non-numeric names are ignored."""
    try:
        entries = list(os.scandir(base_path))
    except OSError:
        return {}
    versions: dict[int, str] = {}
    for entry in entries:
        if entry.name.startswith(".") or not entry.name.isdigit() or not entry.is_dir():
            continue
        versions[int(entry.name)] = entry.path
    return versions
