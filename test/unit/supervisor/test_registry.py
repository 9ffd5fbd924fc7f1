"""The multi-model registry: model names and URLs, ports, memory, loads that fail."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import pytest
from launchers import RecordingLauncher, StuckLauncher
from sagemaker_tfs.config import PortRange
from sagemaker_tfs.supervisor.memory import available_memory_bytes
from sagemaker_tfs.supervisor.per_model_servers import PerModelServers, PortPool
from sagemaker_tfs.supervisor.registry import (
    ModelRegistry,
    resolve_model_url,
    validate_model_name,
)
from sagemaker_tfs.wire.errors import HttpError
from stack_configs import StackConfigBuilder, make_model


@pytest.mark.parametrize("name", ["", "a" * 129, "../x", "a b", 'a"b', "-x", ".hidden", 5, None])
def test_invalid_model_names(name: object) -> None:
    with pytest.raises(HttpError) as error:
        validate_model_name(name)
    assert error.value.status == 400


def test_valid_model_names() -> None:
    for name in ("half_plus_three", "m-1.2", "A" * 128):
        assert validate_model_name(name) == name


def test_model_url_must_stay_inside_the_root(tmp_path: Path) -> None:
    root = tmp_path / "models"
    make_model(root / "good")
    make_model(tmp_path / "outside")
    (root / "link").symlink_to(tmp_path / "outside")
    assert resolve_model_url("good", str(root), "g") == str(root / "good")
    assert resolve_model_url(str(root / "good"), str(root), "g") == str(root / "good")
    for url in ("../outside", str(tmp_path / "outside"), "link", "/etc", ".", "good/../.."):
        with pytest.raises(HttpError) as error:
            resolve_model_url(url, str(root), "x")
        assert error.value.status == 403, url
    for url in ("", None, 3, "a\x00b"):
        with pytest.raises(HttpError) as error:
            resolve_model_url(url, str(root), "x")
        assert error.value.status == 400


def test_model_url_without_version_dir_is_404(tmp_path: Path) -> None:
    root = tmp_path / "models"
    (root / "empty" / "abc").mkdir(parents=True)
    with pytest.raises(HttpError) as error:
        resolve_model_url("empty", str(root), "e")
    assert error.value.status == 404
    assert error.value.message == "Could not find valid base path empty for servable e"


def test_port_pool_hands_out_and_takes_back() -> None:
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        pool = PortPool(PortRange(taken, taken + 4), reserved=[taken + 1])
        first = pool.take_pair()
        assert first is not None and taken not in (first.grpc_port, first.rest_port)
        assert taken + 1 not in (first.grpc_port, first.rest_port)
        assert pool.take_pair() is None  # taken, taken+1 unavailable; only 3 left
        pool.release(first)
        assert pool.take_pair() == first


def test_available_memory(tmp_path: Path) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal: 100 kB\nMemAvailable:  2048 kB\n")
    no_cgroup = str(tmp_path / "no-cgroup")
    assert available_memory_bytes(str(meminfo), no_cgroup) == 2048 * 1024
    assert available_memory_bytes(str(tmp_path / "missing"), no_cgroup) is None


def test_registry_refuses_with_507_when_memory_is_low(
    stack_config: StackConfigBuilder, tmp_path: Path
) -> None:
    make_model(tmp_path / "models" / "m")
    config = stack_config(
        {"SAGEMAKER_MULTI_MODEL": "true", "SAGEMAKER_SAFE_PORT_RANGE": "40000-40100"}
    )
    launcher = RecordingLauncher()
    servers = PerModelServers(config, launcher)
    registry = ModelRegistry(config, servers, memory_margin=10**9, available_memory=lambda: 10)
    with pytest.raises(HttpError) as error:
        registry.load("m", "m")
    assert error.value.status == 507
    assert error.value.message == (
        "Not enough memory to load model m: it needs about 16 MB, 0 MB available"
    )
    assert launcher.started == [] and registry.list() == []


def test_a_load_that_cannot_finish_fails_within_the_wait_time_and_cleans_up(
    stack_config: StackConfigBuilder,
    tmp_path: Path,
) -> None:
    make_model(tmp_path / "models" / "m")
    config = stack_config({"SAGEMAKER_MULTI_MODEL": "true", "SAGEMAKER_TFS_WAIT_TIME_SECONDS": "1"})
    config = dataclasses.replace(config, model_server_per_model=True)
    launcher = StuckLauncher()
    registry = ModelRegistry(config, PerModelServers(config, launcher))
    started = time.monotonic()
    with pytest.raises(HttpError) as error:
        registry.load("m", "m")
    assert time.monotonic() - started < 1 + 5  # the wait, plus one status poll's timeout
    assert "failed to load" in error.value.message
    assert launcher.stopped == launcher.started == ["model-server[m]"]
    assert registry.list() == []
