"""model_server/rest/deadlines: a request that finishes in time is answered by its own thread
and never by the watcher; one still running at its deadline is answered by the watcher then,
once, and its thread learns it; finished requests do not pile up in the watcher's queue."""

from __future__ import annotations

import threading
import time

from sagemaker_tfs.model_server.rest.deadlines import DeadlineWatcher


def test_a_request_finished_in_time_is_not_answered_late() -> None:
    watcher = DeadlineWatcher("test-deadlines")
    late: list[int] = []
    watches = [watcher.watch(0.2, lambda i=i: late.append(i)) for i in range(50)]
    assert all(watch.finish() for watch in watches)
    time.sleep(0.4)
    assert late == []


def test_a_request_still_running_is_answered_at_its_deadline() -> None:
    watcher = DeadlineWatcher("test-deadlines")
    answered = threading.Event()
    started = time.monotonic()
    watch = watcher.watch(0.2, answered.set)
    assert answered.wait(5)  # while the request still runs
    waited = time.monotonic() - started
    assert 0.15 <= waited < 2.0
    assert watch.finish() is False  # its own thread must not answer again


def test_finish_waits_for_the_late_answer_to_be_written() -> None:
    watcher = DeadlineWatcher("test-deadlines")
    writing = threading.Event()
    written: list[str] = []

    def slow_answer() -> None:
        writing.set()
        time.sleep(0.3)
        written.append("504")

    watch = watcher.watch(0.05, slow_answer)
    assert writing.wait(5)
    assert watch.finish() is False
    assert written == ["504"]  # the connection is not closed under the watcher's write


def test_a_later_request_expires_behind_a_finished_older_one() -> None:
    watcher = DeadlineWatcher("test-deadlines")
    late: list[str] = []
    first = watcher.watch(0.1, lambda: late.append("first"))
    second = watcher.watch(0.3, lambda: late.append("second"))
    assert first.finish()
    time.sleep(0.6)
    assert late == ["second"]
    assert second.finish() is False


def test_finished_requests_are_dropped_from_the_queue() -> None:
    watcher = DeadlineWatcher("test-deadlines")
    for _ in range(1000):
        watcher.watch(30.0, lambda: None).finish()
    assert len(watcher._watches) <= 1
    running = watcher.watch(30.0, lambda: None)
    for _ in range(100):
        watcher.watch(30.0, lambda: None).finish()
    assert len(watcher._watches) == 101  # all behind the oldest one still running
    running.finish()
    watcher.watch(30.0, lambda: None).finish()
    assert len(watcher._watches) == 1
