"""gunicorn configuration hooks (``--config=python:sagemaker_tfs.service.edge.gunicorn_hooks``).

``on_starting`` runs once in the master before any worker exists: the place to pip-install
``code/requirements.txt`` (multi-model: ``MODEL_DIR/code``, else the code downloaded from
S3). A failure is raised there, so gunicorn exits at once with pip's
message instead of workers failing to boot one after another.

A worker outlives a killed master until a new gunicorn serves. ``post_fork`` gives each
worker a parent-death signal; ``post_worker_init`` (the app loaded) handles it. When the
master dies the worker becomes the supervisor's child (a subreaper, or PID 1 in the image):
it keeps serving the socket the supervisor holds, and the supervisor stops it (SIGTERM,
in-flight requests finish) once the new gunicorn's worker is ready. When the supervisor is
gone too, the worker exits at once; a worker told to stop looks 20 times a second whether
its requests are done (``look_often_whether_to_stop``), and closes the kept-alive connections
that have been idle for ``IDLE_CLOSE_SECONDS`` (``KeptAliveConnections``): gunicorn's gevent
worker otherwise waits for every connection, and nginx keeps idle ones for 30 s (its
upstream ``keepalive_timeout``), so a killed master's worker stayed up to the graceful
timeout. ``post_worker_init`` also leaves the
marker by which the supervisor knows that a worker of *this* master is ready, since a ping
on the shared socket could be answered by a leftover worker. ``child_exit`` removes an exited
worker's in-flight gauges from the metrics directory (prometheus_client's multiprocess mode,
when the stack counts metrics: ``PROMETHEUS_MULTIPROC_DIR`` is set).

With stateful sessions on, ``pre_fork`` gives each worker the lowest slot (0 to workers - 1)
no live worker holds, and ``post_fork`` has the worker listen on its slot's own socket too
(``StackConfig.work.session_socket``; gunicorn's worker loop serves every socket in
``worker.sockets``) and name its sessions after the slot (``sessions.claim_worker_slot``):
nginx routes a session's requests to that socket. A replacement worker takes the slot of the
one that exited (whose sessions are gone with it) and binds the path anew.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import itertools
import logging
import os
import signal
import socket
import struct
import sys
import termios
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from sagemaker_tfs.service.edge.sessions import claim_worker_slot
from sagemaker_tfs.service.handlers.user_code import ensure_requirements
from sagemaker_tfs.service.logs import configure_logging
from sagemaker_tfs.stack_config import STACK_CONFIG_ENV, StackConfig
from sagemaker_tfs.wire.metrics import MULTIPROCESS_DIR_ENV

logger = logging.getLogger(__name__)

PR_SET_PDEATHSIG = 1  # linux/prctl.h
# Not one of gunicorn's worker signals (it resets those); until post_worker_init handles it,
# its default action ends a worker whose master died while it was booting.
PARENT_DIED = signal.SIGRTMIN + 1

_supervisor_pid = 0  # set in the master by on_starting; workers inherit it


def on_starting(server: Any) -> None:
    global _supervisor_pid
    _supervisor_pid = os.getppid()
    config = StackConfig.load(os.environ[STACK_CONFIG_ENV])
    configure_logging(config.service.log_level)
    ensure_requirements(config.shared_code_dir, config.work.root)


def pre_fork(server: Any, worker: Any) -> None:
    """In the master: the new worker's slot, the lowest that no live worker holds."""
    taken = {getattr(other, "slot", None) for other in server.WORKERS.values()}
    worker.slot = next(slot for slot in itertools.count() if slot not in taken)


def post_fork(server: Any, worker: Any) -> None:
    _set_parent_death_signal(worker)
    config = StackConfig.load(os.environ[STACK_CONFIG_ENV])
    if config.sessions.enabled:
        listen_for_sessions(worker, config.work.session_socket(worker.slot))


def listen_for_sessions(worker: Any, path: str) -> None:
    """The worker also serves ``path``, where nginx sends the requests of its sessions."""
    from gunicorn.sock import UnixSocket

    claim_worker_slot(worker.slot)
    worker.sockets = [*worker.sockets, UnixSocket(path, worker.cfg, worker.log)]


def _set_parent_death_signal(worker: Any) -> None:
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return
    prctl(PR_SET_PDEATHSIG, ctypes.c_ulong(PARENT_DIED))
    if os.getppid() != worker.ppid:  # the master died before prctl
        os._exit(1)


