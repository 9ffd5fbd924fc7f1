"""The container engine of the image tests: Debian's podman, with the project's settings.

Podman needs two settings on these machines (``containers.conf`` beside this file, named by
``CONTAINERS_CONF``): the runtime ``runc`` and default ulimits root may set here. The
project's scripts call ``docker``; :func:`docker_path` puts a ``docker`` that is podman first
on ``PATH``, because a Docker CLI with no daemon behind it may already be there.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

HERE = Path(__file__).resolve().parent
CONTAINERS_CONF = HERE / "containers.conf"


class EngineError(RuntimeError):
    """A podman command failed; the message has its output."""


def engine_env() -> dict[str, str]:
    """The caller's environment with the project's podman settings."""
    return {**os.environ, "CONTAINERS_CONF": str(CONTAINERS_CONF)}


def podman(
    *args: str, check: bool = True, timeout: float = 1800, merge_stderr: bool = False
) -> str:
    """Runs ``podman ARGS`` and returns its standard output (and error, if ``merge_stderr``)."""
    result = subprocess.run(
        ["podman", *args],
        env=engine_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
        text=True,
        timeout=timeout,
        check=False,
    )
    if check and result.returncode != 0:
        raise EngineError(
            f"podman {' '.join(args)} exited {result.returncode}:\n{result.stdout}{result.stderr}"
        )
    return result.stdout


def podman_succeeds(*args: str) -> bool:
    """Runs ``podman ARGS`` quietly; True if it exited 0."""
    result = subprocess.run(["podman", *args], env=engine_env(), capture_output=True, check=False)
    return result.returncode == 0


def image_exists(name: str) -> bool:
    return podman_succeeds("image", "exists", name)


def image_info(name: str) -> dict:
    return json.loads(podman("image", "inspect", name))[0]


def docker_path(bin_dir: Path) -> str:
    """``PATH`` with ``bin_dir/docker`` -> podman in front of the caller's."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    docker = bin_dir / "docker"
    if not docker.exists():
        docker.symlink_to(shutil.which("podman") or "/usr/bin/podman")
    return f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}"


def image_id(name: str) -> str | None:
    """The ID ``name`` points at, or None if there is no such image."""
    result = subprocess.run(
        ["podman", "image", "inspect", "--format", "{{.Id}}", name],
        env=engine_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    return result.stdout.strip() if result.returncode == 0 else None


@contextmanager
def noting_replaced_images(replaced: list[str], *names: str) -> Iterator[None]:
    """Appends to ``replaced`` the IDs ``names`` pointed at before the block, if the block moved
    the tags away (a rebuild)."""
    before = [image_id(name) for name in names]
    yield
    for name, old in zip(names, before, strict=True):
        if old is not None and image_id(name) != old:
            replaced.append(old)


def remove_images(ids: Iterable[str]) -> None:
    """Removes each image that nothing uses any more (podman refuses the others)."""
    for old in ids:
        podman_succeeds("image", "rm", old)
