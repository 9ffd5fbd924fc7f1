"""The Python service tier: gunicorn on the socket the supervisor holds and, single-model, the
stream server beside it; their command lines, the waits until they answer ``/ping``, and their
stop (the stream server told first, the sockets gone last)."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path

from sagemaker_tfs.stack_config import SERVICE_READY_MARKER, STACK_CONFIG_ENV, StackConfig
from sagemaker_tfs.supervisor.processes.children import Child
from sagemaker_tfs.supervisor.processes.sockets import HeldSocket, service_answers_ping
from sagemaker_tfs.supervisor.processes.startup import StartupError, TierLauncher, exit_of
from sagemaker_tfs.wire.metrics import MULTIPROCESS_DIR_ENV

TIER = "Python service"
STREAM_SERVER = "stream-server"
# gunicorn's readiness check runs in the watch loop; with the held socket a ping waits in the
# backlog until a worker takes it, so the check must give up quickly.
READY_PING_TIMEOUT_SECONDS = 0.3
# The stream server closes its connections (1001) and waits for their handlers to return.
STREAM_SERVER_STOP_SECONDS = 10.0
SERVICE_START_SECONDS = 60.0
# gunicorn keeps an idle connection from nginx open this long; nginx closes its own after 30 s.
GUNICORN_KEEP_ALIVE_SECONDS = 75


class ServiceLauncher(TierLauncher):
    """Starts gunicorn (and the stream server) and holds the service's socket until the stop."""

    name = TIER

    def __post_init__(self) -> None:
        super().__post_init__()
        self.env = {**self.env, STACK_CONFIG_ENV: self.config.work.stack_config_path}
        self.service_socket = HeldSocket(self.config.work.service_socket)
        self.budget = max(SERVICE_START_SECONDS, self.config.model_servers.wait_time_seconds)

    def start(self, with_stream_server: bool) -> None:
        """gunicorn and the stream server start together (both import their modules and
        ``inference.py`` at the same time); returns once both answer ``/ping``."""
        stream = self._start_stream_server() if with_stream_server else None
        self._start_gunicorn()
        if stream is not None:  # it listens once ``inference.py`` loaded
            exited = "the stream server {} during start-up"
            self._wait_for_ping(stream, self._stream_server_answers, exited, "the stream server")

    def begin_stop(self) -> None:
        """The stream server closes its WebSockets (1001) now: nginx, stopped before this
        tier, would otherwise wait for them."""
        stream = self.children.get(STREAM_SERVER)
        if stream is not None:
            stream.request_stop()

    def stop(self, deadline: float) -> None:
        """gunicorn and the stream server, then the service's socket closed and both paths
        unlinked."""
        super().stop(deadline)
        self.service_socket.close()
        for path in (self.config.work.service_socket, self.config.work.stream_socket):
            with contextlib.suppress(OSError):  # gone, or never made (no work directory)
                Path(path).unlink()

    def _start_gunicorn(self) -> None:
        fd = self.service_socket.ensure()
        env = dict(self.env)
        if self.config.metrics.enabled:
            env[MULTIPROCESS_DIR_ENV] = self.config.work.metrics_dir
        gunicorn = Child(
            "gunicorn",
            gunicorn_command(self.config, fd),
            env,
            stop_timeout=self.config.service.timeout + 5,
            ready_check=lambda: self._gunicorn_serves(gunicorn),
            before_start=self._before_gunicorn_starts,
            pass_fds=(fd,),
            leftovers_serve_until_replaced=True,
        )
        self.children.start(TIER, gunicorn)
        # Until a worker answers /ping on the socket (requirements are installed first).
        answers = partial(self._gunicorn_serves, gunicorn)
        exited = "gunicorn {} during start-up (see its log above)"
        self._wait_for_ping(gunicorn, answers, exited, "the Python service")

    def _before_gunicorn_starts(self) -> None:
        self.service_socket.ensure()
        for marker in Path(self.config.work.root).glob(SERVICE_READY_MARKER.format(pid="*")):
            marker.unlink(missing_ok=True)

    def _gunicorn_serves(self, gunicorn: Child) -> bool:
        """A worker of this gunicorn loaded the app (its marker) and /ping answers on the
        socket (a worker of a killed master may be answering there too: see gunicorn_hooks)."""
        marker = Path(self.config.work.service_ready_marker(gunicorn.pid or 0))
        return marker.exists() and service_answers_ping(
            self.config.work.service_socket, READY_PING_TIMEOUT_SECONDS
        )

    def _wait_for_ping(
        self, child: Child, answers: Callable[[], bool], exited: str, what: str
    ) -> None:
        """Until ``child`` answers /ping; a start-up error (``exited``, or ``what`` did not
        answer) when it exits or the budget runs out."""
        if not self.wait_while_starting(child, answers, self.budget):
            if not child.running():
                raise StartupError(exited.format(exit_of(child)))
            raise StartupError(f"{what} did not answer /ping within {self.budget}s")
        child.mark_ready()

    def _start_stream_server(self) -> Child:
        """The bidirectional stream's server (``service/stream/stream_server.py``)."""
        stream = Child(
            STREAM_SERVER,
            [sys.executable, "-m", "sagemaker_tfs.service.stream.stream_server"],
            self.env,
            stop_timeout=STREAM_SERVER_STOP_SECONDS,
            ready_check=self._stream_server_answers,
        )
        self.children.start(TIER, stream)
        return stream

    def _stream_server_answers(self) -> bool:
        return service_answers_ping(
            self.config.work.stream_socket, READY_PING_TIMEOUT_SECONDS, http_version="1.1"
        )


def gunicorn_command(config: StackConfig, fd: int) -> list[str]:
    """gunicorn on the supervisor's socket ``fd`` (see HeldSocket)."""
    return [
        sys.executable,
        "-m",
        "gunicorn",
        f"--bind=fd://{fd}",
        f"--workers={config.service.workers}",
        f"--threads={config.service.threads}",
        f"--worker-class={config.service.worker_class}",
        f"--timeout={config.service.timeout}",
        f"--graceful-timeout={config.service.timeout}",
        f"--log-level={config.service.log_level}",
        "--error-logfile=-",
        # nginx bounds request lines and headers and answers JSON beyond; gunicorn's own
        # (smaller) limits would answer nginx-accepted requests with a plain-text 400.
        "--limit-request-line=0",
        "--limit-request-fields=32768",
        "--limit-request-field_size=0",
        "--no-control-socket",
        f"--worker-tmp-dir={config.work.root}",  # heartbeat files: nothing outside the work dir
        # Longer than nginx keeps an idle connection to gunicorn (nginx.conf.template).
        f"--keep-alive={GUNICORN_KEEP_ALIVE_SECONDS}",
        "--config=python:sagemaker_tfs.service.edge.gunicorn_hooks",
        "sagemaker_tfs.service.edge.app:create_app()",
    ]
