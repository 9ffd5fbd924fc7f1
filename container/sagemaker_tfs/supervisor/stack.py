"""The ``Supervisor``: writes the configs, starts the stack in order, watches it, stops it.

Start-up order: model servers (and wait until their models are AVAILABLE), the health
monitor (``health.py``: the verdict ``/ping`` answers, kept from then on), the Python service
under gunicorn (and, single-model, the stream server beside it), then nginx, so that ``/ping``
cannot answer 200 before the models are ready. A child that exits is logged and restarted (see
``children.Child``). Stopping (``/ping`` 503 from its first moment) goes the other way: the
stream server is told first (it closes its WebSockets with 1001, which nginx would otherwise
wait for), nginx gracefully (SIGQUIT lets in-flight requests finish), then gunicorn and the
stream server, then the model servers, within 26 s of the stop (SageMaker's SIGKILL comes at
30 s).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

from sagemaker_tfs.config import SERVICE_READY_MARKER, STACK_CONFIG_ENV, Instance, StackConfig
from sagemaker_tfs.supervisor import nginx_config
from sagemaker_tfs.supervisor.children import (
    Child,
    ChildGroup,
    TierStopping,
    describe_exit,
    reap_orphans,
)
from sagemaker_tfs.supervisor.code_download import CodeDownloadError, download_code
from sagemaker_tfs.supervisor.control_api import ControlServer
from sagemaker_tfs.supervisor.health import HealthMonitor, WatchedServer, status_target
from sagemaker_tfs.supervisor.metrics_endpoint import MetricsServer, start_metrics_endpoint
from sagemaker_tfs.supervisor.model_server_processes import (
    MONITORING_PATH,
    ModelLoadError,
    is_python_model_server,
    model_server_args,
    model_server_command,
    models_available_check,
    monitoring_config_path,
    render_batching_config,
    render_model_config,
    render_monitoring_config,
    wait_until_available,
)
from sagemaker_tfs.supervisor.model_service import FORK_SUPPORT_VARIABLE, USER_FORK_SUPPORT
from sagemaker_tfs.supervisor.per_model_servers import PerModelServers
from sagemaker_tfs.supervisor.polling import poll_until
from sagemaker_tfs.supervisor.registry import ModelRegistry, ModelServers
from sagemaker_tfs.supervisor.shared_model_servers import SharedModelServers
from sagemaker_tfs.supervisor.sockets import (
    HeldPort,
    HeldSocket,
    http_answers,
    service_answers_ping,
)
from sagemaker_tfs.supervisor.standby import StandbyModelServer
from sagemaker_tfs.wire.errors import HttpError
from sagemaker_tfs.wire.metrics import MULTIPROCESS_DIR_ENV

logger = logging.getLogger(__name__)

POLL_SECONDS = 0.1
# gunicorn's readiness check runs in the watch loop; with the held socket a ping waits in the
# backlog until a worker takes it, so the check must give up quickly.
READY_PING_TIMEOUT_SECONDS = 0.3
MODEL_SERVER_STOP_SECONDS = 10.0
# The stream server closes its connections (1001) and waits for their handlers to return.
STREAM_SERVER_STOP_SECONDS = 10.0
STREAM_SERVER = "stream-server"
SERVICE_START_SECONDS = 60.0
NGINX_START_SECONDS = 30.0
# Starts of an nginx killed during start-up (see _wait_for_public_port).
NGINX_START_ATTEMPTS = 3
# gunicorn keeps an idle connection from nginx open this long; nginx closes its own after 30 s.
GUNICORN_KEEP_ALIVE_SECONDS = 75
# The children's tiers, in start order: they stop in reverse (nginx first).
MODEL_SERVERS, SERVICE, FRONT = "model servers", "Python service", "nginx"
TIERS = (MODEL_SERVERS, SERVICE, FRONT)
# SageMaker sends SIGKILL 30 s after SIGTERM (scale-in): each tier is stopped by then (a request
# still in flight at 22 s is cut, one warning line), so that serve exits 0 in time.
STOP_DEADLINES = {FRONT: 22.0, SERVICE: 24.0, MODEL_SERVERS: 26.0}


class StartupError(RuntimeError):
    """The stack could not be started; the message says why."""


class StopRequested(Exception):
    """SIGTERM/SIGINT arrived while the stack was still starting."""


class Supervisor:
    """Owns the children of one stack and the multi-model registry."""

    def __init__(self, config: StackConfig) -> None:
        self.config = config
        self.work_dir = Path(config.work_dir)
        self.env = child_environment(config)
        self.children = ChildGroup(TIERS)
        self.registry: ModelRegistry | None = None
        self.model_servers: ModelServers | None = None
        self.health: HealthMonitor | None = None
        self.control: ControlServer | None = None
        self.metrics: MetricsServer | None = None
        self.stop_requested = threading.Event()
        self.service_socket = HeldSocket(config.service_socket)
        self.public_port = HeldPort(config.port)
        self.serving = False
        self.standby = self._standby_model_server()

    def _standby_model_server(self) -> StandbyModelServer | None:
        """A standby when the model server is our Python one (see standby.py)."""
        if not self.config.standby_model_server or not is_python_model_server():
            return None
        return StandbyModelServer(self.env, self._model_servers_settled)

    def _model_servers_settled(self) -> bool:
        """The stack serves and no model server is starting: a standby may start now."""
        return self.serving and all(c.ready for c in self.children.members(MODEL_SERVERS))

    # --- the Launcher protocol used by the registry ---

    def start_model_server(
        self, key: str, instance: Instance, model_config_file: str, model_names: Sequence[str]
    ) -> None:
        argv = model_server_command() + model_server_args(
            instance, model_config_file, self.config, self._batching_file()
        )
        child = Child(
            key,
            argv,
            self.env,
            stop_timeout=MODEL_SERVER_STOP_SECONDS,
            ready_check=models_available_check(key, instance, model_names),
            take_standby=self.standby.take if self.standby is not None else None,
        )
        try:
            self.children.start(MODEL_SERVERS, child)
        except TierStopping:
            raise HttpError(503, "the stack is shutting down") from None

    def stop_model_server(self, key: str) -> None:
        self.children.stop_child(key)

    def model_server_running(self, key: str) -> bool:
        child = self.children.get(key)
        return child is not None and child.running()

    def model_server_pid(self, key: str) -> int | None:
        """The pid of model server ``key`` while it runs, else None."""
        child = self.children.get(key)
        return child.pid if child is not None and child.running() else None

    # --- start-up ---

    def write_configs(self) -> None:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        Path(self.config.health_file).unlink(missing_ok=True)  # a verdict of an earlier run
        write_file(self.config.stack_config_path, self.config.to_json())
        write_file(monitoring_config_path(self.config), render_monitoring_config())
        if self.config.batching is not None:
            text = render_batching_config(self.config.batching)
            write_file(self._batching_file() or "", text)
            logger.info("batching config %s:\n%s", self._batching_file(), text.rstrip())
        if not self.config.multi_model:
            text = render_model_config(self.config.models)
            write_file(self._model_config_file(), text)
            logger.info("model config %s:\n%s", self._model_config_file(), text.rstrip())

    def start(self) -> None:
        self.write_configs()
        if self.config.metrics:
            self._start_metrics_endpoint()
        if self.config.multi_model:
            self._download_universal_code()
            servers = self._multi_model_servers()
            self._start_control_api(servers)
        else:
            self._start_model_servers()
        self._start_health_monitor()
        stream = None if self.config.multi_model else self._start_stream_server()
        self._start_gunicorn()
        if stream is not None:
            self._wait_for_stream_server(stream)
        self._start_nginx()
        self.serving = True
        logger.info("serving on port %d", self.config.port)

    def _start_model_servers(self) -> None:
        names = [m.name for m in self.config.models]
        keys = [f"model-server[{index}]" for index in range(len(self.config.instances))]
        for key, instance in zip(keys, self.config.instances, strict=True):
            self.start_model_server(key, instance, self._model_config_file(), names)
        for key, instance in zip(keys, self.config.instances, strict=True):
            self._wait_for_models(key, instance, names)

    def _wait_for_models(self, key: str, instance: Instance, names: Sequence[str]) -> None:
        child = self.children.get(key)
        assert child is not None
        try:
            ready = wait_until_available(
                instance.rest_port,
                names,
                self.config.wait_time_seconds,
                self._starting(child),
            )
        except ModelLoadError as error:
            raise StartupError(f"{key}: {error}") from None
        self._raise_if_stop_requested()
        if not ready:
            why = "exited" if not child.running() else "timed out"
            raise StartupError(
                f"{key} {why} before models {', '.join(names)} became AVAILABLE "
                f"(SAGEMAKER_TFS_WAIT_TIME_SECONDS={self.config.wait_time_seconds})"
            )
        child.mark_ready()
        logger.info("%s: models %s AVAILABLE", key, ", ".join(names))

    def _download_universal_code(self) -> None:
        """Shared code from S3, before gunicorn (its hook installs the requirements)."""
        target = self.config.universal_code_dir
        if target is None:
            return
        assert self.config.universal_bucket and self.config.universal_prefix
        try:
            download_code(self.config.universal_bucket, self.config.universal_prefix, target)
        except CodeDownloadError as error:
            raise StartupError(str(error)) from None

    def _start_metrics_endpoint(self) -> None:
        self.metrics = start_metrics_endpoint(
            self.config,
            self.children.children,
            partial(self.children.members, MODEL_SERVERS),
            lambda: self.serving,
            self._models_loaded if self.config.multi_model else None,
            MONITORING_PATH,
            self._serves_model,
        )
        logger.info("metrics on %s (unix:%s)", self.config.metrics_path, self.config.metrics_socket)

    def _serves_model(self, name: str) -> bool:
        """Whether the stack serves a model of that name now (metrics count only those by
        name: requests may name any)."""
        if self.registry is not None:
            return self.registry.serves(name)
        return any(model.name == name for model in self.config.models)

    def _models_loaded(self) -> int:
        return len(self.registry.list()) if self.registry is not None else 0

    def _multi_model_servers(self) -> ModelServers:
        """One process per model, or the shared model servers, started now (see registry.py)."""
        if self.config.model_server_per_model:
            logger.info("multi-model: one model server process per loaded model")
            return PerModelServers(self.config, self)
        logger.info(
            "multi-model: %d model server(s) shared by every model", len(self.config.instances)
        )
        shared = SharedModelServers(self.config, self.model_server_pid)
        for server in shared.servers:
            self._start_shared_model_server(shared, server.key, server.instance)
        for server in shared.servers:
            self._wait_until_in_line(shared, server.key)
        return shared

    def _start_shared_model_server(
        self, shared: SharedModelServers, key: str, instance: Instance
    ) -> None:
        """A model server of the shared mode: it starts with the models loaded so far (after
        a failed start: with none) and is ready once it serves what the registry holds."""

        def choose_config() -> None:
            config_file = shared.start_config_file(child.failed_starts)
            child.argv = model_server_command() + model_server_args(
                instance, config_file, self.config, self._batching_file()
            )

        child = Child(
            key,
            [],
            self.env,
            stop_timeout=MODEL_SERVER_STOP_SECONDS,
            ready_check=partial(shared.ready, key),
            before_start=choose_config,
            take_standby=self.standby.take if self.standby is not None else None,
        )
        self.children.start(MODEL_SERVERS, child)

    def _wait_until_in_line(self, shared: SharedModelServers, key: str) -> None:
        child = self.children.get(key)
        assert child is not None
        ready = partial(shared.ready, key)
        if not poll_until(
            ready, self.config.wait_time_seconds, POLL_SECONDS, self._starting(child)
        ):
            self._raise_if_stop_requested()
            why = "exited" if not child.running() else "timed out"
            raise StartupError(
                f"{key} {why} before it answered "
                f"(SAGEMAKER_TFS_WAIT_TIME_SECONDS={self.config.wait_time_seconds})"
            )
        child.mark_ready()
        logger.info("%s: serving multi-model (shared by every model)", key)

    def _start_health_monitor(self) -> None:
        """The verdict ``/ping`` answers from, checked from now on (see health.py)."""
        python_model_server = is_python_model_server()

        def watched() -> list[WatchedServer]:
            return self._watched_model_servers(python_model_server)

        self.health = HealthMonitor(self.config.health_file, watched)
        self.health.start()

    def _watched_model_servers(self, python_model_server: bool) -> list[WatchedServer]:
        """Single model: every model server, each serving every model. Multi-model shared:
        every model server, answering and in line with the registry. One per model: the
        model server of each model the registry holds as loaded (not those loading or
        unloading), serving its model."""

        def watch(key: str, instance: Instance, models: tuple[str, ...]) -> WatchedServer:
            child = self.children.get(key)
            running = child is not None and child.running()
            pid = child.pid if child is not None and running else None
            shared = isinstance(self.model_servers, SharedModelServers)
            not_ready = "is being brought in line" if shared and child and not child.ready else None
            where = status_target(self.config, instance, python_model_server)
            return WatchedServer(key, where, models, pid, not_ready)

        if not self.config.multi_model:
            names = tuple(model.name for model in self.config.models)
            return [
                watch(f"model-server[{index}]", instance, names)
                for index, instance in enumerate(self.config.instances)
            ]
        if isinstance(self.model_servers, SharedModelServers):
            return [watch(s.key, s.instance, ()) for s in self.model_servers.servers]
        loaded = self.registry.list() if self.registry is not None else []
        names_and_instances = [
            (m["model_name"], Instance(*m["instances"][0]))
            for m in loaded
            if m["state"] == "AVAILABLE"
        ]
        return [
            watch(PerModelServers.key(name), instance, (name,))
            for name, instance in names_and_instances
        ]

    def _start_control_api(self, servers: ModelServers) -> None:
        self.model_servers = servers
        self.registry = ModelRegistry(self.config, servers)
        if isinstance(servers, SharedModelServers):
            servers.on_lost = self.registry.lost
        loads = self.metrics.loads if self.metrics is not None else None
        self.control = ControlServer(self.config.control_socket, self.registry, loads)
        self.control.serve_in_background()
        logger.info("multi-model control API on unix:%s", self.config.control_socket)

    def _start_gunicorn(self) -> None:
        fd = self.service_socket.ensure()
        env = {**self.env, STACK_CONFIG_ENV: self.config.stack_config_path}
        if self.config.metrics:
            env[MULTIPROCESS_DIR_ENV] = self.config.metrics_dir
        gunicorn = Child(
            "gunicorn",
            gunicorn_command(self.config, fd),
            env,
            stop_timeout=self.config.gunicorn_timeout + 5,
            ready_check=lambda: self._gunicorn_serves(gunicorn),
            before_start=self._before_gunicorn_starts,
            pass_fds=(fd,),
            leftovers_serve_until_replaced=True,
        )
        self.children.start(SERVICE, gunicorn)
        self._wait_for_service(gunicorn)
        gunicorn.mark_ready()

    def _before_gunicorn_starts(self) -> None:
        self.service_socket.ensure()
        for marker in self.work_dir.glob(SERVICE_READY_MARKER.format(pid="*")):
            marker.unlink(missing_ok=True)

    def _gunicorn_serves(self, gunicorn: Child) -> bool:
        """A worker of this gunicorn loaded the app (its marker) and /ping answers on the
        socket (a worker of a killed master may be answering there too: see gunicorn_hooks)."""
        marker = Path(self.config.service_ready_marker(gunicorn.pid or 0))
        return marker.exists() and service_answers_ping(
            self.config.service_socket, READY_PING_TIMEOUT_SECONDS
        )

    def _wait_for_service(self, gunicorn: Child) -> None:
        """Until a worker answers /ping on the socket (requirements are installed first)."""
        budget = max(SERVICE_START_SECONDS, self.config.wait_time_seconds)
        answers = partial(self._gunicorn_serves, gunicorn)
        if poll_until(answers, budget, POLL_SECONDS, self._starting(gunicorn)):
            return
        self._raise_if_stop_requested()
        if not gunicorn.running():
            raise StartupError(f"gunicorn {exit_of(gunicorn)} during start-up (see its log above)")
        raise StartupError(f"the Python service did not answer /ping within {budget}s")

    def _start_stream_server(self) -> Child:
        """The bidirectional stream's server (``service/stream_server.py``), started beside
        gunicorn (both import their modules and ``inference.py`` at the same time)."""
        stream = Child(
            STREAM_SERVER,
            stream_server_command(),
            {**self.env, STACK_CONFIG_ENV: self.config.stack_config_path},
            stop_timeout=STREAM_SERVER_STOP_SECONDS,
            ready_check=self._stream_server_answers,
        )
        self.children.start(SERVICE, stream)
        return stream

    def _wait_for_stream_server(self, stream: Child) -> None:
        """Until it answers ``/ping`` on its socket (it listens once ``inference.py`` loaded)."""
        budget = max(SERVICE_START_SECONDS, self.config.wait_time_seconds)
        if not poll_until(
            self._stream_server_answers, budget, POLL_SECONDS, self._starting(stream)
        ):
            self._raise_if_stop_requested()
            if not stream.running():
                raise StartupError(f"the stream server {exit_of(stream)} during start-up")
            raise StartupError(f"the stream server did not answer /ping within {budget}s")
        stream.mark_ready()

    def _stream_server_answers(self) -> bool:
        return service_answers_ping(
            self.config.stream_socket, READY_PING_TIMEOUT_SECONDS, http_version="1.1"
        )

    def _start_nginx(self) -> None:
        try:
            text = nginx_config.render(self.config)
        except nginx_config.NginxConfigError as error:
            raise StartupError(f"cannot write the nginx config: {error}") from None
        path = self.work_dir / "nginx.conf"
        write_file(str(path), text)
        logger.info("nginx config %s:\n%s", path, text.rstrip())
        try:
            fd = self.public_port.ensure()
        except OSError as error:
            raise StartupError(f"cannot listen on port {self.config.port}: {error}") from None
        binary = shutil.which("nginx") or "/usr/sbin/nginx"
        argv = [binary, "-c", str(path), "-p", str(self.work_dir) + "/", "-e", "stderr"]
        (self.work_dir / "nginx.pid").unlink(missing_ok=True)
        nginx = Child(
            "nginx",
            argv,
            {**self.env, **self.public_port.inherit_env()},
            stop_signal=signal.SIGQUIT,
            stop_timeout=self.config.nginx_proxy_read_timeout + 5,
            ready_check=lambda: self._nginx_listens(nginx),
            # SIGTERM, not SIGKILL: the master then stops its workers, which have no
            # parent-death signal of their own, before it exits.
            death_signal=signal.SIGTERM,
            pass_fds=(fd,),
        )
        self.children.start(FRONT, nginx)
        self._wait_for_public_port(nginx)
        nginx.mark_ready()

    def _nginx_listens(self, nginx: Child) -> bool:
        return read_pid(self.work_dir / "nginx.pid") == nginx.pid and http_answers(
            self.config.port, "/execution-parameters"
        )

    def _wait_for_public_port(self, nginx: Child) -> None:
        """nginx listens, or start-up fails (e.g. the port is taken).

        nginx writes its pid file once it has its sockets, and a worker answering HTTP shows
        that it accepts on the port the supervisor holds (a connection alone would be queued).

        Clients reach nginx as soon as it answers, a moment before this check sees it: an nginx
        killed by a signal meanwhile crashed while serving, and is started again. One that
        exits with a code of its own (bad config, port taken) fails the start-up.
        """
        listens = partial(self._nginx_listens, nginx)
        for _ in range(NGINX_START_ATTEMPTS):
            if poll_until(listens, NGINX_START_SECONDS, POLL_SECONDS, self._starting(nginx)):
                return
            self._raise_if_stop_requested()
            if nginx.running() or not was_killed(nginx):
                break
            logger.warning(
                "nginx (pid %d) %s during start-up; starting it again", nginx.pid, exit_of(nginx)
            )
            nginx.restart_after_crash()
        if not nginx.running():
            raise StartupError(f"nginx {exit_of(nginx)} during start-up (see its log above)")
        raise StartupError(f"nginx did not listen on port {self.config.port} in time")

    def _starting(self, child: Child) -> Callable[[], bool]:
        """Whether a start-up wait for ``child`` goes on: it runs and no stop was asked."""
        return lambda: child.running() and not self.stop_requested.is_set()

    def _raise_if_stop_requested(self) -> None:
        if self.stop_requested.is_set():
            raise StopRequested()

    # --- watching and stopping ---

    def watch(self) -> None:
        """Restart what exits until a stop is asked. An error in one round is logged and the
        next round goes on: a watch loop that ended would leave the endpoint unsupervised."""
        last_error = ""
        while not self.stop_requested.wait(POLL_SECONDS):
            try:
                self._watch_once()
            except Exception as error:  # noqa: BLE001 - logged; the next round tries again
                if repr(error) != last_error:  # once, not ten times a second
                    logger.exception("error while watching the children")
                last_error = repr(error)
            else:
                last_error = ""

    def _watch_once(self) -> None:
        self.children.check(time.monotonic())
        if self.standby is not None:
            self.standby.check(time.monotonic())
        reap_orphans()

    def shutdown(self) -> None:
        """nginx (in-flight requests finish), gunicorn, model servers: by ``STOP_DEADLINES``."""
        started = time.monotonic()
        logger.info("stopping the stack")
        if self.health is not None:
            self.health.stop("The endpoint is stopping")
        if self.control is not None:
            self.control.shutdown()
            self.control.server_close()
        # nginx keeps its own copy of the public port while it finishes in-flight requests;
        # closed here first, no new connection waits in a backlog nobody will serve.
        self.public_port.close()
        if self.standby is not None:
            self.standby.stop()
        stream = self.children.get(STREAM_SERVER)
        if stream is not None:
            stream.request_stop()
        self.children.stop(lambda tier: started + STOP_DEADLINES[tier])
        if self.metrics is not None:  # after nginx: its last log lines are still read
            self.metrics.close()
        if self.registry is not None:
            self.registry.close()
        self.service_socket.close()
        for path in (
            self.config.service_socket,
            self.config.control_socket,
            self.config.stream_socket,
        ):
            with contextlib.suppress(OSError):  # gone, or never made (no work directory)
                Path(path).unlink()
        logger.info("stopped")

    def _model_config_file(self) -> str:
        return str(self.work_dir / "models.config")

    def _batching_file(self) -> str | None:
        if self.config.batching is None:
            return None
        return str(self.work_dir / "batching.config")


def was_killed(child: Child) -> bool:
    """The child's process ended by a signal (a crash or a kill), not by exiting itself."""
    code = child.exit_code()
    return code is not None and code < 0