def post_worker_init(worker: Any) -> None:
    signal.signal(PARENT_DIED, lambda *_: _on_parent_death(worker))
    if GEVENT_WORKER_MODULE in sys.modules:
        connections = KeptAliveConnections()
        connections.watch(worker)
        look_often_whether_to_stop(partial(_close_idle_once_stopping, worker, connections))
    if os.getppid() != worker.ppid:  # the master died while the app was loading
        os._exit(1)
    config = StackConfig.load(os.environ[STACK_CONFIG_ENV])
    Path(config.work.service_ready_marker(worker.ppid)).touch()


GEVENT_WORKER_MODULE = "gunicorn.workers.ggevent"
# How often gunicorn's gevent worker looks whether it was told to stop (and then whether its
# requests are done); gunicorn's own is once a second.
STOP_CHECK_SECONDS = 0.05
# A worker told to stop closes a kept-alive connection idle this long. nginx takes its cached
# connections most recently used first, so it sends on one idle this long only when more
# requests are in flight at once than in the last second; a request it sent just as the
# connection closed would fail (a POST is not resent). One that reached the worker is served.
IDLE_CLOSE_SECONDS = 1.0


class _ShorterSleeps:
    """The ``gevent`` module as gunicorn's gevent worker sees it, with sleeps of at most
    ``STOP_CHECK_SECONDS``, each after ``each_look``: its loop (``while self.alive: notify();
    sleep(1.0)``, then the same for its requests in flight) cannot otherwise be woken."""

    def __init__(self, gevent: Any, each_look: Callable[[], None]) -> None:
        self._gevent = gevent
        self._each_look = each_look

    def sleep(self, seconds: float = 0, ref: bool = True) -> None:
        self._each_look()
        self._gevent.sleep(min(seconds, STOP_CHECK_SECONDS), ref)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._gevent, name)


def look_often_whether_to_stop(each_look: Callable[[], None] = lambda: None) -> None:
    """A worker told to stop gracefully (SIGTERM: a killed master's worker once its
    successor's serves) exits within ``STOP_CHECK_SECONDS`` of its last request, not up to
    two seconds later (one second to see the signal, one more for its requests)."""
    module: Any = sys.modules.get(GEVENT_WORKER_MODULE)
    if module is not None and not isinstance(module.gevent, _ShorterSleeps):
        module.gevent = _ShorterSleeps(module.gevent, each_look)


class KeptAliveConnections:
    """A gevent worker's connections, each with the time since which it has been idle (None
    while one of its requests is handled), from gunicorn's ``handle`` (one call a connection)
    and ``handle_request`` (one a request), which ``watch`` wraps."""

    def __init__(self) -> None:
        self._idle_since: dict[Any, float | None] = {}

    def watch(self, worker: Any) -> None:
        handle, handle_request = worker.handle, worker.handle_request

        def handle_connection(listener: Any, client: Any, addr: Any) -> None:
            self._idle_since[client] = time.monotonic()
            try:
                handle(listener, client, addr)
            finally:
                self._idle_since.pop(client, None)

        def handle_one_request(listener_name: Any, req: Any, client: Any, addr: Any) -> Any:
            self._idle_since[client] = None
            try:
                return handle_request(listener_name, req, client, addr)
            finally:
                if client in self._idle_since:
                    self._idle_since[client] = time.monotonic()

        worker.handle = handle_connection
        worker.handle_request = handle_one_request

    def close_idle(self, idle_for: float) -> None:
        """Shut down the connections idle ``idle_for`` seconds or more with no byte waiting:
        their greenlets, waiting for a next request, read the end and return."""
        now = time.monotonic()
        for client, since in list(self._idle_since.items()):
            if since is None or now - since < idle_for or _bytes_waiting(client):
                continue
            self._idle_since.pop(client, None)
            with contextlib.suppress(OSError):
                client.shutdown(socket.SHUT_RDWR)


def _bytes_waiting(connection: Any) -> bool:
    """Whether a request (or its start) waits unread on ``connection``."""
    try:
        count = fcntl.ioctl(connection.fileno(), termios.FIONREAD, b"\0" * 4)
    except OSError:
        return False
    return bool(struct.unpack("i", count)[0])


def _close_idle_once_stopping(worker: Any, connections: KeptAliveConnections) -> None:
    if not worker.alive:
        connections.close_idle(IDLE_CLOSE_SECONDS)


def child_exit(server: Any, worker: Any) -> None:
    if os.environ.get(MULTIPROCESS_DIR_ENV):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)


def _on_parent_death(worker: Any) -> None:
    """Serve on as the supervisor's child after the master died; exit if it died too."""
    if _supervisor_pid and os.getppid() == _supervisor_pid:
        logger.warning(
            "gunicorn master %d died; worker %d serves until a new gunicorn is ready",
            worker.ppid,
            os.getpid(),
        )
        worker.ppid = _supervisor_pid  # gunicorn's loop stops on a parent change otherwise
        return
    os._exit(1)
