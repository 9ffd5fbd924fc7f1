"""``sagemaker-tfs serve``: write the configs, start the stack, watch it, stop it cleanly.

Start-up order: model servers (and wait until their models are AVAILABLE), the Python
service under gunicorn, then nginx, so that ``/ping`` cannot answer 200 before the models
are ready. A child that exits is logged and restarted: at once if it had become ready, with a
backoff if it never did (see ``Child``). Every child dies with ``serve`` (parent-death
signal), so a SIGKILLed supervisor leaves nothing on its ports. SIGTERM/SIGINT stop
nginx gracefully first (SIGQUIT lets in-flight requests finish), then gunicorn, then the
model servers, and ``serve`` exits 0. ``serve`` also reaps orphaned processes (it is PID 1 in
the container, and a child subreaper elsewhere).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import ctypes
import dataclasses
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from sagemaker_tfs.config import STACK_CONFIG_ENV, ConfigError, Instance, StackConfig, load_config
from sagemaker_tfs.supervisor.code_download import CodeDownloadError, download_code
from sagemaker_tfs.supervisor.model_servers import (
    ControlServer,
    ModelLoadError,
    ModelRegistry,
    model_is_available,
    model_server_args,
    model_server_command,
    render_batching_config,
    render_model_config,
    wait_until_available,
)
from sagemaker_tfs.wire.errors import HttpError

log = logging.getLogger("sagemaker_tfs.supervisor.stack")

POLL_SECONDS = 0.1
READY_POLL_SECONDS = 0.1
FIRST_BACKOFF_SECONDS = 0.5
MAX_BACKOFF_SECONDS = 10.0
# A child without a readiness check counts as started once it has run this long.
READY_AFTER_SECONDS = 2.0
GROUP_EXIT_SECONDS = 1.0
# gunicorn's readiness check runs in the watch loop; with the held socket a ping waits in the
# backlog until a worker takes it, so the check must give up quickly.
READY_PING_TIMEOUT_SECONDS = 0.3
MODEL_SERVER_STOP_SECONDS = 10.0
SERVICE_START_SECONDS = 60.0
NGINX_START_SECONDS = 30.0
PR_SET_PDEATHSIG = 1  # linux/prctl.h
PR_SET_CHILD_SUBREAPER = 36


class StartupError(RuntimeError):
    """The stack could not be started; the message says why."""


class StopRequested(Exception):
    """SIGTERM/SIGINT arrived while the stack was still starting."""


# Every Child that has started a process, and a lock that makes "fork + record the Popen"
# atomic for reap_orphans: otherwise it could reap a process that exited before its Popen was
# stored, and Popen would then report exit code 0 instead of the real one.
_spawn_lock = threading.Lock()
_started_children: weakref.WeakSet[Child] = weakref.WeakSet()


class Child:
    """One supervised process, started in its own session and restarted when it exits.

    The restart policy tells a crash from a failed start-up. A child that became ready (its
    ``ready_check`` passed, or it ran ``READY_AFTER_SECONDS`` when it has none) and then
    exits, whatever killed it, is restarted at once, every time. A child that exits before it
    was ready (bad configuration, a port taken, a model that cannot load) is restarted after a
    backoff that doubles up to ``MAX_BACKOFF_SECONDS``, so a process that cannot start does
    not spin; the backoff starts over once it is ready again. Every exit is one log line.
    """

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        env: dict[str, str],
        stop_signal: signal.Signals = signal.SIGTERM,
        stop_timeout: float = 30.0,
        ready_check: Callable[[], bool] | None = None,
        death_signal: signal.Signals = signal.SIGKILL,
        before_start: Callable[[], None] | None = None,
        pass_fds: Sequence[int] = (),
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.env = env
        self.stop_signal = stop_signal
        self.stop_timeout = stop_timeout
        self.ready_check = ready_check
        self.death_signal = death_signal
        self.before_start = before_start
        self.pass_fds = tuple(pass_fds)
        self.process: subprocess.Popen[bytes] | None = None
        self.started_at = 0.0
        self.ready = False
        self.backoff = FIRST_BACKOFF_SECONDS
        self.restart_at: float | None = None
        self.restarts = 0
        self.failed_starts = 0
        self.stopping = False
        self._next_ready_poll = 0.0
        # check() (watch thread) and stop() (any thread) must not interleave: a restart
        # racing a stop would leave an unsupervised process behind.
        self._lock = threading.Lock()

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def start(self) -> None:
        # Own session: a Ctrl-C in a terminal reaches only the supervisor, which then stops
        # the children in order, and the whole group (e.g. gunicorn workers) can be killed.
        if self.before_start is not None:
            self.before_start()
        with _spawn_lock:
            self.process = spawn(self.argv, self.env, self.death_signal, self.pass_fds)
            _started_children.add(self)
        self.started_at = time.monotonic()
        self.ready = False
        self.restart_at = None
        self._next_ready_poll = 0.0
        log.info("started %s (pid %d): %s", self.name, self.process.pid, " ".join(self.argv))

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def mark_ready(self, now: float | None = None) -> None:
        """The child is serving: a later exit is a crash (restart at once), not a failed start."""
        if self.ready:
            return
        self.ready = True
        self.backoff = FIRST_BACKOFF_SECONDS
        self.failed_starts = 0
        if self.restarts:
            elapsed = (now or time.monotonic()) - self.started_at
            log.info("%s (pid %s) ready %.2fs after restart", self.name, self.pid, elapsed)

    def check(self, now: float) -> None:
        """Notice an exit and restart (at once, or after the backoff); notice readiness."""
        with self._lock:
            self._check(now)

    def _check(self, now: float) -> None:
        if self.stopping or self.process is None:
            return
        if self.restart_at is not None:
            if now >= self.restart_at:
                self._restart()
            return
        code = self.process.poll()
        if code is None:
            self._poll_ready(now)
            return
        # Leftovers of the group (nginx or gunicorn workers) would hold the sockets: a new
        # nginx that finds its port taken sleeps 500 ms before it tries again.
        self._signal_group(signal.SIGKILL)
        wait_group_gone(self.process.pid, GROUP_EXIT_SECONDS)
        ran = now - self.started_at
        if self.ready:
            log.warning(
                "%s (pid %d) %s after running %.1fs; restarting it now",
                self.name,
                self.process.pid,
                describe_exit(code),
                ran,
            )
            self._restart()
            return
        self.failed_starts += 1
        self.restart_at = now + self.backoff
        log.error(
            "%s (pid %d) %s %.1fs after start, before it was ready (failed start %d in a row); "
            "restarting in %.1fs",
            self.name,
            self.process.pid,
            describe_exit(code),
            ran,
            self.failed_starts,
            self.backoff,
        )
        self.backoff = min(self.backoff * 2, MAX_BACKOFF_SECONDS)

    def _restart(self) -> None:
        self.restarts += 1
        self.start()

    def _poll_ready(self, now: float) -> None:
        if self.ready or now < self._next_ready_poll:
            return
        self._next_ready_poll = now + READY_POLL_SECONDS
        if self.ready_check is None:
            ready = now - self.started_at >= READY_AFTER_SECONDS
        else:
            try:
                ready = self.ready_check()
            except Exception as error:  # noqa: BLE001 - a failed check means "not ready yet"
                log.debug("%s readiness check failed: %s", self.name, error)
                ready = False
        if ready:
            self.mark_ready(now)

    def stop(self) -> None:
        """Ask the process to stop, wait for it, then kill its whole process group."""
        self.request_stop()
        self.wait_stopped()

    def request_stop(self) -> None:
        """Send the stop signal and stop restarting (returns at once)."""
        with self._lock:
            self.stopping = True
        if self.process is not None and self.process.poll() is None:
            log.info(
                "stopping %s (pid %d) with %s", self.name, self.process.pid, self.stop_signal.name
            )
            self._signal_group(self.stop_signal)

    def wait_stopped(self) -> None:
        """Wait up to the stop timeout, then kill what is left of the process group."""
        if self.process is None:
            return
        try:
            self.process.wait(self.stop_timeout)
        except subprocess.TimeoutExpired:
            log.warning("%s did not stop in %.0fs; killing it", self.name, self.stop_timeout)
        self._signal_group(signal.SIGKILL)
        self.process.wait()

    def _signal_group(self, sig: signal.Signals) -> None:
        assert self.process is not None
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, sig)


def wait_group_gone(pgid: int, timeout: float) -> bool:
    """Until no process of group ``pgid`` is left (reaping those that are our children, as
    orphaned workers of a subreaper are); False after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            pid, _ = os.waitpid(-pgid, os.WNOHANG)
            if pid:
                continue
        except ChildProcessError:  # none of ours left; others may still be exiting
            try:
                os.killpg(pgid, 0)
            except (ProcessLookupError, PermissionError):
                return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.005)


