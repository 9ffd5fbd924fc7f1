"""The image's Python side without Docker: runs the venv stage's own RUN command (from the
newest Dockerfile.cpu) on the build context that .dockerignore lets through, then serves the
example model with that virtualenv's `serve` and checks every curl.sh example.

Differences from the image, because there is no Docker daemon here: the host's Python in
place of the one the Dockerfile names (python3.13 on Debian 13 for cpu), the host's nginx, and
`sagemaker-tfs model-server` from the test environment standing in for the
`tensorflow_model_server` binary (same flags and APIs). PIP_CERT is passed through as the
build argument would be: empty (pip's own bundle) unless the host names a proxy's CA bundle.
The virtualenv itself gets only what the image gets: the wheel, requirements.lock and
tensorflow-serving-api without dependencies - no TensorFlow, no pytest, no packaging extras.
It installs from the package index (pip's cache makes reruns quick); the test is skipped
when the index cannot be reached.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from script_helpers import REPO_ROOT, build_context, known_versions, parse_dockerfile, short

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

HOST_PYTHON = shutil.which(f"python{sys.version_info.major}.{sys.version_info.minor}")
# Paths of the venv stage and what they become here.
STAGE_PATHS = ("/tmp/build-env", "/tmp/wheels", "/opt/venv", "/tmp/requirements.lock")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def venv_stage_command() -> str:
    dockerfile = REPO_ROOT / "docker" / short(known_versions()[0]) / "Dockerfile.cpu"
    venv = next(stage for stage in parse_dockerfile(dockerfile) if stage.name == "venv")
    return next(run for run in venv.all("RUN") if "pip wheel" in run)


def image_python(command: str) -> str:
    """The interpreter the venv stage creates its virtualenvs with, e.g. python3.13."""
    names = set(re.findall(r"(?<![\w/.-])(python3(?:\.\d+)?) -m venv ", command))
    assert len(names) == 1, f"expected one Python in the venv stage, found {sorted(names)}"
    return names.pop()


def index_reachable(tmp: Path) -> bool:
    probe = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--dest", str(tmp)]
        + ["packaging"],
        capture_output=True,
        timeout=120,
    )
    return probe.returncode == 0


def build_image_venv(root: Path) -> Path:
    """Runs the venv stage's RUN in a copy of the build context; returns the venv path."""
    context = build_context(root / "context")
    command = venv_stage_command()
    for path in STAGE_PATHS:
        assert path in command, f"the venv stage no longer uses {path}; update this test"
    python = image_python(command)
    venv_calls = f"{python} -m venv "
    assert command.count(python) == command.count(venv_calls), f"{python} outside `-m venv`"
    replacements = {
        "/tmp/requirements.lock": str(context / "docker" / "requirements.lock"),
        "/tmp/build-env": str(root / "build-env"),
        "/tmp/wheels": str(root / "wheels"),
        "/opt/venv": str(root / "venv"),
        venv_calls: f"{HOST_PYTHON} -m venv ",
    }
    for old, new in replacements.items():
        command = command.replace(old, new)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(root), "PIP_NO_CACHE_DIR": "0"}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env["PIP_CERT"] = os.environ.get("PIP_CERT", "")
    result = subprocess.run(
        ["bash", "-c", command], cwd=context, env=env, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return root / "venv"


def model_server_stand_in(bin_dir: Path) -> None:
    """`tensorflow_model_server` on PATH, as in the image, backed by the Python model server."""
    bin_dir.mkdir()
    stand_in = bin_dir / "tensorflow_model_server"
    server = Path(sys.executable).with_name("sagemaker-tfs")
    stand_in.write_text(f'#!/bin/sh\nexec "{server}" model-server "$@"\n')
    stand_in.chmod(0o755)


def wait_for_ping(port: int, process: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        assert process.poll() is None, log.read_text()[-4000:]
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/ping", timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    pytest.fail("no 200 from /ping in 240 s:\n" + log.read_text()[-4000:])


@pytest.mark.skipif(HOST_PYTHON is None, reason="no pythonX.Y on PATH")
@pytest.mark.skipif(shutil.which("nginx", path="/usr/sbin:/usr/bin") is None, reason="no nginx")
def test_image_venv_serves_every_curl_example(tmp_path: Path) -> None:
    if not index_reachable(tmp_path / "probe"):
        pytest.skip("the package index is not reachable")
    venv = build_image_venv(tmp_path)
    probe = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import tensorflow"], capture_output=True
    )
    assert probe.returncode != 0, "TensorFlow must not be in the image's virtualenv"
    model_server_stand_in(tmp_path / "bin")
    port = free_port()
    log = tmp_path / "serve.log"
    env = {
        "PATH": f"{tmp_path / 'bin'}:{venv / 'bin'}:/usr/sbin:/usr/bin:/bin",
        "HOME": str(tmp_path),
        # free_port() comes from the ephemeral range (< 61000): the next 100 stay below 65536
        "SAGEMAKER_SAFE_PORT_RANGE": f"{port + 1}-{port + 100}",
    }
    models = REPO_ROOT / "test" / "resources" / "models"
    command = [str(venv / "bin" / "serve"), "--model-dir", str(models)]
    command += ["--work-dir", str(tmp_path / "work"), "--port", str(port)]
    with log.open("w") as output:
        process = subprocess.Popen(
            command, env=env, stdout=output, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        wait_for_ping(port, process, log)
        curl = subprocess.run(
            [str(REPO_ROOT / "scripts" / "curl.sh"), "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert curl.returncode == 0, curl.stdout + curl.stderr + log.read_text()[-4000:]
        assert curl.stdout.count("-- HTTP 200") == 7
    finally:
        process.send_signal(signal.SIGTERM)  # the supervisor stops its children
        try:
            process.wait(timeout=90)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
