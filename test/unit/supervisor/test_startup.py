"""poll_until: the one polling loop of the supervisor's start-up waits."""

from __future__ import annotations

import time

from sagemaker_tfs.supervisor.processes.startup import poll_until


def test_true_as_soon_as_the_condition_holds() -> None:
    answers = iter([False, False, True])
    calls = []

    def condition() -> bool:
        calls.append(1)
        return next(answers)

    assert poll_until(condition, timeout=5, interval=0.01)
    assert len(calls) == 3


def test_false_after_the_timeout() -> None:
    started = time.monotonic()
    assert not poll_until(lambda: False, timeout=0.2, interval=0.05)
    assert 0.2 <= time.monotonic() - started < 5


def test_false_at_once_when_told_to_stop_and_the_condition_is_not_asked() -> None:
    asked = []
    started = time.monotonic()
    assert not poll_until(lambda: asked.append(1) or True, 60, 0.05, keep_going=lambda: False)
    assert asked == [] and time.monotonic() - started < 5


def test_keep_going_is_asked_before_every_try() -> None:
    rounds = iter([True, True, False])
    tries = []
    assert not poll_until(
        lambda: tries.append(1) or False, 60, 0.01, keep_going=lambda: next(rounds)
    )
    assert len(tries) == 2
