"""Stateful sessions (SageMaker's sticky session routing), held by the worker that opened them.

With ``StackConfig.sessions.enabled`` on, a request whose body is ``{"requestType": "NEW_SESSION"}``
opens a session: the answer carries ``X-Amzn-SageMaker-New-Session-Id: ID; Expires=TIME``
and the handler is not called. Later requests carry ``X-Amzn-SageMaker-Session-Id: ID``; their
handlers see ``context.session_id`` and ``context.session``, the session's own dict, kept in
this worker's memory between requests (live Python objects included). ``app.py`` answers
the session requests; this module holds the sessions (and imports nothing heavy:
``gunicorn_hooks`` imports it before gevent patches the standard library). ``{"requestType":
"CLOSE"}`` with the header ends it (``X-Amzn-SageMaker-Closed-Session-Id: ID``). A session
lives ``session_ttl_seconds`` from its opening (what its Expires says); closed and expired
sessions are dropped, and an unknown or expired id is a 400 naming it.

A session's id starts with its worker's slot (``3-<32 hex digits>``): nginx routes a request
naming it to that worker's own socket (``StackConfig.work.session_socket``, bound in
``gunicorn_hooks.post_fork``), so with several workers each session's requests reach the
worker that holds its state (docs/DESIGN.md, "Stateful sessions").
"""

from __future__ import annotations

import json
import logging
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from sagemaker_tfs.wire.errors import HttpError, excerpt

logger = logging.getLogger(__name__)

NEW_SESSION = "NEW_SESSION"
# The refusal of a request that names a session while sessions are off (nginx's is the same,
# nginx/sessions_off.conf).
SESSIONS_OFF = (
    "Bad Request: X-Amzn-SageMaker-Session-Id names a session, but stateful sessions are off "
    "on this endpoint (SAGEMAKER_ENABLE_STATEFUL_SESSIONS)"
)
CLOSE = "CLOSE"
# {"requestType": "NEW_SESSION"} is 30 bytes; a larger body is never read as one.
CONTROL_BODY_MAX_BYTES = 256
# Expired sessions are dropped at each session operation, and at least this often (or once
# per time to live, if shorter) when no request comes.
SWEEP_INTERVAL_SECONDS = 30.0

_worker_slot = 0


def claim_worker_slot(slot: int) -> None:
    """This worker's slot (0 to workers - 1), given by ``gunicorn_hooks`` before the app loads."""
    global _worker_slot
    _worker_slot = slot


def worker_slot() -> int:
    return _worker_slot


@dataclass
class Session:
    """One open session: its id, when it expires (epoch seconds) and the handlers' dict."""

    id: str
    expires_at: float
    store: dict[str, Any] = field(default_factory=dict)

    def expires(self) -> str:
        """The expiry in UTC, ISO 8601 to the second (``2026-11-27T18:20:00Z``)."""
        moment = datetime.fromtimestamp(self.expires_at, timezone.utc)
        return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


class Sessions:
    """The sessions this worker holds, in the order they were opened (their expiry order,
    since every session lives as long), at most ``limit`` at once."""

    def __init__(
        self,
        slot: int,
        ttl_seconds: float,
        limit: int,
        clock: Callable[[], float] = time.time,
        on_change: Callable[[int], None] | None = None,
    ) -> None:
        self.slot = slot
        self.ttl_seconds = ttl_seconds
        self.limit = limit
        self._clock = clock
        self._on_change = on_change
        self._open: OrderedDict[str, Session] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._open)

    def open(self) -> Session:
        """A new session; 503 when this worker already holds ``limit`` of them."""
        with self._lock:
            self._drop_expired()
            if len(self._open) >= self.limit:
                logger.warning("session refused: this worker holds %d sessions", len(self._open))
                raise HttpError(
                    503,
                    f"Cannot open a session: this worker already holds {self.limit} open "
                    "sessions (SAGEMAKER_TFS_MAX_SESSIONS); close one or retry once one expires",
                )
            session_id = f"{self.slot}-{secrets.token_hex(16)}"
            session = Session(session_id, self._clock() + self.ttl_seconds)
            self._open[session_id] = session
            self._changed()
            return session

    def find(self, session_id: str) -> Session:
        """The open session of that id; 400 naming it when there is none (unknown, closed,
        expired, or held by a worker that has since exited)."""
        with self._lock:
            self._drop_expired()
            session = self._open.get(session_id)
        if session is None:
            raise unknown_session(session_id)
        return session

    def close(self, session_id: str) -> Session:
        """Ends the session (its dict is let go of); 400 as ``find`` when there is none."""
        with self._lock:
            self._drop_expired()
            session = self._open.pop(session_id, None)
            if session is not None:
                self._changed()
        if session is None:
            raise unknown_session(session_id)
        return session

    def sweep(self) -> None:
        """Drop the expired sessions now (also done at each operation)."""
        with self._lock:
            self._drop_expired()

    def _drop_expired(self) -> None:
        now = self._clock()
        dropped = False
        while self._open:
            oldest = next(iter(self._open.values()))
            if oldest.expires_at > now:
                break
            self._open.popitem(last=False)
            dropped = True
        if dropped:
            self._changed()

    def _changed(self) -> None:
        if self._on_change is not None:
            self._on_change(len(self._open))


def unknown_session(session_id: str) -> HttpError:
    return HttpError(
        400,
        f"Session ID {excerpt(session_id)} is unknown or expired (an expired or closed "
        "session cannot be used again: open a new one)",
    )


def sweep_periodically(sessions: Sessions, interval: float = SWEEP_INTERVAL_SECONDS) -> None:
    """Drops expired sessions every ``interval`` seconds even when no request comes (a
    daemon thread: a greenlet in a gevent worker)."""

    def loop() -> None:
        while True:
            time.sleep(interval)
            sessions.sweep()

    threading.Thread(target=loop, name="session-sweeper", daemon=True).start()


def control_request(body: bytes) -> str | None:
    """``NEW_SESSION`` or ``CLOSE`` when the body is SageMaker's session request, else None."""
    if len(body) > CONTROL_BODY_MAX_BYTES or not body.lstrip().startswith(b"{"):
        return None
    try:
        parsed = json.loads(body)
    except ValueError:
        return None
    kind = parsed.get("requestType") if isinstance(parsed, dict) else None
    return kind if kind in (NEW_SESSION, CLOSE) else None


def requested_session(session_id: str | None) -> str | None:
    """The session id a request names (``ParsedRequest.session_id``); SageMaker's
    ``NEW_SESSION`` placeholder names none."""
    return None if session_id == NEW_SESSION else session_id
