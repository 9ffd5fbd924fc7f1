"""Flags turned into the parts' settings: TF Serving's start-up checks and messages, gRPC
channel arguments, the TLS and monitoring config files, the session config."""

from __future__ import annotations

from pathlib import Path

import pytest
from sagemaker_tfs.model_server import server_setup
from sagemaker_tfs.model_server.errors import Code, ServingError
from sagemaker_tfs.model_server.flags import ServerOptions, parse_command_line
from sagemaker_tfs.model_server.grpc.grpc_options import (
    merge_channel_arguments,
    parse_channel_arguments,
    read_ssl_config,
)

BASE = "--model_base_path=/m"


def options_of(argv: list[str]) -> ServerOptions:
    """The options of a command line the test means to be whole and right."""
    parsed = parse_command_line(argv)
    assert (parsed.errors, parsed.leftovers) == ([], [])
    return parsed.options


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "Both server_options.model_base_path and server_options.model_config_file are empty!"),
        (
            [BASE, "--port=0"],
            "At least one of server_options.grpc_port or server_options.grpc_socket_path must "
            "be set.",
        ),
        (
            [BASE, "--batching_parameters_file=/b"],
            "server_options.batching_parameters_file is set without setting "
            "server_options.enable_batching to true.",
        ),
        (
            [
                BASE,
                "--tensorflow_session_parallelism=1",
                "--tensorflow_intra_op_parallelism=1",
                "--tensorflow_inter_op_parallelism=1",
            ],
            "You cannot configure all.",
        ),
        (
            [BASE, "--use_alts_credentials", "--ssl_config_file=/s"],
            "Either use_alts_credentials must be false or ssl_config_file must be empty.",
        ),
    ],
)
def test_start_up_checks_give_tf_servings_messages(args: list[str], message: str) -> None:
    with pytest.raises(ServingError) as caught:
        server_setup.check_options(options_of(args))
    assert caught.value.code == Code.INVALID_ARGUMENT
    assert message in caught.value.message


@pytest.mark.parametrize(
    "args",
    [
        [BASE],
        [BASE, "--port=0", "--grpc_socket_path=/tmp/g.sock"],
        [BASE, "--batching_parameters_file=/b", "--platform_config_file=/p"],
        [BASE, "--tensorflow_session_parallelism=2", "--tensorflow_intra_op_parallelism=1"],
        ["--model_config_file=/c", "--model_base_path=/ignored"],
    ],
)
def test_consistent_flags_pass(args: list[str]) -> None:
    server_setup.check_options(options_of(args))


def test_channel_arguments_as_tf_serving_splits_them() -> None:
    assert parse_channel_arguments("") == []
    assert parse_channel_arguments(
        "grpc.max_connection_age_ms=2000,grpc.primary_user_agent=x y,a= 5 ,b=1=2,c=99999999999"
    ) == [
        ("grpc.max_connection_age_ms", 2000),
        ("grpc.primary_user_agent", "x y"),
        ("a", 5),
        ("b", 1),
        ("c", "99999999999"),  # not an int32: a string argument
    ]
    for bad in ("a=1,", "novalue", "a=1,,b=2"):
        with pytest.raises(ServingError) as caught:
            parse_channel_arguments(bad)
        assert caught.value.code == Code.INVALID_ARGUMENT


def test_given_channel_arguments_replace_the_servers_own() -> None:
    defaults = [("grpc.max_receive_message_length", 100), ("grpc.so_reuseport", 0)]
    merged = merge_channel_arguments(defaults, [("grpc.max_receive_message_length", 7)])
    assert merged == [("grpc.so_reuseport", 0), ("grpc.max_receive_message_length", 7)]


def test_ssl_config_holds_pem_text(tmp_path: Path) -> None:
    config = tmp_path / "ssl.config"
    config.write_text('server_key: "KEY" server_cert: "CERT" custom_ca: "CA" client_verify: true')
    tls = read_ssl_config(str(config))
    assert (tls.key, tls.certificate, tls.custom_ca, tls.client_verify) == (
        b"KEY",
        b"CERT",
        b"CA",
        True,
    )
    config.write_text("server_key: 'KEY' nonsense: 1")
    with pytest.raises(ServingError, match="Invalid protobuf file"):
        read_ssl_config(str(config))
    with pytest.raises(ServingError) as caught:
        read_ssl_config(str(tmp_path / "missing"))
    assert caught.value.code == Code.NOT_FOUND


def test_monitoring_path(tmp_path: Path) -> None:
    config = tmp_path / "monitoring.config"
    flags = [BASE, f"--monitoring_config_file={config}", "--rest_api_port=8501"]
    config.write_text('prometheus_config { enable: true path: "/metrics/here" }')
    assert server_setup.monitoring_path(options_of(flags)) == "/metrics/here"
    config.write_text("prometheus_config { enable: true }")
    assert server_setup.monitoring_path(options_of(flags)) == "/monitoring/prometheus/metrics"
    config.write_text("prometheus_config { enable: false path: '/x' }")
    assert server_setup.monitoring_path(options_of(flags)) is None
    assert server_setup.monitoring_path(options_of(flags[:2])) is None  # no REST: not even read
    config.write_text("prometheus_config { enable: yes please }")
    with pytest.raises(ServingError, match="Invalid protobuf file"):
        server_setup.monitoring_path(options_of(flags))


def test_session_config_flags_override_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As TF Serving: the flags win over the file, even at 0, where the container's CPUs (3
    here) replace TensorFlow's automatic choice, which would count the machine's cores."""
    monkeypatch.setattr(server_setup, "stack_cpus", lambda: 3)
    config_file = tmp_path / "session.config"
    config_file.write_text(
        "intra_op_parallelism_threads: 9 inter_op_parallelism_threads: 9 "
        "gpu_options { per_process_gpu_memory_fraction: 0.9 } use_per_session_threads: true"
    )
    config = server_setup.session_config(
        options_of([BASE, f"--tensorflow_session_config_file={config_file}"])
    )
    assert config.use_per_session_threads  # from the file
    assert config.intra_op_parallelism_threads == config.inter_op_parallelism_threads == 3
    assert config.gpu_options.per_process_gpu_memory_fraction == 0.0
    both = server_setup.session_config(options_of([BASE, "--tensorflow_session_parallelism=5"]))
    assert (both.intra_op_parallelism_threads, both.inter_op_parallelism_threads) == (5, 5)
    one = server_setup.session_config(
        options_of(
            [BASE, "--tensorflow_session_parallelism=3", "--tensorflow_intra_op_parallelism=2"]
        )
    )
    assert (one.intra_op_parallelism_threads, one.inter_op_parallelism_threads) == (2, 3)