def describe_exit(code: int) -> str:
    """``exited with code 3`` or ``was killed by SIGKILL`` (Popen's negative codes)."""
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"was killed by {signal.Signals(-code).name}"
        return f"was killed by signal {-code}"
    return f"exited with code {code}"


def _load_prctl() -> Callable[..., int] | None:
    try:
        return ctypes.CDLL(None, use_errno=True).prctl  # type: ignore[no-any-return]
    except (OSError, AttributeError):
        return None


_prctl = _load_prctl()


def die_with_parent(death_signal: signal.Signals, parent_pid: int) -> Callable[[], None] | None:
    """A ``preexec_fn`` that makes the child get ``death_signal`` when its parent dies.

    PR_SET_PDEATHSIG survives exec, so a SIGKILLed supervisor leaves no child serving on its
    ports. If the parent died between fork and prctl, the child signals itself.
    """
    prctl = _prctl
    if prctl is None:
        return None

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, ctypes.c_ulong(death_signal))
        if os.getppid() != parent_pid:
            os.kill(os.getpid(), death_signal)

    return preexec


def _popen(
    argv: Sequence[str], env: dict[str, str], death_signal: signal.Signals, pass_fds: Sequence[int]
) -> Any:
    return subprocess.Popen(
        list(argv),
        env=env,
        start_new_session=True,
        pass_fds=tuple(pass_fds),
        preexec_fn=die_with_parent(death_signal, os.getpid()),  # noqa: PLW1509
    )