def exit_of(child: Child) -> str:
    """``exited with code 1`` or ``was killed by SIGTERM``, for a child that is gone."""
    code = child.exit_code()
    return "exited" if code is None else describe_exit(code)


def read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def write_file(path: str, text: str) -> None:
    Path(path).write_text(text, encoding="utf-8")


# glibc gives every allocation above 32 MB fresh pages from mmap and returns them on free, so
# each tensor of tens of MB is page-faulted in anew on every request: joining 53 MB took
# 110-160 ms that way and 11-25 ms in reused heap memory (docs/performance.md). Children keep
# freed memory up to this size instead; the user's own MALLOC_* settings win.
MALLOC_REUSE_BYTES = str(256 << 20)
MALLOC_DEFAULTS = {
    "MALLOC_MMAP_THRESHOLD_": MALLOC_REUSE_BYTES,
    "MALLOC_TRIM_THRESHOLD_": MALLOC_REUSE_BYTES,
}


def child_environment(config: StackConfig) -> dict[str, str]:
    env = dict(os.environ)
    env.pop(MULTIPROCESS_DIR_ENV, None)
    env.pop(FORK_SUPPORT_VARIABLE, None)  # the supervisor's own (see model_service.py)
    if USER_FORK_SUPPORT is not None:
        env[FORK_SUPPORT_VARIABLE] = USER_FORK_SUPPORT
    env["OMP_NUM_THREADS"] = config.omp_num_threads
    env["PYTHONUNBUFFERED"] = "1"
    for name, value in MALLOC_DEFAULTS.items():
        env.setdefault(name, value)
    return env


