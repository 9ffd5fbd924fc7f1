"""Where the universal code goes: the config field, the service's lookup order."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sagemaker_tfs.service.handlers.multi_model import (
    UNIVERSAL_CODE_DIR,
    ControlClient,
    ModelDirectory,
    ModelLocation,
)
from sagemaker_tfs.service.routing.connections import Channels
from sagemaker_tfs.stack_config import StackConfig
from sagemaker_tfs.supervisor.processes.startup import StartupError
from sagemaker_tfs.supervisor.stack_supervisor import Supervisor
from stack_configs import StackConfigBuilder

BOTH = {
    "SAGEMAKER_MULTI_MODEL_UNIVERSAL_BUCKET": "bucket",
    "SAGEMAKER_MULTI_MODEL_UNIVERSAL_PREFIX": "shared/code",
}


def test_multi_model_with_both_variables_downloads_into_the_work_dir(
    stack_config: StackConfigBuilder, tmp_path: Path
) -> None:
    loaded = stack_config({"SAGEMAKER_MULTI_MODEL": "true", **BOTH})
    assert loaded.multi_model.universal_code_dir == str(tmp_path / "work" / "universal_code")
    assert (loaded.multi_model.universal_bucket, loaded.multi_model.universal_prefix) == (
        "bucket",
        "shared/code",
    )
    assert loaded.shared_code_dir == loaded.multi_model.universal_code_dir
    assert StackConfig.from_dict(json.loads(loaded.to_json())) == loaded


@pytest.mark.parametrize(
    "env",
    [
        {"SAGEMAKER_MULTI_MODEL": "true", "SAGEMAKER_MULTI_MODEL_UNIVERSAL_BUCKET": "bucket"},
        {"SAGEMAKER_MULTI_MODEL": "true", "SAGEMAKER_MULTI_MODEL_UNIVERSAL_PREFIX": "code"},
        {"SAGEMAKER_MULTI_MODEL": "false", **BOTH},
    ],
)
def test_nothing_is_downloaded_otherwise(
    stack_config: StackConfigBuilder, tmp_path: Path, env: dict[str, str]
) -> None:
    (tmp_path / "models" / "m" / "1").mkdir(parents=True)
    (tmp_path / "models" / "m" / "1" / "saved_model.pb").write_bytes(b"")
    assert stack_config(env).multi_model.universal_code_dir is None


def test_the_models_code_dir_wins_for_requirements(
    stack_config: StackConfigBuilder, tmp_path: Path
) -> None:
    (tmp_path / "models" / "code").mkdir(parents=True)
    loaded = stack_config({"SAGEMAKER_MULTI_MODEL": "true", **BOTH})
    assert loaded.shared_code_dir == str(tmp_path / "models" / "code")


def test_service_looks_in_the_universal_code_after_the_models_own(tmp_path: Path) -> None:
    directory = ModelDirectory(
        ControlClient(str(tmp_path / "sock")), Channels(), "/models", "/work/universal_code"
    )
    model = ModelLocation("m", "/models/m", 1, 2)
    assert directory.code_dirs(model) == [
        "/models/m/code",
        "/models/code",
        "/work/universal_code",
        UNIVERSAL_CODE_DIR,
    ]
    plain = ModelDirectory(ControlClient(str(tmp_path / "sock")), Channels(), "/models")
    assert "/work/universal_code" not in plain.code_dirs(model)


def test_supervisor_turns_a_failed_download_into_a_start_up_error(
    stack_config: StackConfigBuilder, no_aws_credentials: None
) -> None:
    """Real boto3 with no credentials anywhere (nothing reaches the network)."""
    supervisor = Supervisor(stack_config({"SAGEMAKER_MULTI_MODEL": "true", **BOTH}))
    with pytest.raises(StartupError) as raised:
        supervisor._download_universal_code()
    assert str(raised.value) == (
        "downloading s3://bucket/shared/code/ failed: Unable to locate credentials"
    )
