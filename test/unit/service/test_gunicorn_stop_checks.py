"""gunicorn's gevent worker, told to stop, looks often whether it may (gunicorn_hooks)."""

from __future__ import annotations

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
