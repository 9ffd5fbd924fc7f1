"""SDK v3 against the host stack, as far as its current release can call a local endpoint:
its serializers and deserializers over its local-mode runtime client (``sdk_v3_client.py``).
v3 cannot share a virtualenv with v2 (both are the ``sagemaker`` package), so it has one of
its own, kept between runs like the container suite's."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from sdk_offline import CONTEXT_ONLY_DOCKER
from whole_stack import RunningStack

SAGEMAKER_V3 = "sagemaker==3.27.0"
CLIENT = Path(__file__).resolve().parent / "sdk_v3_client.py"


def cache_dir() -> Path:
    default = Path(os.environ.get("HOME", "/root")) / ".cache" / "sagemaker-tfs-sdk"
    return Path(os.environ.get("SAGEMAKER_TFS_SDK_CACHE", default))


@pytest.fixture(scope="session")
def v3_python() -> Path:
    venv = cache_dir() / ("sdk-v3-venv-" + SAGEMAKER_V3.split("==")[1])
    python = venv / "bin" / "python"
    if not (venv / "installed").exists():
        shutil.rmtree(venv, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "--quiet", SAGEMAKER_V3],
            check=True,
            timeout=900,
        )
        (venv / "installed").touch()
    return python


def test_v3_serializers_over_the_local_runtime_client(
    stack: RunningStack, v3_python: Path, tmp_path: Path
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shutil.copy(CONTEXT_ONLY_DOCKER, bin_dir / "docker")
    env = {**os.environ, "PATH": f"{bin_dir}:/usr/bin:/bin"}
    env.pop("PYTHONPATH", None)
    result = subprocess.run(
        [str(v3_python), str(CLIENT), str(stack.port)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    answers = json.loads(result.stdout.strip().splitlines()[-1])
    assert answers == {
        "json": {"predictions": [4.5, 5.0]},
        "csv": {"predictions": [[4.5, 5.0]]},
        "jsonlines": {"predictions": [[4.5, 5.0], [6.5, 7.0]]},
        "csv_out": [["4.5"], ["5"]],
        "npy": [4.5, 5.0, 6.5],
        "npy_shapeless": [[3.5], [4.0], [5.5]],
        "version": {"predictions": [[4.5]]},
        "regress": {"results": [2.5]},
        "error": {"error": "Invalid .npy payload: it does not start with the .npy magic"},
    }
