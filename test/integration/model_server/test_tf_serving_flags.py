"""Every ``tensorflow_model_server`` flag, one at a time in TF Serving's syntax, against a real
model server, each checked for what a client sees (``flag_cases.py``); and the command line
itself as TF Serving's binary treats it: ``--version``, ``--help``, bad values, unknown
arguments, unparsable config files."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from flag_cases import CASES, MODEL, TF2_MODEL, TFLITE_CHECK, TFLITE_FLAGS, Workspace
from model_server_process import ServerHandle, run_cli
from sagemaker_tfs.model_server.flags import FLAGS

pytestmark = pytest.mark.slow
SERVER_CASES = {**{name: None for name in CASES}, **{name: None for name in TFLITE_FLAGS}}


def test_every_flag_has_a_case() -> None:
    assert set(SERVER_CASES) | {"version"} == {flag.name for flag in FLAGS}


@pytest.fixture
def workspace(tmp_path: Path, testdata_dir: Path) -> Workspace:
    shutil.copytree(testdata_dir / TF2_MODEL / "00000123", tmp_path / MODEL / "123")
    return Workspace(tmp_path, testdata_dir)


MODEL_FLAGS = ("--model_name=", "--model_base_path=", "--model_config_file=")


@pytest.mark.parametrize("flag", sorted(SERVER_CASES))
def test_flag(flag: str, start_model_server, workspace: Workspace, model_generator) -> None:
    if flag in TFLITE_FLAGS:
        model_generator.write_half_plus_two_tflite(workspace.version_dir)
        args, check = list(TFLITE_FLAGS[flag]), TFLITE_CHECK
    else:
        args, check = CASES[flag](workspace)
    assert any(arg == f"--{flag}" or arg.startswith(f"--{flag}=") for arg in args)
    base = (
        []
        if any(arg.startswith(MODEL_FLAGS) for arg in args)
        else [
            f"--model_name={MODEL}",
            f"--model_base_path={workspace.base}",
        ]
    )
    if not any(arg.startswith("--max_num_load_retries=") for arg in args):
        base.append("--max_num_load_retries=0")  # a failed load must not wait a minute
    server: ServerHandle = start_model_server(*base, *args)
    check(server, workspace)


def test_version_prints_two_lines_and_exits_0() -> None:
    import tensorflow as tf

    result = run_cli("--version", "--port=1")
    assert result.returncode == 0, result.stderr
    first, second = result.stdout.splitlines()
    assert first.startswith("TensorFlow ModelServer: 2.")
    assert "+sagemaker_tfs.sha." in first
    assert second == f"TensorFlow Library: {tf.__version__}"


def test_help_prints_the_usage_and_exits_255() -> None:
    result = run_cli("--help")
    assert result.returncode == 255
    lines = result.stdout.splitlines()
    assert lines[0] == "usage: sagemaker-tfs model-server" and lines[1] == "Flags:"
    assert len(lines) == 2 + len(FLAGS)
    assert "\t--port=8500" in result.stdout
    not_first = run_cli("--bogus", "--help")  # only the first leftover asks for help
    assert not_first.stdout.startswith("unknown argument: --bogus\n")
    assert not_first.returncode == 255  # then start-up fails: no model given


def test_a_value_that_does_not_parse_prints_the_usage_and_exits_255() -> None:
    result = run_cli("--model_base_path=/m", "--port=abc", "--rest_api_port=1.5")
    assert result.returncode == 255
    assert "Couldn't interpret value abc for flag port." in result.stderr
    assert "Couldn't interpret value 1.5 for flag rest_api_port." in result.stderr
    assert result.stdout.startswith("usage: sagemaker-tfs model-server\nFlags:\n")


def test_unknown_arguments_are_named_and_the_server_starts(
    start_model_server, workspace: Workspace
) -> None:
    """``--port 9000`` is two unknown words in TF Serving (only ``--port=9000`` sets it)."""
    server = start_model_server(
        "--rest_api_port", "9", "positional", f"--model_name={MODEL}",
        f"--model_base_path={workspace.base}", "--max_num_load_retries=0",
    )  # fmt: skip
    assert "unknown argument: --rest_api_port\nusage: sagemaker-tfs model-server" in server.log
    from flag_cases import answers_as_usual

    answers_as_usual(server)


def test_an_unparsable_config_file_fails_start_as_tf_serving_does(tmp_path: Path) -> None:
    config = tmp_path / "models.config"
    config.write_text("model_config_list {\n  config { nme: 'x' }\n}\n")
    result = run_cli(f"--model_config_file={config}", "--port=0", "--grpc_socket_path=/tmp/x")
    assert result.returncode == 255
    assert "Error parsing text-format tensorflow.serving.ModelServerConfig: 2:" in result.stderr
    assert result.stdout.endswith(
        f"Failed to start server. Error: INVALID_ARGUMENT: Invalid protobuf file: '{config}'\n"
    )
    missing = run_cli(f"--model_config_file={tmp_path / 'missing'}")
    assert missing.stdout.endswith(
        f"Failed to start server. Error: NOT_FOUND: {tmp_path / 'missing'}; "
        "No such file or directory\n"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--port=0"],
            "At least one of server_options.grpc_port or server_options.grpc_socket_path",
        ),
        (["--grpc_channel_arguments=a=1,"], "grpc_channel_arguments"),
        (["--monitoring_config_file=/no/such/file", "--rest_api_port=1"], "NOT_FOUND"),
        (["--tensorflow_session_config_file=/etc/hostname"], "Invalid protobuf file"),
    ],
)
def test_start_up_failures(args: list[str], message: str, tmp_path: Path) -> None:
    result = run_cli(f"--model_base_path={tmp_path}", *args)
    assert result.returncode == 255
    assert "Failed to start server. Error: " in result.stdout
    assert message in result.stdout


def test_a_rest_port_equal_to_the_grpc_port_serves_grpc_only(
    start_model_server, workspace: Workspace
) -> None:
    from flag_cases import Y, grpc_predict
    from local_ports import free_port

    port = free_port()
    server = start_model_server(
        f"--port={port}", f"--rest_api_port={port}", f"--model_name={MODEL}",
        f"--model_base_path={workspace.base}",
    )  # fmt: skip
    assert "cannot be the same as grpc_port" in server.log
    assert "Exporting HTTP/REST API" not in server.log
    assert grpc_predict(server.grpc_target) == Y