def spawn(
    argv: Sequence[str],
    env: dict[str, str],
    death_signal: signal.Signals,
    pass_fds: Sequence[int] = (),
) -> subprocess.Popen[bytes]:
    """Start a child from the one long-lived spawner thread.

    The parent-death signal fires when the *thread* that forked the child ends, not only the
    process: children started from short-lived threads (control API requests) would be killed
    as soon as their request was answered.
    """
    return _SPAWNER.submit(_popen, argv, env, death_signal, pass_fds).result()


_SPAWNER = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="spawner")


class Supervisor:
    """Owns the children of one stack and the multi-model registry."""

    def __init__(self, config: StackConfig) -> None:
        self.config = config
        self.work_dir = Path(config.work_dir)
        self.env = child_environment(config)
        self.model_servers: dict[str, Child] = {}
        self.gunicorn: Child | None = None
        self.nginx: Child | None = None
        self.registry: ModelRegistry | None = None
        self.control: ControlServer | None = None
        self.stop_requested = threading.Event()
        self.service_socket = HeldSocket(config.service_socket)
        self._lock = threading.Lock()
        self._closing = False

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
        )
        with self._lock:
            if self._closing:
                raise HttpError(503, "the stack is shutting down")
            self.model_servers[key] = child
            child.start()

    def stop_model_server(self, key: str) -> None:
        with self._lock:
            child = self.model_servers.pop(key, None)
        if child is not None:
            child.stop()

    def model_server_running(self, key: str) -> bool:
        with self._lock:
            child = self.model_servers.get(key)
        return child is not None and child.running()

    # --- start-up ---

    def write_configs(self) -> None:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        write_file(self.config.stack_config_path, self.config.to_json())
        if self.config.batching is not None:
            text = render_batching_config(self.config.batching)
            write_file(self._batching_file() or "", text)
            log.info("batching config %s:\n%s", self._batching_file(), text.rstrip())
        if not self.config.multi_model:
            text = render_model_config(self.config.models)
            write_file(self._model_config_file(), text)
            log.info("model config %s:\n%s", self._model_config_file(), text.rstrip())

    def start(self) -> None:
        self.write_configs()
        if self.config.multi_model:
            self._download_universal_code()
            self._start_control_api()
        else:
            self._start_model_servers()
        self._start_gunicorn()
        self._start_nginx()
        log.info("serving on port %d", self.config.port)

    def _start_model_servers(self) -> None:
        names = [m.name for m in self.config.models]
        keys = [f"model-server[{index}]" for index in range(len(self.config.instances))]
        for key, instance in zip(keys, self.config.instances, strict=True):
            self.start_model_server(key, instance, self._model_config_file(), names)
        for key, instance in zip(keys, self.config.instances, strict=True):
            self._wait_for_models(key, instance, names)

    def _wait_for_models(self, key: str, instance: Instance, names: Sequence[str]) -> None:
        child = self.model_servers[key]
        try:
            ready = wait_until_available(
                instance.rest_port,
                names,
                self.config.wait_time_seconds,
                lambda: child.running() and not self.stop_requested.is_set(),
            )
        except ModelLoadError as error:
            raise StartupError(f"{key}: {error}") from None
        if self.stop_requested.is_set():
            raise StopRequested()
        if not ready:
            why = "exited" if not child.running() else "timed out"
            raise StartupError(
                f"{key} {why} before models {', '.join(names)} became AVAILABLE "
                f"(SAGEMAKER_TFS_WAIT_TIME_SECONDS={self.config.wait_time_seconds})"
            )
        child.mark_ready()
        log.info("%s: models %s AVAILABLE", key, ", ".join(names))

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

    def _start_control_api(self) -> None:
        self.registry = ModelRegistry(self.config, self)
        self.control = ControlServer(self.config.control_socket, self.registry)
        self.control.serve_in_background()
        log.info("multi-model control API on unix:%s", self.config.control_socket)

    def _start_gunicorn(self) -> None:
        fd = self.service_socket.ensure()
        env = {**self.env, STACK_CONFIG_ENV: self.config.stack_config_path}
        self.gunicorn = Child(
            "gunicorn",
            gunicorn_command(self.config, fd),
            env,
            stop_timeout=self.config.gunicorn_timeout + 5,
            ready_check=lambda: service_answers_ping(
                self.config.service_socket, READY_PING_TIMEOUT_SECONDS
            ),
            before_start=self.service_socket.ensure,
            pass_fds=(fd,),
        )
        self.gunicorn.start()
        self._wait_for_service(self.gunicorn)
        self.gunicorn.mark_ready()

    def _wait_for_service(self, gunicorn: Child) -> None:
        """Until a worker answers /ping on the socket (requirements are installed first)."""
        budget = max(SERVICE_START_SECONDS, self.config.wait_time_seconds)
        deadline = time.monotonic() + budget
        while not service_answers_ping(self.config.service_socket):
            if self.stop_requested.is_set():
                raise StopRequested()
            if not gunicorn.running():
                raise StartupError("gunicorn exited during start-up (see its log above)")
            if time.monotonic() > deadline:
                raise StartupError(f"the Python service did not answer /ping within {budget}s")
            time.sleep(POLL_SECONDS)

    def _start_nginx(self) -> None:
        from sagemaker_tfs.supervisor import nginx_config

        try:
            text = nginx_config.render(self.config)
        except nginx_config.NginxConfigError as error:
            raise StartupError(f"cannot write the nginx config: {error}") from None
        path = self.work_dir / "nginx.conf"
        write_file(str(path), text)
        log.info("nginx config %s:\n%s", path, text.rstrip())
        nginx = shutil.which("nginx") or "/usr/sbin/nginx"
        argv = [nginx, "-c", str(path), "-p", str(self.work_dir) + "/", "-e", "stderr"]
        (self.work_dir / "nginx.pid").unlink(missing_ok=True)
        self.nginx = Child(
            "nginx",
            argv,
            self.env,
            stop_signal=signal.SIGQUIT,
            stop_timeout=self.config.nginx_proxy_read_timeout + 5,
            ready_check=lambda: self.nginx is not None and self._nginx_listens(self.nginx),
            # SIGTERM, not SIGKILL: the master then stops its workers, which have no
            # parent-death signal of their own, before it exits.
            death_signal=signal.SIGTERM,
        )
        self.nginx.start()
        self._wait_for_public_port(self.nginx)
        self.nginx.mark_ready()

    def _nginx_listens(self, nginx: Child) -> bool:
        return read_pid(self.work_dir / "nginx.pid") == nginx.pid and port_accepts_connections(
            self.config.port
        )

    def _wait_for_public_port(self, nginx: Child) -> None:
        """nginx listens, or start-up fails (e.g. the port is taken).

        nginx writes its pid file only after it has bound its sockets; checking the port
        alone could be fooled by another process listening there.
        """
        deadline = time.monotonic() + NGINX_START_SECONDS
        while not self._nginx_listens(nginx):
            if self.stop_requested.is_set():
                raise StopRequested()
            if not nginx.running():
                raise StartupError(
                    f"nginx exited during start-up (is port {self.config.port} in use? "
                    "see its log above)"
                )
            if time.monotonic() > deadline:
                raise StartupError(f"nginx did not listen on port {self.config.port} in time")
            time.sleep(POLL_SECONDS)

    # --- watching and stopping ---

    def children(self) -> list[Child]:
        with self._lock:
            servers = list(self.model_servers.values())
        return [c for c in (self.nginx, self.gunicorn) if c is not None] + servers

    def watch(self) -> None:
        while not self.stop_requested.wait(POLL_SECONDS):
            now = time.monotonic()
            for child in self.children():
                child.check(now)
            reap_orphans()

    def shutdown(self) -> None:
        """nginx first (in-flight requests finish), then gunicorn, then the model servers."""
        log.info("stopping the stack")
        if self.control is not None:
            self.control.shutdown()
            self.control.server_close()
        for child in (self.nginx, self.gunicorn):
            if child is not None:
                child.stop()
        with self._lock:
            self._closing = True
            servers = list(self.model_servers.values())
            self.model_servers.clear()
        for child in servers:  # independent of each other: stop them all at once
            child.request_stop()
        for child in servers:
            child.wait_stopped()
        self.service_socket.close()
        for path in (self.config.service_socket, self.config.control_socket):
            Path(path).unlink(missing_ok=True)
        log.info("stopped")

    def _model_config_file(self) -> str:
        return str(self.work_dir / "models.config")

    def _batching_file(self) -> str | None:
        if self.config.batching is None:
            return None
        return str(self.work_dir / "batching.config")