def stream_server_command() -> list[str]:
    return [sys.executable, "-m", "sagemaker_tfs.service.stream_server"]


def gunicorn_command(config: StackConfig, fd: int | None = None) -> list[str]:
    """gunicorn on the supervisor's socket ``fd`` (see HeldSocket), else binding the path."""
    bind = f"fd://{fd}" if fd is not None else f"unix:{config.service_socket}"
    return [
        sys.executable,
        "-m",
        "gunicorn",
        f"--bind={bind}",
        f"--workers={config.gunicorn_workers}",
        f"--threads={config.gunicorn_threads}",
        f"--worker-class={config.gunicorn_worker_class}",
        f"--timeout={config.gunicorn_timeout}",
        f"--graceful-timeout={config.gunicorn_timeout}",
        f"--log-level={config.gunicorn_log_level}",
        "--error-logfile=-",
        # nginx bounds request lines and headers and answers JSON beyond; gunicorn's own
        # (smaller) limits would answer nginx-accepted requests with a plain-text 400.
        "--limit-request-line=0",
        "--limit-request-fields=32768",
        "--limit-request-field_size=0",
        "--no-control-socket",
        f"--worker-tmp-dir={config.work_dir}",  # heartbeat files: nothing outside the work dir
        # Longer than nginx keeps an idle connection to gunicorn (nginx.conf.template).
        f"--keep-alive={GUNICORN_KEEP_ALIVE_SECONDS}",
        "--config=python:sagemaker_tfs.service.gunicorn_hooks",
        "sagemaker_tfs.service.app:create_app()",
    ]
