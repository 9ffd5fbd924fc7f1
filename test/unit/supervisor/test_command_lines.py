"""Model server processes: their text-proto config files and command lines."""

from __future__ import annotations

from pathlib import Path

import pytest
from sagemaker_tfs.model_discovery import ModelSpec, model_spec
from sagemaker_tfs.ports import Instance
from sagemaker_tfs.settings import BatchingConfig
from sagemaker_tfs.supervisor.model_servers.command_lines import (
    MONITORING_PATH,
    model_server_args,
    quote_text_proto,
    render_batching_config,
    render_model_config,
    render_monitoring_config,
)
from stack_configs import EVERY_VARIABLE, StackConfigBuilder, make_model


def test_model_config_text() -> None:
    text = render_model_config([ModelSpec("a", "/m/a"), ModelSpec("b", "/m/b")])
    assert text == (
        "model_config_list: {\n"
        '  config: {\n    name: "a"\n    base_path: "/m/a"\n    model_platform: "tensorflow"\n'
        "  },\n"
        '  config: {\n    name: "b"\n    base_path: "/m/b"\n    model_platform: "tensorflow"\n'
        "  }\n}\n"
    )


def test_model_config_serves_every_version_found(tmp_path: Path) -> None:
    base = make_model(make_model(tmp_path / "m", "00000123"), "124")
    (base / "125").mkdir()  # no SavedModel in it: not a version
    (base / "notes").mkdir()
    text = render_model_config([model_spec("m", base), ModelSpec("n", "/m/n", (7,))])
    assert text == (
        "model_config_list: {\n"
        f'  config: {{\n    name: "m"\n    base_path: "{base}"\n    model_platform: "tensorflow"\n'
        "    model_version_policy: {\n      specific: {\n"
        "        versions: 123\n        versions: 124\n      }\n    }\n"
        "  },\n"
        '  config: {\n    name: "n"\n    base_path: "/m/n"\n    model_platform: "tensorflow"\n'
        "    model_version_policy: {\n      specific: {\n        versions: 7\n      }\n    }\n"
        "  }\n}\n"
    )


def test_model_config_is_what_tf_serving_parses(tmp_path: Path) -> None:
    """The text parses as TF Serving's ModelServerConfig proto (what the real binary reads)
    into a specific version policy, and our model server reads the same policy from it."""
    text_format = pytest.importorskip("google.protobuf.text_format")
    config_pb2 = pytest.importorskip("tensorflow_serving.config.model_server_config_pb2")
    from sagemaker_tfs.model_server.model_server_config import model_specs

    base = make_model(make_model(tmp_path / "m", "00000123"), "00000124")
    config = text_format.Parse(render_model_config([model_spec("m", base)]),
                               config_pb2.ModelServerConfig())  # fmt: skip
    (model,) = config.model_config_list.config
    assert model.model_version_policy.WhichOneof("policy_choice") == "specific"
    assert list(model.model_version_policy.specific.versions) == [123, 124]
    (spec,) = model_specs(config)
    assert spec.policy.select([122, 123, 124, 125]) == [124, 123]


def test_model_config_quotes_untrusted_text() -> None:
    evil = 'x"\n  base_path: "/etc\\'
    text = render_model_config([ModelSpec(evil, "/m/\x01")])
    assert 'name: "x\\"\\n  base_path: \\"/etc\\\\"' in text
    assert 'base_path: "/m/\\001"' in text
    assert text.count("\n") == 7  # no line was injected
    assert quote_text_proto("plain") == '"plain"'


def test_batching_file_text() -> None:
    assert render_batching_config(BatchingConfig(8, 1000, 4, 100)) == (
        "max_batch_size { value: 8 }\n"
        "batch_timeout_micros { value: 1000 }\n"
        "num_batch_threads { value: 4 }\n"
        "max_enqueued_batches { value: 100 }\n"
    )


