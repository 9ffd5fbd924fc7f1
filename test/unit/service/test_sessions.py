"""Stateful sessions held by one worker (service/edge/sessions.py) and answered at the edge
(app.serve_in_sessions): open, find, close, expiry, the bound, and SageMaker's headers."""

from __future__ import annotations

import json
import re

import pytest
from sagemaker_tfs.service.codecs.registry import answer_type
from sagemaker_tfs.service.edge.app import serve_in_sessions
from sagemaker_tfs.service.edge.sessions import (
    CLOSE,
    NEW_SESSION,
    Session,
    Sessions,
    control_request,
    requested_session,
)
from sagemaker_tfs.service.handlers.invoke import Reply, SessionState
from sagemaker_tfs.service.request import ParsedRequest, RequestBody
from sagemaker_tfs.service.targets import ModelTarget
from sagemaker_tfs.wire.errors import HttpError
from sagemaker_tfs.wire.http_headers import CustomAttributes, MediaType

ID = re.compile(r"(\d+)-[0-9a-f]{32}")


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def held(slot: int = 0, ttl: float = 60, limit: int = 3) -> tuple[Sessions, Clock, list[int]]:
    clock, counts = Clock(), []
    return Sessions(slot, ttl, limit, clock=clock, on_change=counts.append), clock, counts


def test_a_session_is_named_after_its_worker_and_keeps_its_dict() -> None:
    sessions, clock, counts = held(slot=4)
    session = sessions.open()
    match = ID.fullmatch(session.id)
    assert match and match.group(1) == "4"
    assert session.expires_at == clock.now + 60
    sessions.find(session.id).store["turns"] = 1
    assert sessions.find(session.id).store == {"turns": 1}
    assert sessions.open().id != session.id
    assert counts == [1, 2] and len(sessions) == 2


def test_expires_is_utc_iso_to_the_second() -> None:
    assert Session("0-x", 1_800_000_000.75).expires() == "2027-01-15T08:00:00Z"


def test_closed_and_expired_sessions_are_gone_and_named_in_the_400() -> None:
    sessions, clock, counts = held(ttl=10)
    first, second = sessions.open(), sessions.open()
    sessions.close(first.id)
    for gone in (first.id, "9-unknown"):
        with pytest.raises(HttpError) as raised:
            sessions.find(gone)
        assert raised.value.status == 400 and gone in raised.value.message
    clock.now += 10  # the second's expiry: gone at the next operation
    with pytest.raises(HttpError, match="unknown or expired"):
        sessions.find(second.id)
    with pytest.raises(HttpError, match="unknown or expired"):
        sessions.close(second.id)
    assert len(sessions) == 0 and counts == [1, 2, 1, 0]


def test_the_sweep_drops_only_expired_sessions() -> None:
    sessions, clock, counts = held(ttl=10)
    old = sessions.open()
    clock.now += 6
    young = sessions.open()
    clock.now += 5
    sessions.sweep()
    assert len(sessions) == 1 and sessions.find(young.id) is not None
    with pytest.raises(HttpError):
        sessions.find(old.id)


def test_beyond_the_bound_a_503_until_one_ends() -> None:
    sessions, clock, _ = held(ttl=10, limit=2)
    first = sessions.open()
    sessions.open()
    with pytest.raises(HttpError) as raised:
        sessions.open()
    assert raised.value.status == 503
    assert "2 open sessions (SAGEMAKER_TFS_MAX_SESSIONS)" in raised.value.message
    sessions.close(first.id)
    sessions.open()
    clock.now += 10
    sessions.open()  # both others expired
    assert len(sessions) == 1


@pytest.mark.parametrize(
    ("body", "kind"),
    [(b'{"requestType": "NEW_SESSION"}', NEW_SESSION), (b' {"requestType":"CLOSE"}\n', CLOSE),
     (b'{"requestType": "OTHER"}', None), (b'{"instances": [1]}', None), (b"[1]", None),
     (b'{"requestType": ', None), (b"\xff", None), (b"", None),
     (b'{"requestType": "CLOSE", "pad": "' + b" " * 300 + b'"}', None)],
)  # fmt: skip
def test_control_requests(body: bytes, kind: str | None) -> None:
    assert control_request(body) == kind


def test_the_new_session_placeholder_names_no_session() -> None:
    assert requested_session("NEW_SESSION") is None and requested_session(None) is None
    assert requested_session("0-ab") == "0-ab"


def request(session_id: str | None = None) -> ParsedRequest:
    return ParsedRequest(
        MediaType("application/json"), (), answer_type((), ""), CustomAttributes(),
        ModelTarget("m", None, "predict"), 0, session_id=session_id,
    )  # fmt: skip


def served(sessions: Sessions, body: bytes, session_id: str | None = None) -> Reply:
    def invoke(state: SessionState | None) -> Reply:
        if state is not None:
            state.store["calls"] = state.store.get("calls", 0) + 1
            return Reply(200, f"{state.id} {state.store['calls']}".encode(), "text/plain")
        return Reply(200, b"no session", "text/plain")

    return serve_in_sessions(sessions, request(session_id), RequestBody(body), invoke)


def test_open_use_and_close_with_sagemakers_headers() -> None:
    sessions, _, _ = held()
    opened = served(sessions, b'{"requestType": "NEW_SESSION"}', "NEW_SESSION")
    ((name, value),) = opened.headers
    session_id = json.loads(opened.body)["session_id"]
    assert name == "X-Amzn-SageMaker-New-Session-Id"
    assert value == f"{session_id}; Expires={json.loads(opened.body)['expires']}"
    assert re.fullmatch(r"0-[0-9a-f]{32}; Expires=\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", value)
    assert served(sessions, b"{}", session_id).body == f"{session_id} 1".encode()
    assert served(sessions, b"{}", session_id).body == f"{session_id} 2".encode()
    assert served(sessions, b"{}").body == b"no session"
    closed = served(sessions, b'{"requestType": "CLOSE"}', session_id)
    assert closed.headers == (("X-Amzn-SageMaker-Closed-Session-Id", session_id),)
    with pytest.raises(HttpError) as raised:
        served(sessions, b"{}", session_id)
    assert raised.value.status == 400 and session_id in raised.value.message


def test_close_needs_the_session_header() -> None:
    with pytest.raises(HttpError) as raised:
        served(held()[0], b'{"requestType": "CLOSE"}')
    assert raised.value.status == 400 and "X-Amzn-SageMaker-Session-Id" in raised.value.message


def test_new_session_with_another_body_is_served_outside_any_session() -> None:
    """SageMaker's placeholder opens a session only with the control body; any other body is
    the handler's, in no session, and opens none."""
    sessions, _, _ = held()
    answer = served(sessions, b'{"instances": [1.0]}', "NEW_SESSION")
    assert (answer.body, answer.headers) == (b"no session", ())
    assert served(sessions, b'{"requestType": "new_session"}', "NEW_SESSION").body == b"no session"
    assert len(sessions) == 0
