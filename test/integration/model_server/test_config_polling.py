"""``--model_config_file_poll_wait_seconds`` on a running server: models and versions added and
removed as the file changes, loads and unloads logged as TF Serving logs them, a broken file
leaving the config in force."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import grpc
import pytest
from flag_cases import AVAILABLE, TF2_MODEL, X, Y, grpc_predict, rpc_error, status
from model_server_process import wait_for

pytestmark = pytest.mark.slow
PLATFORM = "model_platform: 'tensorflow'"


def write_config(path: Path, *entries: str) -> None:
    body = "\n".join(f"  config {{ {entry} {PLATFORM} }}" for entry in entries)
    path.write_text("model_config_list {\n" + body + "\n}\n")


def test_models_and_versions_follow_the_polled_file(
    start_model_server, testdata_dir: Path, tmp_path: Path
) -> None:
    source = testdata_dir / TF2_MODEL / "00000123"
    first, second = tmp_path / "first", tmp_path / "second"
    shutil.copytree(source, first / "1")
    shutil.copytree(source, first / "2")
    shutil.copytree(source, second / "7")
    config = tmp_path / "models.config"
    write_config(config, f"name: 'first' base_path: '{first}'")
    server = start_model_server(
        f"--model_config_file={config}",
        "--model_config_file_poll_wait_seconds=1",
        "--max_num_load_retries=0",
    )
    target = server.grpc_target
    assert [(v, s) for v, s, _ in status(server, "first")] == [(2, AVAILABLE)]  # latest 1

    # a model added
    write_config(
        config, f"name: 'first' base_path: '{first}'", f"name: 'second' base_path: '{second}'"
    )
    wait_for(lambda: "Successfully loaded servable version {name: second version: 7}" in server.log)
    assert grpc_predict(target, model="second") == Y

    # a version added (the policy now serves both), then the old one dropped
    write_config(
        config,
        f"name: 'first' base_path: '{first}' model_version_policy {{ all {{}} }}",
        f"name: 'second' base_path: '{second}'",
    )
    wait_for(lambda: grpc_predict_or_none(target, "first", 1) == Y)
    assert grpc_predict(target, model="first", version=2) == Y
    write_config(
        config,
        f"name: 'first' base_path: '{first}' " "model_version_policy { specific { versions: 1 } }",
        f"name: 'second' base_path: '{second}'",
    )
    wait_for(lambda: "Done unloading servable version {name: first version: 2}" in server.log)
    error = rpc_error(lambda: grpc_predict(target, model="first", version=2))
    assert error.code() == grpc.StatusCode.NOT_FOUND
    assert grpc_predict(target, model="first") == Y  # version 1 now

    # a model removed
    write_config(config, f"name: 'second' base_path: '{second}'")
    wait_for(lambda: "Done unloading servable version {name: first version: 1}" in server.log)
    error = rpc_error(lambda: grpc_predict(target, model="first"))
    assert error.code() == grpc.StatusCode.NOT_FOUND
    assert "Removing model: first" in server.log

    # a broken file: logged, the config in force stays
    config.write_text("model_config_list { config { nme: 'x' } }")
    wait_for(lambda: "Failed to read ModelServerConfig file: Invalid protobuf file:" in server.log)
    assert "Error parsing text-format tensorflow.serving.ModelServerConfig" in server.log
    assert grpc_predict(target, model="second") == Y
    assert server.process.poll() is None


def grpc_predict_or_none(target: str, model: str, version: int) -> list | None:
    try:
        return grpc_predict(target, X, model=model, version=version)
    except grpc.RpcError:
        return None


def test_without_polling_the_file_is_read_once(
    start_model_server, testdata_dir: Path, tmp_path: Path
) -> None:
    base = tmp_path / "m"
    shutil.copytree(testdata_dir / TF2_MODEL / "00000123", base / "1")
    config = tmp_path / "models.config"
    write_config(config, f"name: 'm' base_path: '{base}'")
    server = start_model_server(f"--model_config_file={config}", "--max_num_load_retries=0")
    write_config(config, f"name: 'm' base_path: '{base}'", f"name: 'n' base_path: '{base}'")
    time.sleep(3)
    error = rpc_error(lambda: grpc_predict(server.grpc_target, model="n"))
    assert error.code() == grpc.StatusCode.NOT_FOUND
    assert server.log.count("Adding/updating models.") == 1
