"""The project's image scripts (build.sh, start.sh, curl.sh, stop.sh) run as a user runs them,
with ``docker`` being podman, plus the waits and reads the container tests need."""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import requests
from engine import CONTAINERS_CONF, docker_path, podman

REPO_ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = REPO_ROOT / "scripts"
START_TIMEOUT_SECONDS = 180


def newest_version() -> str:
    """The first full version in docker/versions.txt (the scripts' default)."""
    for line in (REPO_ROOT / "docker" / "versions.txt").read_text().splitlines():
        fields = line.split("#", 1)[0].split()
        if fields:
            return fields[0]
    raise AssertionError("docker/versions.txt lists no version")


class ContainerFailed(RuntimeError):
    """The container did not come up; the message has the end of its log."""


@dataclass(frozen=True)
class Image:
    """An image the scripts can start: REPOSITORY:FULL-cpu."""

    repository: str
    version: str  # full TF Serving version, e.g. 2.21.0
    arch: str = "cpu"

    @property
    def short_version(self) -> str:
        return ".".join(self.version.split(".")[:2])

    @property
    def name(self) -> str:
        return f"{self.repository}:{self.version}-{self.arch}"

    @property
    def container_name(self) -> str:
        """The name start.sh gives the container (one per version and arch)."""
        return f"sagemaker-tfs-{self.short_version}-{self.arch}"

    def script_args(self) -> list[str]:
        return ["--version", self.version, "--arch", self.arch, "--repository", self.repository]


def script_env(bin_dir: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """A clean environment: podman as ``docker``, the project's podman settings, no AWS and
    no SAGEMAKER_* variables but the ones a test passes (start.sh forwards those)."""
    env = {
        "PATH": docker_path(bin_dir),
        "HOME": os.environ.get("HOME", "/root"),
        "CONTAINERS_CONF": str(CONTAINERS_CONF),
        "LANG": "C.UTF-8",
    }
    return {**env, **(extra or {})}


def run_script(
    name: str, *args: str, env: dict[str, str], timeout: float = 1800
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPTS / name), *args],
        env=env,
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@dataclass
class Container:
    """A container start.sh started, published on ``port`` of this host."""

    image: Image
    port: int
    env: dict[str, str]
    ready_after: float = 0.0  # seconds from start.sh until /ping answered 200

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def logs(self) -> str:
        return podman("logs", self.image.container_name, merge_stderr=True)

    def invoke(
        self, body: bytes | str, content_type: str, timeout: float = 60, **headers: str
    ) -> requests.Response:
        """``POST /invocations`` with ``body`` as ``content_type`` (and other ``headers``)."""
        return requests.post(
            self.url("/invocations"),
            data=body,
            headers={"Content-Type": content_type, **headers},
            timeout=timeout,
        )

    def exec(self, *command: str, check: bool = True) -> str:
        return podman("exec", self.image.container_name, *command, check=check)

    def stop(self) -> subprocess.CompletedProcess[str]:
        return run_script("stop.sh", *self.image.script_args(), env=self.env, timeout=120)


def start_container(
    image: Image,
    bin_dir: Path,
    port: int,
    model_dir: Path,
    sagemaker_env: dict[str, str] | None = None,
    ca_bundle: Path | None = None,
    serverless_memory: str | None = None,
    cpus: str | None = None,
) -> Container:
    """``start.sh`` with the given SAGEMAKER_* variables (and ``--serverless MEMORY``,
    ``--cpus N``); returns once /ping answers 200."""
    remove_container(image)
    env = script_env(bin_dir, sagemaker_env)
    args = [*image.script_args(), "--port", str(port), "--model-dir", str(model_dir)]
    if ca_bundle is not None:
        args += ["--ca-bundle", str(ca_bundle)]
    if serverless_memory is not None:
        args += ["--serverless", serverless_memory]
    if cpus is not None:
        args += ["--cpus", cpus]
    started_at = time.monotonic()
    result = run_script("start.sh", *args, env=env, timeout=120)
    if result.returncode != 0:
        raise ContainerFailed(f"start.sh exited {result.returncode}:\n{result.stderr}")
    container = Container(image, port, env)
    wait_for_ping(container)
    container.ready_after = time.monotonic() - started_at
    return container


def wait_for_ping(container: Container, timeout: float = START_TIMEOUT_SECONDS) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if requests.get(container.url("/ping"), timeout=2).status_code == 200:
                return
        except requests.RequestException:
            pass
        if not container_running(container.image):
            raise ContainerFailed(f"the container exited:\n{tail(container.logs())}")
        time.sleep(0.25)
    raise ContainerFailed(f"/ping not 200 within {timeout:.0f}s:\n{tail(container.logs())}")


def container_running(image: Image) -> bool:
    state = podman(
        "container",
        "inspect",
        "--format",
        "{{.State.Running}}",
        image.container_name,
        check=False,
    )
    return state.strip() == "true"


def remove_container(image: Image) -> None:
    """A container left by an interrupted run would hold the name start.sh uses."""
    podman("rm", "--force", "--time", "0", image.container_name, check=False)


def tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.splitlines()[-lines:])
