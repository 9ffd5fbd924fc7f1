"""gunicorn's gevent worker, told to stop, looks often whether it may (gunicorn_hooks)."""

from __future__ import annotations

import socket
import time

import gevent
import gunicorn.workers.ggevent as ggevent
import pytest
from sagemaker_tfs.service.edge import gunicorn_hooks


def test_the_gevent_workers_sleeps_are_cut_to_the_stop_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(ggevent, "gevent", gevent)
    gunicorn_hooks.look_often_whether_to_stop()
    gunicorn_hooks.look_often_whether_to_stop()  # once only: not wrapped twice
    wrapped = ggevent.gevent
    assert isinstance(wrapped, gunicorn_hooks._ShorterSleeps)
    assert wrapped._gevent is gevent
    assert wrapped.spawn is gevent.spawn  # everything else is gevent's own
    started = time.monotonic()
    wrapped.sleep(1.0)  # the worker's loop: ``while self.alive: notify(); sleep(1.0)``
    assert time.monotonic() - started < 0.5


def test_only_connections_idle_long_enough_with_nothing_waiting_are_closed() -> None:
    """Of four kept-alive connections of a stopping worker: idle 2 s (closed: its peer reads
    the end), idle 0.1 s, handling a request, and idle 2 s with a request's first bytes
    waiting unread (all three kept)."""
    pairs = [socket.socketpair() for _ in range(4)]
    long_idle, short_idle, busy, request_waiting = pairs
    request_waiting[1].sendall(b"POST /invocations HTTP/1.1\r\n")
    connections = gunicorn_hooks.KeptAliveConnections()
    now = time.monotonic()
    connections._idle_since.update(
        {
            long_idle[0]: now - 2,
            short_idle[0]: now - 0.1,
            busy[0]: None,
            request_waiting[0]: now - 2,
        }
    )
    connections.close_idle(1.0)
    assert long_idle[1].recv(1) == b""
    for kept in (short_idle, busy, request_waiting):
        kept[1].setblocking(False)
        with pytest.raises(BlockingIOError):
            kept[1].recv(1)
    for pair in pairs:
        for end in pair:
            end.close()
