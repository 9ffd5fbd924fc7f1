"""``sagemaker-tfs model-server``: wiring, TF Serving's start-up lines, clean SIGTERM.

Start-up order follows TF Serving: parse flags, load every model of the config (failed
loads end in END and do not stop the server), start gRPC, start REST, then print
``NET_LOG: Entering the event loop ...``, the line clients wait for.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the modules that import TensorFlow load in _run, after it is quiet
    from sagemaker_tfs.model_server.batch_scheduler import BatchScheduler
    from sagemaker_tfs.model_server.flags import ServerOptions
    from sagemaker_tfs.model_server.manager import ModelManager, ServableLoader
    from sagemaker_tfs.model_server.model_config import ModelServerConfig
    from sagemaker_tfs.model_server.rest_server import RestServer

logger = logging.getLogger(__name__)
LOG_LEVEL_ENV = "SAGEMAKER_TFS_LOG_LEVEL"


def _configure_logging() -> None:
    """One line per event on stderr; TensorFlow's own INFO chatter silenced."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    level = os.environ.get(LOG_LEVEL_ENV, "INFO").upper()
    logging.basicConfig(
        stream=sys.stderr,
        level=getattr(logging, level, logging.INFO),
        format="%(asctime)s.%(msecs)03d %(levelname).1s %(name)s] %(message)s",
        datefmt="%Y-%m-%d %H:%M:%S",
    )


def import_tensorflow_quietly() -> None:
    """Import TensorFlow with file descriptor 2 muted.

    Its C++ start-up lines (oneDNN, CUDA probing) are written before TF_CPP_MIN_LOG_LEVEL
    takes effect; an import failure still raises a Python exception, reported normally.
    """
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    try:
        import tensorflow  # noqa: F401
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def _announce(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def main(argv: Sequence[str]) -> int:
    """Run the model server until SIGTERM/SIGINT; returns the process exit code."""
    from sagemaker_tfs.model_server.flags import FlagError, parse_flags

    try:
        options = parse_flags(argv)
    except FlagError as error:
        sys.stderr.write(f"sagemaker-tfs model-server: {error}\n")
        return 2
    _configure_logging()
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    try:
        return _run(options, stop)
    except Exception as error:  # noqa: BLE001 - report start-up failures on one line
        logger.error("Model server failed to start: %s", error)
        return 1


class _StartError(Exception):
    """Start-up cannot go on; the message is the one line logged about it."""


def _run(options: ServerOptions, stop: threading.Event) -> int:
    import_tensorflow_quietly()
    import tensorflow as tf

    from sagemaker_tfs.model_server import garbage
    from sagemaker_tfs.model_server.errors import ServingError
    from sagemaker_tfs.model_server.manager import ModelManager

    garbage.freeze_imports()

    tf.get_logger().setLevel(logging.ERROR)
    try:
        config = _model_server_config(options)
        scheduler = _batch_scheduler(options)
    except _StartError as error:
        logger.error("%s", error)
        return 1
    manager = ModelManager(
        _servable_loader(options, scheduler),
        max_num_load_retries=options.max_num_load_retries,
        load_retry_interval_seconds=options.load_retry_interval_micros / 1e6,
        poll_wait_seconds=options.file_system_poll_wait_seconds,
    )
    try:
        manager.reload_config(config)
    except ServingError as error:
        logger.error("%s", error.message)
        manager.shutdown()
        return 1
    manager.start_polling()
    try:
        _serve_until_stopped(manager, options, stop)
    finally:
        if scheduler is not None:
            scheduler.shutdown()
        manager.shutdown()
    return 0


def _model_server_config(options: ServerOptions) -> ModelServerConfig:
    """The validated ModelServerConfig of the flags (a file, or one model)."""
    from sagemaker_tfs.model_server import model_config
    from sagemaker_tfs.model_server.errors import ServingError

    try:
        config = model_config.from_options(options)
        model_config.model_specs(config)
    except ServingError as error:
        raise _StartError(f"Invalid model config: {error.message}") from None
    logger.info("Model config: %s", model_config.to_text(config))
    return config


def _batch_scheduler(options: ServerOptions) -> BatchScheduler | None:
    """The one batch scheduler every servable shares, or None when batching is off."""
    from sagemaker_tfs.model_server.batch_scheduler import BatchScheduler
    from sagemaker_tfs.model_server.batching_parameters import load_batching_parameters

    if not options.enable_batching:
        logger.info("Batching disabled")
        return None
    try:
        parameters = load_batching_parameters(options.batching_parameters_file)
    except (OSError, ValueError) as error:
        raise _StartError(f"Invalid batching parameters: {error}") from None
    logger.info("Batching enabled: %s", parameters.describe())
    return BatchScheduler(parameters)


def _servable_loader(options: ServerOptions, scheduler: BatchScheduler | None) -> ServableLoader:
    """What the manager calls to load a version: a session, the batcher, then warm-up."""
    from sagemaker_tfs.model_server import warmup
    from sagemaker_tfs.model_server.servable import Servable, session_config

    tf_config = session_config(
        options.tensorflow_intra_op_parallelism, options.tensorflow_inter_op_parallelism
    )
    if options.per_process_gpu_memory_fraction:
        tf_config.gpu_options.per_process_gpu_memory_fraction = (
            options.per_process_gpu_memory_fraction
        )

    def load(name: str, version: int, path: str) -> Servable:
        servable = Servable.load(name, version, path, tf_config)
        servable.set_batcher(scheduler)
        if options.enable_model_warmup:
            try:
                warmup.run_warmup(servable, path)
            except BaseException:
                servable.close()
                raise
        return servable

    return load


def _serve_until_stopped(
    manager: ModelManager, options: ServerOptions, stop: threading.Event
) -> None:
    """gRPC, then REST, then the ready line; on ``stop``, REST and gRPC close in that order."""
    from sagemaker_tfs.model_server import grpc_api

    grpc_server = None
    rest_server = None
    try:
        grpc_server = grpc_api.serve(
            manager, options.port, options.grpc_max_message_bytes, options.grpc_socket_path
        )
        _announce(f"Running gRPC ModelServer at 0.0.0.0:{options.port} ...")
        _announce_socket(options.grpc_socket_path)
        rest_server = _start_rest(manager, options)
        _announce("NET_LOG: Entering the event loop ...")
        while not stop.wait(1.0):
            pass
        logger.info("Shutting down")
    finally:
        if rest_server is not None:
            rest_server.shutdown()
        if grpc_server is not None:
            grpc_server.stop(grace=1.0).wait(3.0)


def _announce_socket(socket_path: str) -> None:
    """TF Serving's line for ``--grpc_socket_path``."""
    if socket_path:
        _announce(f"Running gRPC ModelServer at UNIX socket {socket_path} ...")


def _start_rest(manager: ModelManager, options: ServerOptions) -> RestServer | None:
    """The REST server from ``rest_server`` when the port is set (0 turns REST off)."""
    if not options.rest_api_port:
        return None
    try:
        from sagemaker_tfs.model_server import rest_server
    except ImportError as error:
        logger.warning("REST API not available (%s); serving gRPC only", error)
        return None
    server = rest_server.serve(
        manager, options.rest_api_port, options.rest_api_num_threads, options.rest_api_timeout_in_ms
    )
    _announce(f"Exporting HTTP/REST API at:localhost:{options.rest_api_port} ...")
    return server