def test_model_server_args(stack_config: StackConfigBuilder) -> None:
    config = stack_config()
    assert model_server_args(Instance(9000, 8501), "/w/models.config", config, None) == [
        "--port=9000",
        "--rest_api_port=8501",
        "--model_config_file=/w/models.config",
        "--max_num_load_retries=0",
        "--rest_api_timeout_in_ms=60000",
        f"--monitoring_config_file={config.work.root}/monitoring.config",
        "--tensorflow_inter_op_parallelism=2",
        "--tensorflow_intra_op_parallelism=2",
        "--rest_api_num_threads=8",
        f"--grpc_socket_path={config.work.root}/grpc-9000.sock",
    ]


@pytest.mark.parametrize("cpus", [1, 3, 96])
def test_the_model_servers_pools_follow_the_containers_cpus(
    stack_config: StackConfigBuilder, cpus: int
) -> None:
    """TensorFlow's pools and the REST threads are passed sized for the container's CPUs,
    whatever the binary would count itself (TF Serving counts the machine's cores)."""
    args = model_server_args(Instance(9000, 8501), "/c", stack_config(cpu_count=cpus), None)
    assert f"--tensorflow_inter_op_parallelism={cpus}" in args
    assert f"--tensorflow_intra_op_parallelism={cpus}" in args
    assert f"--rest_api_num_threads={4 * cpus}" in args


@pytest.mark.parametrize(
    ("env", "timeout_ms"),
    [
        ({"SAGEMAKER_MODEL_SERVER_TIMEOUT": "3600"}, 3_600_000),
        ({"SAGEMAKER_BATCH": "true"}, 600_000),
        ({"SAGEMAKER_NGINX_PROXY_READ_TIMEOUT_SECONDS": "300"}, 300_000),
        ({"SAGEMAKER_GUNICORN_TIMEOUT_SECONDS": "90"}, 90_000),
    ],
)
def test_rest_api_timeout_follows_the_stack(
    stack_config: StackConfigBuilder, env: dict[str, str], timeout_ms: int
) -> None:
    """The model server's REST timeout (JSON/CSV without inference.py) is as long as the
    stack lets a request run: the umbrella variable, Batch's 600 s or nginx's timeout."""
    args = model_server_args(Instance(1, 2), "/c", stack_config(env), None)
    assert f"--rest_api_timeout_in_ms={timeout_ms}" in args


def test_monitoring_config_is_what_tf_serving_parses(tmp_path: Path) -> None:
    """The model servers export TF Serving's metrics at /monitoring/prometheus/metrics."""
    from google.protobuf import text_format
    from sagemaker_tfs.model_server.flag_file_protos import MonitoringConfig

    config = text_format.Parse(render_monitoring_config(), MonitoringConfig())
    assert config.prometheus_config.enable
    assert config.prometheus_config.path == "/monitoring/prometheus/metrics" == MONITORING_PATH


def test_model_server_args_batching_parallelism_gpu(stack_config: StackConfigBuilder) -> None:
    config = stack_config(EVERY_VARIABLE, has_gpu=lambda: True)
    args = model_server_args(Instance(1, 2), "/c", config, "/w/batching.config")
    assert args[4] == "--rest_api_timeout_in_ms=900000"
    assert args[6:] == [
        "--enable_batching=true",
        "--batching_parameters_file=/w/batching.config",
        "--tensorflow_inter_op_parallelism=2",
        "--tensorflow_intra_op_parallelism=3",
        "--rest_api_num_threads=8",
        "--per_process_gpu_memory_fraction=0.4",
        f"--grpc_socket_path={config.work.root}/grpc-1.sock",
    ]


def test_no_socket_path_that_cannot_be_bound(stack_config: StackConfigBuilder) -> None:
    """A work directory too deep for a socket address (108 bytes) leaves gRPC on TCP only."""
    config = stack_config(work_dir="w" * 100)
    assert config.work.grpc_socket_path(9000) is None
    args = model_server_args(Instance(9000, 8501), "/c", config, None)
    assert not any(arg.startswith("--grpc_socket_path") for arg in args)
