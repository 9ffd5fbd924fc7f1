"""SDK v3 against the host stack, as far as its current release can call a local endpoint:
its serializers and deserializers over its local-mode runtime client (``sdk_v3_client.py``).
v3 cannot share a virtualenv with v2 (both are the ``sagemaker`` package), so it has one of
its own, kept between runs like the container suite's."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from sdk_offline import sdk_client_answers
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
    answers = sdk_client_answers(v3_python, CLIENT, str(stack.port), scratch=tmp_path)
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