def models_available_check(
    key: str, instance: Instance, names: Sequence[str]
) -> Callable[[], bool]:
    """A model server's readiness check: every model AVAILABLE (a failed load logged once)."""
    reported: set[str] = set()

    def check() -> bool:
        try:
            return all(model_is_available(instance.rest_port, name) for name in names)
        except ModelLoadError as error:
            if str(error) not in reported:
                reported.add(str(error))
                log.error("%s: %s", key, error)
            return False

    return check


def become_subreaper() -> bool:
    """Make orphaned descendants (e.g. workers of a dead nginx master) our children.

    In the container ``serve`` is PID 1 and gets them anyway; on a host this gives the same
    behaviour. Linux only: elsewhere this logs at DEBUG and returns False.
    """
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_CHILD_SUBREAPER, ctypes.c_ulong(1)) != 0:
            errno = ctypes.get_errno()
            raise OSError(errno, os.strerror(errno))
    except (OSError, AttributeError, TypeError) as error:
        log.debug("cannot become a child subreaper: %s", error)
        return False
    return True


def reap_orphans() -> None:
    """Wait for exited processes that are not a Child's own: orphans reparented to us.

    ``serve`` runs as PID 1 without an init, so every orphan in the container becomes its
    child; unless it waits for them they stay zombies forever. A Child's process is left alone
    (only peeked at with WNOWAIT): Popen.poll reaps it and needs its exit status.
    """
    with _spawn_lock:
        while True:
            try:
                exited = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                return  # no children at all
            if exited is None:
                return  # none has exited
            own = {
                child.process.pid
                for child in list(_started_children)
                if child.process is not None and child.process.returncode is None
            }
            if exited.si_pid in own:
                return  # Popen.poll reaps it on the next round
            try:
                pid, status = os.waitpid(exited.si_pid, os.WNOHANG)
            except ChildProcessError:
                continue
            if pid == 0:
                return
            log.debug(
                "reaped orphan pid %d (exit status %d)", pid, os.waitstatus_to_exitcode(status)
            )


