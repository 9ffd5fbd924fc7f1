"""Command line parsing: forms, booleans, defaults, and the errors TF Serving reports."""

from __future__ import annotations

import pytest
from sagemaker_tfs.model_server.flags import FlagError, ServerOptions, parse_flags


def test_equals_and_separate_value_forms() -> None:
    options = parse_flags(
        ["--port=9000", "--rest_api_port", "9001", "--model_name", "m", "--model_base_path=/p"]
    )
    assert (options.port, options.rest_api_port) == (9000, 9001)
    assert (options.model_name, options.model_base_path) == ("m", "/p")


def test_defaults_match_tf_serving() -> None:
    options = parse_flags(["--model_base_path=/p"])
    assert options == ServerOptions(model_base_path="/p")
    assert options.port == 8500 and options.model_name == "default"
    assert options.max_num_load_retries == 5 and options.file_system_poll_wait_seconds == 1


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--enable_batching"], True),
        (["--enable_batching=true"], True),
        (["--enable_batching=false"], False),
        ([], False),
    ],
)
def test_boolean_forms(args: list[str], expected: bool) -> None:
    assert parse_flags(["--model_base_path=/p", *args]).enable_batching is expected


def test_grpc_socket_path() -> None:
    """TF Serving's ``--grpc_socket_path``: empty by default (TCP only), else a path."""
    assert parse_flags(["--model_base_path=/p"]).grpc_socket_path == ""
    options = parse_flags(["--model_base_path=/p", "--grpc_socket_path", "/run/g.sock"])
    assert options.grpc_socket_path == "/run/g.sock"


def test_typed_values() -> None:
    options = parse_flags(
        [
            "--model_config_file=/c",
            "--per_process_gpu_memory_fraction=0.5",
            "--tensorflow_intra_op_parallelism=3",
            "--max_num_load_retries=0",
        ]
    )
    assert options.per_process_gpu_memory_fraction == 0.5
    assert options.tensorflow_intra_op_parallelism == 3
    assert options.max_num_load_retries == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--model_base_path=/p", "--bogus=1"], "Unknown command line flag 'bogus'"),
        (["--model_base_path=/p", "--port=abc"], "Illegal value 'abc' specified for flag 'port'"),
        (["--model_base_path=/p", "--enable_batching=maybe"], "flag 'enable_batching'"),
        (
            ["--model_base_path=/p", "--batching_parameters_file=/b"],
            "--batching_parameters_file is set without setting --enable_batching",
        ),
        (["--model_base_path=/p", "--model_config_file=/c"], "cannot both be set"),
        ([], "Both --model_base_path and --model_config_file are empty"),
        (["--model_base_path=/p", "--port"], "Missing value for flag 'port'"),
        (["--model_base_path=/p", "stray"], "Unexpected positional argument: stray"),
    ],
)
def test_errors_name_the_problem(args: list[str], message: str) -> None:
    with pytest.raises(FlagError) as caught:
        parse_flags(args)
    assert message in str(caught.value)
