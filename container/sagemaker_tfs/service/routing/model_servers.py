"""Which model server serves a request, and failover for the stack's own calls to it.

Only the stack's own call to a model server is ever sent again (the fast path's gRPC call, the
JSON/CSV conversion's REST call, the REST call between ``input_handler`` and
``output_handler``), and only when that model server could not be reached: the connection
was refused or reset on its port, or it answered 503 / UNAVAILABLE (``ModelServerUnavailable``).
User code is never run again: a handler's errors reach the client as it raised them. Nor is
a call made, first or again, once the request's client is gone (``ClientGone``), and a call
still waiting for its model server is cut off when the client goes (``ClientLink.watching``).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Generic, NamedTuple, TypeVar

import grpc
import requests

from sagemaker_tfs.ports import Instance
from sagemaker_tfs.service.errors import ModelServerUnavailable
from sagemaker_tfs.service.routing.connections import Channels
from sagemaker_tfs.wire.errors import HttpError

logger = logging.getLogger(__name__)

# How long a call whose model server is unreachable is retried (on the other model servers,
# then on the same one once it is back), and the pause after each round over them.
FAILOVER_SECONDS = 10.0
FAILOVER_PAUSE_SECONDS = 0.1
T = TypeVar("T")
C = TypeVar("C")
# nginx's status for a request whose client closed its connection first (no one reads it).
CLIENT_GONE_STATUS = 499


class ClientLink:
    """Whether a request's client still waits for its answer (called before each attempt),
    and a guard (``watching``) under which an attempt in flight is cut off (``CallCut``
    raised where it waits) once the client goes. This one, where nothing tells: always
    wanted, never cut off; the edge's looks at nginx's connection (``edge.client_link``)."""

    def __call__(self) -> bool:
        return True

    def watching(self) -> contextlib.AbstractContextManager[object]:
        return contextlib.nullcontext()


always_wanted = ClientLink()


class CallCut(BaseException):
    """Raised into a call waiting on a model server when its client goes (``watching``): a
    BaseException, as gevent's GreenletExit, so that no handler of errors takes it for the
    call's own failure; the call's connection closes (REST) or it is cancelled (gRPC) as it
    passes, and ``Failover`` answers ``ClientGone``."""


class ClientGone(HttpError):
    """The request's client closed its connection: its model-server calls are not made, or
    are cut off while they wait."""

    def __init__(self, attempts: int) -> None:
        super().__init__(CLIENT_GONE_STATUS, f"The client is gone ({attempts} attempts made)")


class ModelServer(NamedTuple):
    """One model server process as the service reaches it."""

    grpc_port: int
    rest_port: int
    channel: grpc.Channel


class Candidates(ABC):
    """The model servers that may serve one request, in the order to try them: ``first`` is
    the one the request's ``Context`` names; ``next_after`` gives another after ``failed``
    could not be reached (``round_size`` of them make one round)."""

    round_size = 1

    @abstractmethod
    def first(self) -> ModelServer: ...

    @abstractmethod
    def next_after(self, failed: ModelServer, attempt: int) -> ModelServer: ...

    @abstractmethod
    def unreachable(self, server: ModelServer) -> None:
        """``server`` could not be reached (by a handler's own call): the next requests go to
        another model server first, while this one restarts."""


def reached_no_model_server(error: BaseException, server: ModelServer) -> bool:
    """Whether ``error`` (or one it was raised from) is a failed call to ``server``: REST that
    could not connect to its port or lost the connection, or gRPC UNAVAILABLE naming its port
    or socket."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, requests.ConnectionError):
            url = getattr(current.request, "url", None) or ""
            if f":{server.rest_port}/" in url:
                return True
        if isinstance(current, grpc.RpcError) and callable(getattr(current, "code", None)):
            details = current.details() if callable(getattr(current, "details", None)) else ""
            if current.code() == grpc.StatusCode.UNAVAILABLE and str(server.grpc_port) in (
                details or ""
            ):
                return True
        current = current.__cause__ or current.__context__
    return False


class Failover(Generic[C]):
    """One request's own calls to a model server, in turn: each on the model server that
    answered the one before; while one raises ``ModelServerUnavailable``, on the next
    candidates, round after round with a short pause, for up to ``FAILOVER_SECONDS`` from the
    first call. Predictions are idempotent, and no call runs user code. A call gets the
    ``context`` that ``context_of`` made for its model server.

    Before each attempt ``still_wanted`` (the request's edge: ``edge.client_link``) says
    whether anyone waits for the answer; when not, ``ClientGone`` is raised instead: a client
    that gave up while the model servers restart costs them no resends (issue 55). A
    ``ClientLink`` also watches each attempt while it runs: one waiting on a slow or hung
    model server is cut off as the client goes (``CallCut``), and ``ClientGone`` raised."""

    def __init__(self, candidates: Candidates, context_of: Callable[[ModelServer], C],
                 still_wanted: Callable[[], bool] = always_wanted) -> None:  # fmt: skip
        self.candidates = candidates
        self._context_of = context_of
        self._still_wanted = still_wanted
        link = still_wanted if isinstance(still_wanted, ClientLink) else always_wanted
        self._watching = link.watching
        self.server = candidates.first()
        self.context = context_of(self.server)
        self._started: float | None = None
        self._tries = 0

    def __call__(self, call: Callable[[C], T]) -> T:
        if self._started is None:
            self._started = time.monotonic()
        while True:
            if not self._still_wanted():
                logger.debug("the client is gone: no call after %d attempts", self._tries)
                raise ClientGone(self._tries)
            try:
                with self._watching():
                    return call(self.context)
            except CallCut:
                logger.debug("the client is gone: attempt %d cut off", self._tries + 1)
                raise ClientGone(self._tries + 1) from None
            except ModelServerUnavailable as error:
                self._tries += 1
                elapsed = time.monotonic() - self._started
                if elapsed >= FAILOVER_SECONDS:
                    logger.warning("no model server answered in %.1fs (%d attempts): %s",
                                   elapsed, self._tries, error.message)  # fmt: skip
                    raise
                logger.debug("retrying (attempt %d): %s", self._tries + 1, error.message)
                if self._tries % self.candidates.round_size == 0:
                    time.sleep(FAILOVER_PAUSE_SECONDS)
                self.server = self.candidates.next_after(self.server, self._tries)
                self.context = self._context_of(self.server)


class InstancePicker:
    """Round-robin over a single-model endpoint's model server instances (thread- and
    greenlet-safe).

    An instance that could not be reached is tried last for ``down_seconds``, so that while a
    model server restarts, requests go to the live ones first instead of failing over each
    time.
    """

    def __init__(self, instances: Sequence[Instance], down_seconds: float = 1.0) -> None:
        if not instances:
            raise ValueError("no model server instance configured")
        self._instances = tuple(instances)
        self._cycle = itertools.cycle(range(len(self._instances)))
        self._lock = threading.Lock()
        self._down_seconds = down_seconds
        self._down_until: dict[Instance, float] = {}

    @property
    def instances(self) -> tuple[Instance, ...]:
        return self._instances

    def next(self) -> Instance:
        with self._lock:
            return self._instances[next(self._cycle)]

    def rotation(self) -> tuple[Instance, ...]:
        """Every instance once, starting with the next one in turn (the failover order);
        those marked down recently come last."""
        now = time.monotonic()
        with self._lock:
            start = next(self._cycle)
            down = {i for i, until in self._down_until.items() if until > now}
        turn = self._instances[start:] + self._instances[:start]
        return tuple(i for i in turn if i not in down) + tuple(i for i in turn if i in down)

    def mark_down(self, instance: Instance) -> None:
        """``instance`` could not be reached: try it last for a while."""
        with self._lock:
            self._down_until[instance] = time.monotonic() + self._down_seconds


class InstanceRotation(Candidates):
    """A single-model request's candidates: every instance, in ``InstancePicker``'s order."""

    def __init__(self, picker: InstancePicker, channels: Channels) -> None:
        self._picker = picker
        self._servers = [
            ModelServer(i.grpc_port, i.rest_port, channels.get(i.grpc_port))
            for i in picker.rotation()
        ]
        self.round_size = len(self._servers)

    def first(self) -> ModelServer:
        return self._servers[0]

    def next_after(self, failed: ModelServer, attempt: int) -> ModelServer:
        self.unreachable(failed)
        return self._servers[attempt % len(self._servers)]

    def unreachable(self, server: ModelServer) -> None:
        self._picker.mark_down(Instance(server.grpc_port, server.rest_port))
