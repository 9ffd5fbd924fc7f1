"""The stack's health, kept off the request path: what ``/ping`` answers.

One thread (``HealthMonitor``) asks every model server the state of its models once a second
over a channel of its own, with a short deadline, and joins the answers with the
supervisor's view of the processes (running or not, ready or not). The verdict goes to a
small JSON file in the work directory (written whole and renamed), which nginx reads for each
``/ping`` (``tensorflow_serving.js``'s ``ping``): no upstream call, so ``/ping`` never waits
behind an invocation, however busy the model servers are.

The channel: the Python model server answers GetModelStatus on a unix socket and thread pool
of its own (``settings.status_socket_beside``, ``grpc.server.serve_status``), so a status call
never queues behind Predict calls; ``tensorflow_model_server`` is asked on its gRPC socket.

The rule: ``/ping`` says whether the instance can serve. It is 200 while any watched model
server serves (answers, and holds its models AVAILABLE), 503 while none does, before the first
verdict and from the first moment of a stop. With several model servers (single model and
``SAGEMAKER_TFS_INSTANCE_COUNT``, shared multi-model, one per model), one that restarts leaves
``/ping`` 200: the others take its requests (nginx's upstream fails over), and SageMaker must not
take out of service an instance that serves. The verdict names the ones down (``degraded``).

The bound (docs/reliability.md), per model server: one whose process exited stops counting at
the next tick (``TICK_SECONDS``); one that runs but does not answer
``MISSES_BEFORE_DOWN`` checks in a row (each waits ``CHECK_DEADLINE_SECONDS``) stops counting
within about 4 s. One miss is not enough: a model server starved of CPU for a moment (a
neighbour restarting, a long garbage collection) would flap the whole instance out of
service. One answer brings it back (while one does not serve, the checks run every tick). nginx
answers 503 too when the verdict is older than ``VERDICT_MAX_AGE_SECONDS`` (the monitor
stopped), and before the first one is written.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from sagemaker_tfs.ports import Instance
from sagemaker_tfs.stack_config import StackConfig
from sagemaker_tfs.supervisor.model_servers.command_lines import grpc_target
from sagemaker_tfs.supervisor.model_servers.model_service_client import (
    ModelServiceClient,
    StatusAnswer,
)
from sagemaker_tfs.supervisor.processes.atomic_files import write_atomically

logger = logging.getLogger(__name__)

CHECK_INTERVAL_SECONDS = 1.0
CHECK_DEADLINE_SECONDS = 1.0
# How often the processes are looked at (no call: the supervisor's own state). A round of
# checks starts at once when a model server's process changed, and every tick while the
# verdict is not healthy, so that an exit is seen and a recovery answered within a tick.
TICK_SECONDS = 0.2
MISSES_BEFORE_DOWN = 3
# nginx's limit on the verdict's age: five rounds missed means the monitor itself is stuck.
VERDICT_MAX_AGE_SECONDS = 5
# Asked of a model server that must answer but serves no model of its own to ask about
# (multi-model shared mode): not a valid model name, so NOT_FOUND, which is an answer.
PROBE_NAME = "_sagemaker_tfs_health_check"


@dataclass(frozen=True)
class WatchedServer:
    """One model server as the supervisor sees it at the start of a round.

    ``models``: those that must have an AVAILABLE version on it (empty: any answer will do);
    ``pid``: its process, None when it does not run; ``not_ready``: why it does not serve yet
    although it runs and answers (a restarted shared model server being brought in line)."""

    key: str
    target: str
    models: tuple[str, ...]
    pid: int | None
    not_ready: str | None = None


@dataclass(frozen=True)
class Verdict:
    """``healthy``: the instance can serve (``/ping`` 200). ``error``: why not (the body of the
    503). ``degraded``: while healthy, the model servers that do not serve now."""

    healthy: bool
    error: str | None = None
    degraded: str | None = None

    def to_json(self, written_at: float) -> str:
        return json.dumps({**dataclasses.asdict(self), "written_at": written_at})


def judge_stack(counted: int, reasons: Sequence[str]) -> Verdict:
    """The instance serves while any of the ``counted`` model servers does (``reasons``: one
    for each that does not). None counted (multi-model, no model loaded): it serves, the
    control API loads models."""
    if len(reasons) < counted or counted == 0:
        return Verdict(True, degraded="; ".join(reasons) or None)
    return Verdict(False, "; ".join(reasons))


@dataclass
class _ServerRecord:
    """What the monitor remembers of one model server process between rounds."""

    pid: int | None
    answered_once: bool = False
    misses: int = 0
    last_miss: str = ""
    unavailable: tuple[str, ...] = field(default_factory=tuple)


def status_target(config: StackConfig, instance: Instance, python_model_server: bool) -> str:
    """Where a model server's health is asked: the Python model server's status socket, else
    (``tensorflow_model_server``, or a path too long) its gRPC socket or port."""
    path = config.work.status_socket_path(instance.grpc_port) if python_model_server else None
    return f"unix:{path}" if path else grpc_target(config, instance)


def asked_names(server: WatchedServer) -> tuple[str, ...]:
    """The models whose status a round asks of ``server`` (``PROBE_NAME`` when none)."""
    return server.models or (PROBE_NAME,)


def write_verdict(path: str, verdict: Verdict, written_at: float | None = None) -> None:
    """Write the verdict whole, then rename it into place: nginx never reads half a file."""
    write_atomically(path, verdict.to_json(time.time() if written_at is None else written_at))


class HealthMonitor:
    """Checks the model servers ``watched()`` names, a round every ``CHECK_INTERVAL_SECONDS``,
    and writes the verdict to ``path``. ``client_for(target)`` makes the channel to one."""

    def __init__(
        self,
        path: str,
        watched: Callable[[], Sequence[WatchedServer]],
        client_for: Callable[[str], ModelServiceClient] = ModelServiceClient,
    ) -> None:
        self.path = path
        self._watched = watched
        self._client_for = client_for
        self._clients: dict[str, ModelServiceClient] = {}
        self._records: dict[str, _ServerRecord] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last: Verdict | None = None
        self._next_round = 0.0

    def start(self) -> None:
        """One round now (the verdict exists before nginx starts), then one per interval."""
        self.check_once()
        self._thread = threading.Thread(target=self._run, name="health", daemon=True)
        self._thread.start()

    def stop(self, reason: str) -> None:
        """No more rounds; ``/ping`` answers 503 with ``reason`` from now on."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(CHECK_DEADLINE_SECONDS + 1.0)
        with contextlib.suppress(OSError):  # the work directory is gone: nothing to answer
            self._write(Verdict(False, reason))
        for client in self._clients.values():
            client.close()
        self._clients.clear()

    def _run(self) -> None:
        last_error = ""
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                servers = list(self._watched())
                if self.round_due(servers, started):
                    self.check_once(servers)
            except Exception as error:  # noqa: BLE001 - logged; the next round tries again
                if repr(error) != last_error:
                    logger.exception("health check round failed")
                last_error = repr(error)
            else:
                last_error = ""
            self._stop.wait(max(0.0, started + TICK_SECONDS - time.monotonic()))

    def round_due(self, servers: Sequence[WatchedServer], now: float) -> bool:
        """A round of checks is due: its interval passed, a model server does not serve, or a
        model server's process is not the one the last round saw (it exited or restarted)."""
        last = self._last
        if now >= self._next_round or last is None or not last.healthy or last.degraded:
            return True
        known = {key: record.pid for key, record in self._records.items()}
        return any(known.get(server.key, -1) != server.pid for server in servers)

    def check_once(self, servers: Sequence[WatchedServer] | None = None) -> Verdict:
        """Ask every watched model server at once (``servers``, else ``watched()``), judge,
        write the verdict."""
        self._next_round = time.monotonic() + CHECK_INTERVAL_SECONDS
        servers = list(self._watched()) if servers is None else list(servers)
        answers = {server.key: self._ask(server) for server in servers}
        results = {key: [wait() for wait in waits] for key, waits in answers.items()}
        # A model server that left the watch meanwhile (a model unloaded) does not count.
        still_watched = {server.key for server in self._watched()}
        counted = [server for server in servers if server.key in still_watched]
        judged = (self._judge(server, results[server.key]) for server in counted)
        reasons = [reason for reason in judged if reason is not None]
        self._forget_others(servers)
        verdict = judge_stack(len(counted), reasons)
        if self._stop.is_set():  # stop() writes its own verdict
            return verdict
        self._write(verdict)
        return verdict

    def _ask(self, server: WatchedServer) -> list[Callable[[], StatusAnswer]]:
        if server.pid is None:
            return []
        client = self._clients.get(server.target)
        if client is None:
            client = self._clients[server.target] = self._client_for(server.target)
        return [client.ask_state(name, CHECK_DEADLINE_SECONDS) for name in asked_names(server)]

    def _judge(self, server: WatchedServer, answers: list[StatusAnswer]) -> str | None:
        """Why ``server`` keeps the stack from being healthy, or None; updates its record."""
        record = self._records.get(server.key)
        if record is None or record.pid != server.pid:
            record = _ServerRecord(server.pid, unavailable=server.models)
            self._records[server.key] = record
        if server.pid is None:
            return f"{server.key} is not running"
        missed = [answer for answer in answers if not answer.answered]
        if missed:
            record.misses += 1
            record.last_miss = missed[0].detail
        else:
            record.misses = 0
            record.answered_once = True
            record.unavailable = tuple(
                name
                for name, answer in zip(asked_names(server), answers, strict=True)
                if not answer.available and name in server.models
            )
        if not record.answered_once:
            waiting = f": models not available yet: {', '.join(server.models)}"
            return f"{server.key} is starting" + (waiting if server.models else "")
        if record.misses >= MISSES_BEFORE_DOWN:
            return f"{server.key} does not answer its health checks ({record.last_miss})"
        if server.not_ready is not None:
            return f"{server.key} {server.not_ready}"
        if record.unavailable:
            return f"Models not available yet on {server.key}: " + ", ".join(record.unavailable)
        return None

    def _forget_others(self, servers: Sequence[WatchedServer]) -> None:
        """Drop the records and channels of model servers no longer watched."""
        keys = {server.key for server in servers}
        targets = {server.target for server in servers}
        for key in [key for key in self._records if key not in keys]:
            del self._records[key]
        for name in [name for name in self._clients if name not in targets]:
            self._clients.pop(name).close()

    def _write(self, verdict: Verdict) -> None:
        """Write the verdict (one log line when it changes); raises OSError."""
        if verdict != self._last:
            if verdict.healthy and verdict.degraded is None:
                logger.info("health: every model server answers and serves its models")
            elif verdict.healthy:
                logger.warning("health: serving, with model servers down: %s", verdict.degraded)
            else:
                logger.warning("health: not healthy: %s", verdict.error)
            self._last = verdict
        write_verdict(self.path, verdict)
