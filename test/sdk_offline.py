"""What the SageMaker Python SDK needs to run with no AWS behind it, shared by the SDK suite
(``test/sdk``) and the local-mode tests of the container suite.

- a region and dummy credentials (boto3 wants them to build clients; nothing calls AWS),
- telemetry off (``TelemetryOptOut`` in an SDK config file named by
  ``SAGEMAKER_USER_CONFIG_OVERRIDE``),
- a ``docker`` first on ``PATH`` that answers ``docker context inspect`` as Docker's default
  context does: the SDK asks it for the engine's address (``sagemaker.local.utils.
  get_docker_host``) even to call a local endpoint.
"""

from __future__ import annotations

import os
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