class HeldSocket:
    """The Python service's listening unix socket, made and kept open by the supervisor.

    gunicorn gets it as ``--bind=fd://N``. While gunicorn restarts, nginx's connections wait in
    the backlog and the new gunicorn serves them, instead of being refused (a 503 for each).
    Always the same fd number; made again when its path is gone (a gunicorn that stops on its
    own unlinks it).
    """

    def __init__(self, path: str, backlog: int = 2048) -> None:
        self.path = path
        self.backlog = backlog
        self.fd: int | None = None

    def ensure(self) -> int:
        if self.fd is not None and os.path.exists(self.path):
            return self.fd
        Path(self.path).unlink(missing_ok=True)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(self.path)
        sock.listen(self.backlog)
        if self.fd is None:
            self.fd = sock.detach()
        else:
            os.dup2(sock.fileno(), self.fd)
            sock.close()
            log.info("service socket %s made again", self.path)
        return self.fd

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def service_answers_ping(socket_path: str, timeout: float = 2.0) -> bool:
    """GET /ping over the service's unix socket answers 200."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout)
            sock.connect(socket_path)
            sock.sendall(b"GET /ping HTTP/1.0\r\nHost: localhost\r\n\r\n")
            return sock.recv(64).split(b" ")[1:2] == [b"200"]
    except (OSError, IndexError):
        return False


def port_accepts_connections(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0):
            return True
    except OSError:
        return False


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
    env["OMP_NUM_THREADS"] = config.omp_num_threads
    env["PYTHONUNBUFFERED"] = "1"
    for name, value in MALLOC_DEFAULTS.items():
        env.setdefault(name, value)
    return env


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
        "--config=python:sagemaker_tfs.service.gunicorn_hooks",
        "sagemaker_tfs.service.app:create_app()",
    ]


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="sagemaker-tfs serve",
        description="Run the serving stack: model servers, the Python service, nginx.",
    )
    parser.add_argument("--model-dir", help="models directory (default /opt/ml/model[s])")
    parser.add_argument("--work-dir", help="generated configs, sockets, pid files")
    parser.add_argument(
        "--port", type=int, help="public port (default SAGEMAKER_BIND_TO_PORT or 8080)"
    )
    return parser.parse_args(list(argv))


def configure_logging() -> None:
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


def log_config(config: StackConfig) -> None:
    log.info("configuration in effect: %s", json.dumps(dataclasses.asdict(config), sort_keys=True))


def main(argv: Sequence[str]) -> int:
    configure_logging()
    become_subreaper()
    args = parse_args(argv)
    try:
        config = load_config(os.environ, args.model_dir, args.work_dir, args.port)
    except ConfigError as error:
        log.error("invalid configuration: %s", error)
        return 2
    log_config(config)
    supervisor = Supervisor(config)

    def request_stop(signum: int, _frame: object) -> None:
        log.info("received %s", signal.Signals(signum).name)
        supervisor.stop_requested.set()

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    try:
        supervisor.start()
    except StartupError as error:
        log.error("start-up failed: %s", error)
        supervisor.shutdown()
        return 1
    except StopRequested:
        supervisor.shutdown()
        return 0
    except BaseException:
        supervisor.shutdown()
        raise
    supervisor.watch()
    supervisor.shutdown()
    return 0
