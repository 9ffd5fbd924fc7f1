"""The model servers' command lines and the config files they read (models, batching,
monitoring); the processes are started by ``model_server_launcher``.

The model server is the real ``tensorflow_model_server`` when it is on PATH, otherwise
``sagemaker-tfs model-server``, which takes the same flags.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Sequence

from sagemaker_tfs.model_discovery import ModelSpec
from sagemaker_tfs.ports import Instance
from sagemaker_tfs.settings import BatchingConfig
from sagemaker_tfs.stack_config import StackConfig
from sagemaker_tfs.supervisor.metrics.model_servers import MONITORING_PATH

TFS_BINARY = "tensorflow_model_server"
# Every model server exports TF Serving's Prometheus metrics on its REST port at
# ``MONITORING_PATH`` (--monitoring_config_file, the file written once into the work directory).
MONITORING_CONFIG_FILE = "monitoring.config"
# TF Serving's rule for --rest_api_num_threads (4 per CPU), applied to the container's CPUs.
REST_THREADS_PER_CPU = 4


def model_server_command() -> list[str]:
    """The real TF Serving binary if installed, else our compatible Python server."""
    binary = shutil.which(TFS_BINARY)
    if binary:
        return [binary]
    return [sys.executable, "-m", "sagemaker_tfs.cli", "model-server"]


def is_python_model_server() -> bool:
    return shutil.which(TFS_BINARY) is None


# What would end or break a text-format string literal: quotes, backslashes, control characters.
_TEXT_PROTO_ESCAPES = str.maketrans(
    {
        **{chr(code): f"\\{code:03o}" for code in (*range(0x20), 0x7F)},
        "\n": "\\n",
        '"': '\\"',
        "\\": "\\\\",
    }
)


def quote_text_proto(value: str) -> str:
    """A protobuf text-format string literal: nothing in ``value`` can end the string."""
    return '"' + value.translate(_TEXT_PROTO_ESCAPES) + '"'


def render_version_policy(versions: Sequence[int]) -> str:
    """``model_version_policy`` serving exactly ``versions`` ('' for none: TF Serving's
    default, the newest version only)."""
    if not versions:
        return ""
    lines = "".join(f"        versions: {int(version)}\n" for version in versions)
    return "    model_version_policy: {\n      specific: {\n" + lines + "      }\n    }\n"


def render_model_config(models: Sequence[ModelSpec]) -> str:
    """TF Serving's text ``ModelServerConfig`` serving ``models``, each with every version
    found on disk (a ``specific`` version policy, as the reference container writes it), so
    requests can pin any of them with ``tfs-model-version``."""
    entries = [
        "  config: {\n"
        f"    name: {quote_text_proto(model.name)}\n"
        f"    base_path: {quote_text_proto(model.base_path)}\n"
        '    model_platform: "tensorflow"\n'
        f"{render_version_policy(model.versions)}"
        "  }"
        for model in models
    ]
    return "model_config_list: {\n" + ",\n".join(entries) + "\n}\n"


def render_batching_config(batching: BatchingConfig) -> str:
    """TF Serving's batching parameters file, one parameter per line."""
    return (
        f"max_batch_size {{ value: {batching.max_batch_size} }}\n"
        f"batch_timeout_micros {{ value: {batching.batch_timeout_micros} }}\n"
        f"num_batch_threads {{ value: {batching.num_batch_threads} }}\n"
        f"max_enqueued_batches {{ value: {batching.max_enqueued_batches} }}\n"
    )


def render_monitoring_config() -> str:
    """TF Serving's text ``MonitoringConfig``: Prometheus on at ``MONITORING_PATH``."""
    return (
        f"prometheus_config {{\n  enable: true\n  path: {quote_text_proto(MONITORING_PATH)}\n}}\n"
    )


def monitoring_config_path(config: StackConfig) -> str:
    return os.path.join(config.work.root, MONITORING_CONFIG_FILE)


def model_server_args(
    instance: Instance,
    model_config_file: str,
    config: StackConfig,
    batching_file: str | None,
) -> list[str]:
    """The flags of one model server process (same for the real binary and ours)."""
    args = [
        f"--port={instance.grpc_port}",
        f"--rest_api_port={instance.rest_port}",
        f"--model_config_file={model_config_file}",
        "--max_num_load_retries=0",
        # JSON/CSV predictions on the REST API may run as long as the stack lets a request run.
        f"--rest_api_timeout_in_ms={config.model_servers.timeout * 1000}",
        f"--monitoring_config_file={monitoring_config_path(config)}",
    ]
    if batching_file is not None:
        args += ["--enable_batching=true", f"--batching_parameters_file={batching_file}"]
    # Sized for the container's CPUs: TF Serving's own defaults count the machine's cores.
    args += [
        f"--tensorflow_inter_op_parallelism={config.model_servers.inter_op_parallelism}",
        f"--tensorflow_intra_op_parallelism={config.model_servers.intra_op_parallelism}",
        f"--rest_api_num_threads={REST_THREADS_PER_CPU * config.cpus}",
    ]
    if config.model_servers.gpu_memory_fraction is not None:
        args.append(f"--per_process_gpu_memory_fraction={config.model_servers.gpu_memory_fraction}")
    return args + grpc_socket_args(instance, config)


def grpc_target(config: StackConfig, instance: Instance) -> str:
    """The model server's gRPC address for the supervisor: its unix socket, else its port."""
    socket_path = config.work.grpc_socket_path(instance.grpc_port)
    return f"unix:{socket_path}" if socket_path else f"127.0.0.1:{instance.grpc_port}"


def grpc_socket_args(instance: Instance, config: StackConfig) -> list[str]:
    """``--grpc_socket_path`` of one model server: the service calls it over that socket."""
    path = config.work.grpc_socket_path(instance.grpc_port)
    return [f"--grpc_socket_path={path}"] if path else []
