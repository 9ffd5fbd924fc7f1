"""stack.json: the supervisor writes ``StackConfig.to_json``, the gunicorn workers and the
stream server read it back with ``StackConfig.load``; every tier's settings survive the trip
as their own frozen dataclasses, and a damaged document fails naming the field."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sagemaker_tfs.settings import BatchingConfig, WorkDir
from sagemaker_tfs.stack_config import StackConfig
from stack_configs import EVERY_VARIABLE, StackConfigBuilder

GROUPS = (
    "work",
    "nginx",
    "service",
    "model_servers",
    "multi_model",
    "batch",
    "metrics",
    "limits",
    "stream",
    "sessions",
)


def _every_setting(stack_config: StackConfigBuilder) -> StackConfig:
    """No field left at None where the environment can set it (batching, GPU share, ...)."""
    env = {**EVERY_VARIABLE, "SAGEMAKER_TFS_ENABLE_BATCHING": "true"}
    return stack_config(env, has_gpu=lambda: True)


def test_every_tier_comes_back_as_its_own_settings(stack_config: StackConfigBuilder) -> None:
    config = _every_setting(stack_config)
    loaded = StackConfig.from_dict(json.loads(config.to_json()))
    assert loaded == config
    for group in GROUPS:
        assert type(getattr(loaded, group)) is type(getattr(config, group)), group
        assert dataclasses.is_dataclass(getattr(loaded, group)), group
    assert isinstance(loaded.model_servers.batching, BatchingConfig)
    assert loaded.model_servers.gpu_memory_fraction == 0.4
    assert loaded.safe_port_range is not None and loaded.safe_port_range.low == 20000


def test_stack_json_nests_the_settings_per_tier(stack_config: StackConfigBuilder) -> None:
    document = json.loads(_every_setting(stack_config).to_json())
    assert set(GROUPS) <= set(document)
    assert document["work"] == {"root": str(Path(document["work"]["root"]))}
    assert document["limits"]["max_body_mb"] == 300
    assert document["model_servers"]["batching"]["max_batch_size"] == 8
    assert document["service"]["workers"] == 3
    assert document["stream"]["max_connections"] == 7


def test_load_reads_what_the_supervisor_wrote(
    stack_config: StackConfigBuilder, tmp_path: Path
) -> None:
    config = _every_setting(stack_config)
    path = Path(config.work.stack_config_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(config.to_json())
    assert StackConfig.load(path) == config


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda d: d["limits"].pop("max_body_mb"), r"stack\.json\.limits\.max_body_mb is missing"),
        (lambda d: d["service"].update(workers="3"), r"service\.workers must be an integer"),
        (lambda d: d["sessions"].update(enabled=1), r"sessions\.enabled must be true or false"),
        (lambda d: d.update(work="/tmp"), r"stack\.json\.work must be a JSON object"),
        (lambda d: d["instances"][0].pop("rest_port"), r"instances\[0\]\.rest_port is missing"),
        (lambda d: d["models"][0].update(versions=["1"]), r"versions\[0\] must be an integer"),
    ],
)
def test_a_damaged_document_names_the_field(
    stack_config: StackConfigBuilder, damage: Callable[[dict[str, Any]], object], message: str
) -> None:
    document = json.loads(stack_config().to_json())
    damage(document)
    with pytest.raises(ValueError, match=message):
        StackConfig.from_dict(document)


def test_the_work_directory_names_every_path(tmp_path: Path) -> None:
    work = WorkDir(str(tmp_path))
    assert work.service_socket == str(tmp_path / "gunicorn.sock")
    assert work.control_socket == str(tmp_path / "supervisor.sock")
    assert work.health_file == str(tmp_path / "health.json")
    assert work.stream_socket == str(tmp_path / "stream.sock")
    assert work.metrics_socket == str(tmp_path / "metrics.sock")
    assert work.edge_log_pipe == str(tmp_path / "edge-log.pipe")
    assert work.metrics_dir == str(tmp_path / "prometheus")
    assert work.stack_config_path == str(tmp_path / "stack.json")
    assert work.session_socket(1) == str(tmp_path / "session-1.sock")
    assert work.service_ready_marker(42) == str(tmp_path / "gunicorn-42.ready")
    assert work.status_socket_path(9000) == str(tmp_path / "grpc-9000.sock.status")
    assert WorkDir("/" + "w" * 120).grpc_socket_path(9000) is None
