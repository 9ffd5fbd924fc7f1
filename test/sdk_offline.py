"""The SageMaker Python SDK with no AWS behind it, for the suites that use it as the client:
the SDK suite (``test/sdk``), the container suite (``test/image``) and the host stack's tests
(``test/integration/stack``). The SDK runs in virtualenvs of its own (it pins protobuf and
packaging below what the project uses; v2 and v3 are both the ``sagemaker`` package), so the
clients are scripts run with that virtualenv's Python (``sdk_client_answers``).

What the SDK needs to run offline:

- a region and dummy credentials (boto3 wants them to build clients; nothing calls AWS),
- telemetry off (``TelemetryOptOut`` in an SDK config file named by
  ``SAGEMAKER_USER_CONFIG_OVERRIDE``),
- a ``docker`` first on ``PATH`` that answers ``docker context inspect`` as Docker's default
  context does: the SDK asks it for the engine's address (``sagemaker.local.utils.
  get_docker_host``) even to call a local endpoint.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
CONTEXT_ONLY_DOCKER = REPO_ROOT / "test" / "image" / "stand_in" / "docker-for-sdk"
TELEMETRY_OPT_OUT = """\
SchemaVersion: '1.0'
SageMaker:
  PythonSDK:
    Modules:
      TelemetryOptOut: true
"""


def offline_sdk_env(config_dir: Path, bin_dir: Path | None = None) -> dict[str, str]:
    """Environment variables for the SDK with no AWS: region, dummy keys, telemetry off, and
    ``bin_dir`` (holding the ``docker`` to use) first on ``PATH`` when given."""
    config_dir.mkdir(parents=True, exist_ok=True)
    config = config_dir / "sagemaker-config.yaml"
    config.write_text(TELEMETRY_OPT_OUT)
    env = {
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_EC2_METADATA_DISABLED": "true",
        "SAGEMAKER_SUPPRESS_V2_WARNING": "1",
        "SAGEMAKER_USER_CONFIG_OVERRIDE": str(config),
    }
    if bin_dir is not None:
        env["PATH"] = f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}"
    return env


def sdk_bin_dir(directory: Path) -> Path:
    """``directory`` (made if needed) holding the stand-in ``docker`` the SDK asks for the
    engine's address (``CONTEXT_ONLY_DOCKER``), to put first on the SDK's ``PATH``."""
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copy(CONTEXT_ONLY_DOCKER, directory / "docker")
    return directory


def sdk_client_answers(python: Path, script: Path, *args: str, scratch: Path) -> dict:
    """Runs the client ``script ARGS...`` with ``python`` (an SDK virtualenv's) offline and
    returns its answers, the JSON object it prints last; fails with the end of its stderr if it
    exits non-zero. Its environment is ``HOME``, ``offline_sdk_env`` and a ``PATH`` of the
    stand-in ``docker`` and the system's directories, nothing else of this process's (no
    ``PYTHONPATH`` pointing at the project's packages); ``scratch`` holds its files."""
    bin_dir = sdk_bin_dir(scratch / "bin")
    env = {
        "HOME": os.environ.get("HOME", "/root"),
        **offline_sdk_env(scratch / "sdk_config"),
        "PATH": f"{bin_dir}:/usr/bin:/bin",
    }
    result = subprocess.run(
        [str(python), str(script), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])
