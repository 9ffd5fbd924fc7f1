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
its requests are done (``look_often_whether_to_stop``). ``post_worker_init`` also leaves the
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

import ctypes
import itertools
import logging
import os
import signal
import sys
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
    look_often_whether_to_stop()
    if os.getppid() != worker.ppid:  # the master died while the app was loading
        os._exit(1)
    config = StackConfig.load(os.environ[STACK_CONFIG_ENV])
    Path(config.work.service_ready_marker(worker.ppid)).touch()


# How often gunicorn's gevent worker looks whether it was told to stop (and then whether its
# requests are done); gunicorn's own is once a second.
STOP_CHECK_SECONDS = 0.05


class _ShorterSleeps:
    """The ``gevent`` module as gunicorn's gevent worker sees it, with sleeps of at most
    ``STOP_CHECK_SECONDS``: its loop (``while self.alive: notify(); sleep(1.0)``, then the
    same for its requests in flight) cannot otherwise be woken."""

    def __init__(self, gevent: Any) -> None:
        self._gevent = gevent

    def sleep(self, seconds: float = 0, ref: bool = True) -> None:
        self._gevent.sleep(min(seconds, STOP_CHECK_SECONDS), ref)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._gevent, name)


def look_often_whether_to_stop() -> None:
    """A worker told to stop gracefully (SIGTERM: a killed master's worker once its
    successor's serves) exits within ``STOP_CHECK_SECONDS`` of its last request, not up to
    two seconds later (one second to see the signal, one more for its requests)."""
    module: Any = sys.modules.get("gunicorn.workers.ggevent")
    if module is not None and not isinstance(module.gevent, _ShorterSleeps):
        module.gevent = _ShorterSleeps(module.gevent)


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
