"""``sagemaker-tfs model-server``: the command line, TF Serving's start-up lines, clean SIGTERM.

Start-up order follows TF Serving: parse flags, check them, load every model of the config
(failed loads end in END and do not stop the server), start gRPC, start REST (and the
metrics endpoint), then print ``NET_LOG: Entering the event loop ...``, the line clients
wait for. ``server_setup`` turns the flags into each part's settings.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from collections.abc import Sequence
from importlib import metadata
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the modules that import TensorFlow load in _run, after it is quiet
    import grpc

    from sagemaker_tfs.model_server.flags import ServerOptions
    from sagemaker_tfs.model_server.grpc.server import GrpcSettings
    from sagemaker_tfs.model_server.rest.server import RestServer
    from sagemaker_tfs.model_server.serving.manager import ModelManager

logger = logging.getLogger(__name__)
LOG_LEVEL_ENV = "SAGEMAKER_TFS_LOG_LEVEL"
PROGRAM = "sagemaker-tfs model-server"
EXIT_FAILURE = 255  # TF Serving's main returns -1


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


# Python packages TensorFlow's ``__init__`` imports eagerly that a model server never uses.
# TensorFlow imports Keras's optimizers so that they are registered for SavedModels that
# carry a training state; serving runs signatures only (TF Serving, in C++, has no Keras),
# and a SavedModel's objects whose class is not registered load as generic ones.
UNUSED_PACKAGES = ("keras", "tf_keras")


def leave_out_unused_packages() -> None:
    """Mark the packages of ``UNUSED_PACKAGES`` absent, unless this process already imported
    them: their imports fail, and TensorFlow skips the eager Keras import it guards with
    ``except ImportError``. Keras's import was ~0.1-0.4 s and ~34 MB of TensorFlow's ~2.1-2.5
    s and ~550 MB, and ~0.8 s more where matplotlib is installed (Keras imports it too);
    docs/performance.md."""
    for name in UNUSED_PACKAGES:
        sys.modules.setdefault(name, None)  # type: ignore[arg-type]


def import_tensorflow_quietly() -> None:
    """Import TensorFlow, without the packages it does not need here, with file descriptor 2
    muted.

    Its C++ start-up lines (oneDNN, CUDA probing) are written before TF_CPP_MIN_LOG_LEVEL
    takes effect; an import failure still raises a Python exception, reported normally.
    """
    leave_out_unused_packages()
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


def version_text() -> str:
    """``--version``: TF Serving's two lines (the serving API and TensorFlow this server
    implements and runs, and this package's version in place of TF Serving's source hash)."""

    def installed(*names: str) -> str:
        for name in names:
            try:
                return metadata.version(name)
            except metadata.PackageNotFoundError:
                continue
        return "unknown"

    serving = installed("tensorflow-serving-api")
    return (
        f"TensorFlow ModelServer: {serving}+sagemaker_tfs.sha.{installed('sagemaker-tfs')}\n"
        f"TensorFlow Library: {installed('tensorflow', 'tensorflow-cpu')}\n"
    )


def main(argv: Sequence[str]) -> int:
    """Run the model server until SIGTERM/SIGINT; returns the process exit code.

    As TF Serving's binary: a flag value that does not parse, or ``--help``, prints the usage
    text and exits 255; ``--version`` prints the versions and exits 0; other words that are
    not flags are named (``unknown argument: ...``) and start-up goes on; a start-up failure
    prints ``Failed to start server. Error: CODE: message`` and exits 255.
    """
    from sagemaker_tfs.model_server.flags import parse_command_line, usage

    parsed = parse_command_line(argv)
    if parsed.errors:
        _configure_logging()
        for message in parsed.errors:
            logger.error("%s", message)
        _print(usage(PROGRAM))
        return EXIT_FAILURE
    if parsed.help_requested:
        _print(usage(PROGRAM))
        return EXIT_FAILURE
    options = parsed.options
    if options.version:
        _print(version_text())
        return 0
    if parsed.leftovers:
        _print(f"unknown argument: {parsed.leftovers[0]}\n{usage(PROGRAM)}")
    _configure_logging()
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    try:
        return _run(options, stop)
    except _StartError as error:
        _print(f"Failed to start server. Error: {error}\n")
        return EXIT_FAILURE


def _print(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


class _StartError(Exception):
    """Start-up cannot go on: ``CODE: message`` as TF Serving prints a status."""


def _start_error(error: BaseException) -> _StartError:
    from sagemaker_tfs.model_server.errors import ServingError

    if isinstance(error, ServingError):
        return _StartError(f"{error.code.name}: {error.message}")
    return _StartError(f"UNKNOWN: {error}")


def _run(options: ServerOptions, stop: threading.Event) -> int:
    import_tensorflow_quietly()
    import tensorflow as tf

    from sagemaker_tfs.model_server import model_server_config, server_setup
    from sagemaker_tfs.model_server.errors import ServingError
    from sagemaker_tfs.model_server.monitoring import METRICS
    from sagemaker_tfs.model_server.serving import garbage
    from sagemaker_tfs.model_server.serving.manager import ModelManager

    garbage.freeze_imports()

    tf.get_logger().setLevel(logging.ERROR)
    try:
        server_setup.check_options(options)
        server_setup.log_flags(options)
        config = model_server_config.from_options(options)
        model_server_config.model_specs(config)
        logger.info("Model config: %s", model_server_config.to_text(config))
        scheduler = server_setup.batch_scheduler(options)
        loader = server_setup.servable_loader(options, scheduler)
        grpc_settings = server_setup.grpc_settings(options)
        metrics_path = server_setup.monitoring_path(options)
    except ServingError as error:
        raise _start_error(error) from None
    manager = ModelManager(
        loader,
        max_num_load_retries=options.max_num_load_retries,
        load_retry_interval_seconds=options.load_retry_interval_micros / 1e6,
        poll_wait_seconds=options.file_system_poll_wait_seconds,
        allow_labels_for_unavailable=options.allow_version_labels_for_unavailable_models,
    )
    METRICS.serves = manager.serves
    try:
        manager.reload_config(config)
        manager.start_polling()
        _poll_config_file(manager, options, stop)
        _serve_until_stopped(manager, options, grpc_settings, metrics_path, stop)
    except Exception as error:  # noqa: BLE001 - any start-up failure: TF Serving's one line
        logger.error("Model server failed to start: %s", error)
        raise _start_error(error) from None
    finally:
        if scheduler is not None:
            scheduler.shutdown()
        manager.shutdown()
    return 0


def _poll_config_file(manager: ModelManager, options: ServerOptions, stop: threading.Event) -> None:
    """``--model_config_file_poll_wait_seconds`` > 0: re-apply the file periodically."""
    from sagemaker_tfs.model_server.model_config_polling import ConfigFilePoller

    period = options.model_config_file_poll_wait_seconds
    if options.model_config_file and period > 0:
        logger.info("Polling %s every %d s", options.model_config_file, period)
        ConfigFilePoller(manager, options.model_config_file, period, stop).start()


def _serve_until_stopped(
    manager: ModelManager,
    options: ServerOptions,
    grpc_settings: GrpcSettings,
    metrics_path: str | None,
    stop: threading.Event,
) -> None:
    """gRPC, then REST, then the ready line; on ``stop``, REST and gRPC close in that order."""
    from sagemaker_tfs.model_server.grpc.server import serve as serve_grpc

    grpc_server = None
    status_server = None
    rest_server = None
    try:
        grpc_server = serve_grpc(manager, grpc_settings)
        if options.port:
            _announce(f"Running gRPC ModelServer at 0.0.0.0:{options.port} ...")
        if options.grpc_socket_path:
            _announce(f"Running gRPC ModelServer at UNIX socket {options.grpc_socket_path} ...")
        status_server = _start_status_server(manager, options.grpc_socket_path)
        rest_server = _start_rest(manager, options, metrics_path)
        _announce("NET_LOG: Entering the event loop ...")
        while not stop.wait(1.0):
            pass
        logger.info("Shutting down")
    finally:
        if rest_server is not None:
            rest_server.shutdown()
        if grpc_server is not None:
            grpc_server.stop(grace=1.0).wait(3.0)
        if status_server is not None:
            status_server.stop(grace=None)


def _start_status_server(manager: ModelManager, grpc_socket_path: str) -> grpc.Server | None:
    """The status server beside ``--grpc_socket_path`` (``settings.status_socket_beside``), for
    the supervisor's health checks; None without a socket or when its path is too long."""
    from sagemaker_tfs.model_server.grpc.server import serve_status
    from sagemaker_tfs.settings import status_socket_beside

    path = status_socket_beside(grpc_socket_path) if grpc_socket_path else None
    if path is None:
        return None
    server = serve_status(manager, path)
    logger.info("GetModelStatus for health checks at UNIX socket %s", path)
    return server


def _start_rest(
    manager: ModelManager, options: ServerOptions, metrics_path: str | None
) -> RestServer | None:
    """The REST server when its port is set. As in TF Serving, a REST port equal to the gRPC
    port, or one that cannot be bound, is logged and leaves the server on gRPC only."""
    port = options.rest_api_port
    if not port:
        return None
    if port == options.port:
        logger.error(
            "server_options.http_port cannot be the same as grpc_port. Please use a different "
            "port for HTTP/REST API. Skipped exporting HTTP/REST API."
        )
        return None
    from sagemaker_tfs.model_server.rest.server import serve as serve_rest

    try:
        server = serve_rest(
            manager,
            port,
            options.rest_api_num_threads,
            options.rest_api_timeout_in_ms,
            cors=options.rest_api_enable_cors_support,
            metrics_path=metrics_path,
        )
    except OSError as error:
        logger.error("Failed to start HTTP Server at localhost:%d (%s)", port, error)
        return None
    _announce(f"Exporting HTTP/REST API at:localhost:{port} ...")
    if metrics_path:
        logger.info("Prometheus metrics at localhost:%d%s", port, metrics_path)
    return server
