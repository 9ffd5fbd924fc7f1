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


def _import_tensorflow_quietly() -> None:
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


def _run(options, stop: threading.Event) -> int:  # type: ignore[no-untyped-def]
    _import_tensorflow_quietly()
    import tensorflow as tf

    from sagemaker_tfs.model_server import batching, grpc_api, model_config, warmup
    from sagemaker_tfs.model_server.errors import ServingError
    from sagemaker_tfs.model_server.manager import ModelManager
    from sagemaker_tfs.model_server.servable import Servable, session_config

    tf.get_logger().setLevel(logging.ERROR)
    try:
        config = model_config.from_options(options)
        model_config.model_specs(config)
    except ServingError as error:
        logger.error("Invalid model config: %s", error.message)
        return 1
    logger.info("Model config: %s", model_config.to_text(config))
    scheduler = None
    if options.enable_batching:
        try:
            parameters = batching.load_batching_parameters(options.batching_parameters_file)
        except (OSError, ValueError) as error:
            logger.error("Invalid batching parameters: %s", error)
            return 1
        logger.info("Batching enabled: %s", parameters.describe())
        scheduler = batching.BatchScheduler(parameters)
    else:
        logger.info("Batching disabled")

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

    manager = ModelManager(
        load,
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
    grpc_server = None
    rest_server = None
    try:
        grpc_server = grpc_api.serve(manager, options.port, options.grpc_max_message_bytes)
        _announce(f"Running gRPC ModelServer at 0.0.0.0:{options.port} ...")
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
        if scheduler is not None:
            scheduler.shutdown()
        manager.shutdown()
    return 0


def _start_rest(manager, options):  # type: ignore[no-untyped-def]
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
