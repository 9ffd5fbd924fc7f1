"""From parsed flags to the settings of each part, with TF Serving's start-up checks.

Each function reads ``ServerOptions`` once and returns what one part of the server takes:
the checks across flags (``check_options``, TF Serving's messages), the TensorFlow session
config, the servable loader (SavedModel or ``model.tflite``, batching, warm-up), the gRPC
settings and the monitoring path. A problem raises ``ServingError``, which ``main`` reports
as TF Serving does (``Failed to start server. Error: CODE: message``, exit 255).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from sagemaker_tfs.container_limits import describe_limits, stack_cpus
from sagemaker_tfs.model_server.errors import invalid_argument
from sagemaker_tfs.model_server.flag_file_protos import MonitoringConfig, read_flag_file
from sagemaker_tfs.model_server.flags import (
    FLAGS,
    ServerOptions,
    changed_runtime_flags,
    render_value,
)

if TYPE_CHECKING:  # these import TensorFlow; main imports them after it is quiet
    import tensorflow as tf

    from sagemaker_tfs.model_server.grpc.server import GrpcSettings
    from sagemaker_tfs.model_server.serving.batch_scheduler import BatchScheduler
    from sagemaker_tfs.model_server.serving.manager import ServableLoader
    from sagemaker_tfs.model_server.serving.servable import Servable

logger = logging.getLogger(__name__)
PER_MODEL_BATCHING_FILE = "batching_params.pbtxt"


def check_options(options: ServerOptions) -> None:
    """The checks TF Serving makes across flags before it starts anything."""
    if not options.model_base_path and not options.model_config_file:
        raise invalid_argument(
            "Both server_options.model_base_path and server_options.model_config_file are empty!"
        )
    if options.port == 0 and not options.grpc_socket_path:
        raise invalid_argument(
            "At least one of server_options.grpc_port or server_options.grpc_socket_path "
            "must be set."
        )
    if (
        options.batching_parameters_file
        and not options.enable_batching
        and not options.platform_config_file
    ):
        raise invalid_argument(
            "server_options.batching_parameters_file is set without setting "
            "server_options.enable_batching to true."
        )
    if (
        min(
            options.tensorflow_session_parallelism,
            options.tensorflow_intra_op_parallelism,
            options.tensorflow_inter_op_parallelism,
        )
        > 0
    ):
        raise invalid_argument(
            "Either configure server_options.tensorflow_session_parallelism or "
            "(server_options.tensorflow_intra_op_parallelism, "
            "server_options.tensorflow_inter_op_parallelism) separately. "
            "You cannot configure all."
        )
    if options.use_alts_credentials and options.ssl_config_file:
        raise invalid_argument(
            "Either use_alts_credentials must be false or ssl_config_file must be empty."
        )


def log_flags(options: ServerOptions) -> None:
    """The flags in effect, once, and a line for each given flag that has no effect here."""
    given = [
        f"--{flag.name}={render_value(flag, getattr(options, flag.name))}"
        for flag in FLAGS
        if getattr(options, flag.name) != flag.default
    ]
    logger.info("Flags: %s; container: %s", " ".join(given) or "(all defaults)", describe_limits())
    for name in changed_runtime_flags(options):
        logger.warning(
            "--%s has no effect in this model server: it tunes TF Serving's C++ runtime", name
        )


def session_config(options: ServerOptions) -> tf.compat.v1.ConfigProto:
    """The sessions' ConfigProto: ``--tensorflow_session_config_file``, then the thread and
    GPU flags over it (always, as TF Serving does, even at their 0 defaults). A pool left at
    0 ("automatic") gets the container's CPUs: TensorFlow's own choice counts the machine's
    cores, not the CPU quota."""
    import tensorflow as tf

    config = tf.compat.v1.ConfigProto(allow_soft_placement=True)
    if options.tensorflow_session_config_file:
        read_flag_file(options.tensorflow_session_config_file, config)
    intra = options.tensorflow_intra_op_parallelism
    inter = options.tensorflow_inter_op_parallelism
    if intra <= 0 and inter <= 0:
        intra = inter = options.tensorflow_session_parallelism
    config.intra_op_parallelism_threads = intra if intra > 0 else stack_cpus()
    config.inter_op_parallelism_threads = inter if inter > 0 else stack_cpus()
    config.gpu_options.per_process_gpu_memory_fraction = options.per_process_gpu_memory_fraction
    logger.info(
        "TensorFlow sessions: %d intra-op and %d inter-op threads",
        config.intra_op_parallelism_threads,
        config.inter_op_parallelism_threads,
    )
    return config


def _size_eager_pools(config: tf.compat.v1.ConfigProto) -> None:
    """TensorFlow's process-wide pools (eager ops, and the CPU device whichever of them or a
    session makes it first) take the sessions' sizes; too late once TensorFlow has run an op."""
    import tensorflow as tf

    try:
        tf.config.threading.set_intra_op_parallelism_threads(config.intra_op_parallelism_threads)
        tf.config.threading.set_inter_op_parallelism_threads(config.inter_op_parallelism_threads)
    except RuntimeError as error:
        logger.debug("TensorFlow's eager pools keep their sizes: %s", error)


