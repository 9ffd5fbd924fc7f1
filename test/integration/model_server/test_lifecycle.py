"""Model lifecycle against real server processes: flags, discovery, failed loads, polling,
config reload over gRPC and SIGTERM."""

from __future__ import annotations

import shutil
import signal
import time
from pathlib import Path

import grpc
import numpy as np
import pytest
from grpc_helpers import float_tensor, model_stub, output_array, predict_request, prediction_stub
from model_server_process import run_cli, wait_for
from tensorflow_serving.apis import get_model_status_pb2, model_management_pb2

State = get_model_status_pb2.ModelVersionStatus.State
PLATFORM = "model_platform: 'tensorflow'"


def _status(target: str, name: str) -> list[tuple[int, int, str]]:
    request = get_model_status_pb2.GetModelStatusRequest()
    request.model_spec.name = name
    response = model_stub(target).GetModelStatus(request)
    return [(s.version, s.state, s.status.error_message) for s in response.model_version_status]


def test_unknown_argument_is_named_and_start_up_goes_on() -> None:
    """As TF Serving: ``unknown argument: X`` and the usage on stdout, then start-up with the
    flags that parsed (here it stops on the missing model, exit 255)."""
    result = run_cli("--no_such_flag=1", "stray")
    assert result.stdout.startswith("unknown argument: --no_such_flag=1\nusage: ")
    assert "\tint32\t" in result.stdout
    assert result.stdout.endswith(
        "Failed to start server. Error: INVALID_ARGUMENT: Both server_options.model_base_path "
        "and server_options.model_config_file are empty!\n"
    )
    assert result.returncode == 255


def test_batching_file_without_enable_batching_is_an_error() -> None:
    result = run_cli("--model_base_path=/tmp", "--batching_parameters_file=/tmp/b.txt")
    assert result.returncode == 255
    assert (
        "Failed to start server. Error: INVALID_ARGUMENT: server_options.batching_parameters_file"
        " is set without setting server_options.enable_batching to true." in result.stdout
    )


def _version_dirs(testdata_dir: Path, base: Path, *names: str) -> None:
    source = testdata_dir / "saved_model_half_plus_two_2_versions" / "00000123"
    for name in names:
        shutil.copytree(source, base / name)


def test_discovery_failed_load_and_sigterm(
    start_model_server, testdata_dir: Path, tmp_path: Path
) -> None:
    good = tmp_path / "good"
    _version_dirs(testdata_dir, good, "0007", ".99", "abc")
    broken = tmp_path / "broken" / "1"
    broken.mkdir(parents=True)
    (broken / "saved_model.pb").write_bytes(b"not a saved model")
    config = tmp_path / "models.config"
    config.write_text(
        "model_config_list {\n"
        f"  config {{ name: 'good' base_path: '{good}' model_platform: 'tensorflow'"
        "    model_version_policy { all {} } }\n"
        f"  config {{ name: 'broken' base_path: '{tmp_path / 'broken'}'"
        " model_platform: 'tensorflow' }\n"
        "}\n"
    )
    server = start_model_server(f"--model_config_file={config}", "--max_num_load_retries=0")
    assert _status(server.grpc_target, "good") == [(7, State.AVAILABLE, "")]
    [(version, state, message)] = _status(server.grpc_target, "broken")
    assert (version, state) == (1, State.END)
    assert "Loading servable: {name: broken version: 1} failed" in message
    response = prediction_stub(server.grpc_target).Predict(
        predict_request("good", {"x": float_tensor([[4.0]])}, version=7)
    )
    np.testing.assert_array_equal(output_array(response.outputs["y"]), [[4.0]])
    started = time.monotonic()
    assert server.stop(signal.SIGTERM) == 0
    assert time.monotonic() - started < 10


def test_polling_loads_new_version_and_unloads_old(
    start_model_server, testdata_dir: Path, tmp_path: Path
) -> None:
    base = tmp_path / "model"
    _version_dirs(testdata_dir, base, "123")
    server = start_model_server(
        "--model_name=polled",
        f"--model_base_path={base}",
        "--file_system_poll_wait_seconds=1",
        "--max_num_load_retries=0",
    )
    assert _status(server.grpc_target, "polled") == [(123, State.AVAILABLE, "")]
    staging = tmp_path / "staging"
    _version_dirs(testdata_dir, staging, "124")
    (staging / "124").rename(base / "124")  # appears atomically
    wait_for(
        lambda: _status(server.grpc_target, "polled")
        == [(124, State.AVAILABLE, ""), (123, State.END, "")]
    )
    stub = prediction_stub(server.grpc_target)
    latest = stub.Predict(predict_request("polled", {"x": float_tensor([[1.0]])}))
    assert latest.model_spec.version.value == 124
    with pytest.raises(grpc.RpcError) as caught:
        stub.Predict(predict_request("polled", {"x": float_tensor([[1.0]])}, version=123))
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND


def test_reload_config_over_grpc(start_model_server, testdata_dir: Path) -> None:
    server = start_model_server(
        "--model_name=first",
        f"--model_base_path={testdata_dir / 'saved_model_half_plus_three'}",
        "--max_num_load_retries=0",
    )
    request = model_management_pb2.ReloadConfigRequest()
    model = request.config.model_config_list.config.add()
    model.name = "second"
    model.base_path = str(testdata_dir / "saved_model_half_plus_two_2_versions")
    model.model_platform = "tensorflow"
    model.model_version_policy.specific.versions.append(123)
    model.version_labels["stable"] = 123
    response = model_stub(server.grpc_target).HandleReloadConfigRequest(request)
    assert response.status.error_code == 0
    stub = prediction_stub(server.grpc_target)
    result = stub.Predict(predict_request("second", {"x": float_tensor([[2.0]])}, label="stable"))
    assert result.model_spec.version.value == 123
    np.testing.assert_array_equal(output_array(result.outputs["y"]), [[3.0]])
    with pytest.raises(grpc.RpcError) as caught:
        stub.Predict(predict_request("first", {"x": float_tensor([1.0])}))
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND

    bad = model_management_pb2.ReloadConfigRequest()
    bad.config.CopyFrom(request.config)
    bad.config.model_config_list.config[0].version_labels["stable"] = 999
    with pytest.raises(grpc.RpcError) as caught:
        model_stub(server.grpc_target).HandleReloadConfigRequest(bad)
    assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "version 999 of model second" in caught.value.details()
    kept = stub.Predict(predict_request("second", {"x": float_tensor([[2.0]])}, label="stable"))
    assert kept.model_spec.version.value == 123  # the rejected config changed no label


def _write_warmup(version_dir: Path, inputs: dict[str, list[float]], copies: int) -> None:
    import tensorflow as tf
    from tensorflow_serving.apis import prediction_log_pb2

    log = prediction_log_pb2.PredictionLog()
    request = log.predict_log.request
    request.model_spec.name = "ignored"
    for alias, values in inputs.items():
        request.inputs[alias].CopyFrom(float_tensor(values))
    target = version_dir / "assets.extra" / "tf_serving_warmup_requests"
    target.parent.mkdir(parents=True, exist_ok=True)
    with tf.io.TFRecordWriter(str(target)) as writer:
        for _ in range(copies):
            writer.write(log.SerializeToString())


def test_warmup_requests_run_before_available(
    start_model_server, testdata_dir: Path, tmp_path: Path
) -> None:
    source = testdata_dir / "saved_model_half_plus_three"
    shutil.copytree(source, tmp_path / "warm")
    shutil.copytree(source, tmp_path / "cold")
    _write_warmup(tmp_path / "warm" / "00000123", {"x": [1.0, 2.0]}, copies=3)
    _write_warmup(tmp_path / "cold" / "00000123", {"wrong": [1.0]}, copies=1)
    config = tmp_path / "models.config"
    config.write_text(
        "model_config_list {\n"
        f"  config {{ name: 'warm' base_path: '{tmp_path / 'warm'}' {PLATFORM} }}\n"
        f"  config {{ name: 'cold' base_path: '{tmp_path / 'cold'}' {PLATFORM} }}\n"
        "}\n"
    )
    server = start_model_server(f"--model_config_file={config}", "--max_num_load_retries=0")
    assert _status(server.grpc_target, "warm") == [(123, State.AVAILABLE, "")]
    assert "Number of warmup records read: 3." in server.log
    [(version, state, message)] = _status(server.grpc_target, "cold")
    assert (version, state) == (123, State.END)
    assert "Missing but required: {x}." in message


def test_port_in_use_fails_fast_with_clear_error(start_model_server, testdata_dir: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        server = start_model_server(
            f"--port={port}",
            "--model_name=h3",
            f"--model_base_path={testdata_dir / 'saved_model_half_plus_three'}",
            "--max_num_load_retries=0",
            wait=False,
        )
        assert server.process.wait(timeout=60) == 255
    assert "Failed to start server. Error: UNKNOWN: " in server.log
    assert str(port) in server.log


def test_sigint_exits_cleanly(start_model_server, testdata_dir: Path) -> None:
    server = start_model_server(
        "--model_name=h3",
        f"--model_base_path={testdata_dir / 'saved_model_half_plus_three'}",
        "--max_num_load_retries=0",
    )
    assert server.stop(signal.SIGINT) == 0
    assert "Shutting down" in server.log


def test_grpc_socket_path_serves_grpc_on_a_unix_socket_too(
    start_model_server, testdata_dir: Path, tmp_path: Path
) -> None:
    """``--grpc_socket_path`` (TF Serving's flag): gRPC on the socket and on the TCP port; a
    restarted server binds the same path again (the old socket file is replaced)."""
    socket_path = tmp_path / "grpc.sock"
    flags = (
        "--model_name=h3",
        f"--model_base_path={testdata_dir / 'saved_model_half_plus_three'}",
        "--max_num_load_retries=0",
        f"--grpc_socket_path={socket_path}",
    )
    request = predict_request("h3", {"x": float_tensor([1.0, 3.0])})
    for _ in range(2):
        server = start_model_server(*flags)
        assert f"Running gRPC ModelServer at UNIX socket {socket_path} ..." in server.log
        for target in (f"unix:{socket_path}", server.grpc_target):
            response = prediction_stub(target).Predict(request, timeout=30)
            np.testing.assert_allclose(output_array(response.outputs["y"]), [3.5, 4.5])
        assert server.stop() == 0


def test_grpc_socket_path_that_cannot_be_bound_fails_start(
    start_model_server, testdata_dir: Path, tmp_path: Path
) -> None:
    server = start_model_server(
        "--model_name=h3",
        f"--model_base_path={testdata_dir / 'saved_model_half_plus_three'}",
        "--max_num_load_retries=0",
        f"--grpc_socket_path={tmp_path / 'no_such_dir' / 'grpc.sock'}",
        wait=False,
    )
    assert server.process.wait(timeout=60) == 255
    assert "Failed to start server. Error: UNKNOWN: " in server.log
    assert "grpc.sock" in server.log
