"""Fixtures for the unit tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from stack_configs import StackConfigBuilder

_CREDENTIAL_VARIABLES = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
)


@pytest.fixture
def no_aws_credentials(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Real boto3 finds no credentials anywhere and touches no network (no instance metadata)."""
    for name in _CREDENTIAL_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")


@pytest.fixture
def stack_config(tmp_path: Path) -> StackConfigBuilder:
    """``stack_config(env, **options)``: a StackConfig; see ``StackConfigBuilder``."""
    return StackConfigBuilder(tmp_path)