def batch_scheduler(options: ServerOptions) -> BatchScheduler | None:
    """The batch scheduler every servable shares, or None when batching is off (or when
    each model brings its own parameters)."""
    from sagemaker_tfs.model_server.serving.batch_scheduler import BatchScheduler
    from sagemaker_tfs.model_server.serving.batching_parameters import load_batching_parameters

    if not options.enable_batching:
        logger.info("Batching disabled")
        return None
    try:
        parameters = load_batching_parameters(options.batching_parameters_file)
    except (OSError, ValueError) as error:
        raise invalid_argument(f"Invalid batching parameters: {error}") from None
    if options.enable_per_model_batching_parameters:
        logger.info("Batching per model (%s in each version)", PER_MODEL_BATCHING_FILE)
        return None
    logger.info("Batching enabled: %s", parameters.describe())
    return BatchScheduler(parameters)


class _PerModelBatching:
    """``--enable_per_model_batching_parameters``: each version's ``batching_params.pbtxt``
    gives its own scheduler (the global file's thread count still applies); a version without
    the file is not batched."""

    def __init__(self, options: ServerOptions) -> None:
        from sagemaker_tfs.model_server.serving.batching_parameters import load_batching_parameters

        self._threads = load_batching_parameters(options.batching_parameters_file).num_batch_threads
        self._schedulers: dict[str, BatchScheduler] = {}

    def scheduler(self, version_dir: str) -> BatchScheduler | None:
        import dataclasses

        from sagemaker_tfs.model_server.serving.batch_scheduler import BatchScheduler
        from sagemaker_tfs.model_server.serving.batching_parameters import load_batching_parameters

        path = Path(version_dir) / PER_MODEL_BATCHING_FILE
        if not path.is_file():
            return None
        if version_dir not in self._schedulers:
            parameters = dataclasses.replace(
                load_batching_parameters(str(path)), num_batch_threads=self._threads
            )
            logger.info("Batching %s: %s", version_dir, parameters.describe())
            self._schedulers[version_dir] = BatchScheduler(parameters)
        return self._schedulers[version_dir]


def servable_loader(options: ServerOptions, scheduler: BatchScheduler | None) -> ServableLoader:
    """What the manager calls to load a version: its SavedModel (or ``model.tflite`` with
    ``--prefer_tflite_model``), its batcher, then its warm-up requests."""
    from sagemaker_tfs.model_server.serving import warmup
    from sagemaker_tfs.model_server.serving.saved_model_servable import (
        SavedModelServable,
        ServableOptions,
    )
    from sagemaker_tfs.model_server.serving.tflite_servable import TfLiteServable, tflite_path

    tf_config = session_config(options)
    _size_eager_pools(tf_config)
    tags = tuple(tag for tag in options.saved_model_tags.split(",") if tag) or ("serve",)
    servable_options = ServableOptions(tags, options.enable_signature_method_name_check)
    per_model = (
        _PerModelBatching(options)
        if options.enable_batching and options.enable_per_model_batching_parameters
        else None
    )

    def load(name: str, version: int, path: str) -> Servable:
        tflite = tflite_path(path) if options.prefer_tflite_model else None
        if tflite is not None:
            servable: Servable = TfLiteServable.load(
                name,
                version,
                tflite,
                options.num_tflite_pools,
                options.num_tflite_interpreters_per_pool,
            )
        else:
            servable = SavedModelServable.load(name, version, path, tf_config, servable_options)
        servable.set_batcher(per_model.scheduler(path) if per_model else scheduler)
        if options.enable_model_warmup:
            try:
                warmup.run_warmup(servable, path, options.num_request_iterations_for_warmup)
            except BaseException:
                servable.close()
                raise
        return servable

    return load


def grpc_settings(options: ServerOptions) -> GrpcSettings:
    from sagemaker_tfs.model_server.grpc.grpc_options import (
        parse_channel_arguments,
        read_ssl_config,
    )
    from sagemaker_tfs.model_server.grpc.server import GrpcSettings

    return GrpcSettings(
        port=options.port,
        socket_path=options.grpc_socket_path,
        channel_arguments=tuple(parse_channel_arguments(options.grpc_channel_arguments)),
        tls=read_ssl_config(options.ssl_config_file) if options.ssl_config_file else None,
        health_service=options.enable_grpc_healthcheck_service,
        tensor_content=options.enable_serialization_as_tensor_content,
    )


def monitoring_path(options: ServerOptions) -> str | None:
    """The Prometheus endpoint's path from ``--monitoring_config_file`` (None: no endpoint).
    TF Serving reads the file only when the REST API is on."""
    from sagemaker_tfs.model_server.monitoring import DEFAULT_PATH

    if not options.monitoring_config_file or not options.rest_api_port:
        return None
    config = read_flag_file(options.monitoring_config_file, MonitoringConfig())
    if not config.prometheus_config.enable:
        return None
    return config.prometheus_config.path or DEFAULT_PATH
