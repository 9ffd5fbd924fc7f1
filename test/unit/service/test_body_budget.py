"""The service's budget for large bodies (``body_budget.py``), with real threads: what fits is
taken at once, what does not waits in arrival order or gives up at its timeout, a body larger
than the whole budget is served alone, and a streamed answer gives its share back on close."""

from __future__ import annotations

import threading
import time

import pytest
from sagemaker_tfs.service.edge.body_budget import LARGE_BODY_BYTES, BodyBudget, GivenBackWhenClosed

MB = 1 << 20


def wait_until(condition, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def taker(budget: BodyBudget, size: int, order: list[str], name: str) -> threading.Thread:
    """A thread that takes ``size`` (waiting as long as it takes) and notes its turn."""

    def take() -> None:
        assert budget.take(size, timeout=10)
        order.append(name)

    thread = threading.Thread(target=take, daemon=True)
    thread.start()
    return thread


def test_only_large_bodies_count_and_zero_means_no_bound() -> None:
    budget = BodyBudget(4 * MB)
    assert not budget.counts(LARGE_BODY_BYTES - 1)
    assert budget.counts(LARGE_BODY_BYTES)
    assert not BodyBudget(0).counts(100 * MB)


def test_what_fits_is_taken_at_once_and_the_rest_waits_for_its_timeout() -> None:
    budget = BodyBudget(4 * MB)
    assert budget.take(3 * MB, timeout=0)
    assert budget.take(1 * MB, timeout=0)
    started = time.monotonic()
    assert not budget.take(1 * MB, timeout=0.2)
    assert 0.15 <= time.monotonic() - started < 2
    assert budget.in_use == 4 * MB and budget.waiting() == 0
    budget.give_back(3 * MB)
    assert budget.take(2 * MB, timeout=0)
    assert budget.in_use == 3 * MB


def test_a_body_larger_than_the_budget_is_served_alone() -> None:
    budget = BodyBudget(2 * MB)
    assert budget.take(50 * MB, timeout=0)
    assert not budget.take(1 * MB, timeout=0.05)
    budget.give_back(50 * MB)
    assert budget.take(1 * MB, timeout=0)
    assert not budget.take(50 * MB, timeout=0.05)  # alone means alone


def test_waiting_is_first_come_first_served() -> None:
    """A small body that would fit does not pass a large one that came before it; the count
    of those waiting is reported at each change (the metrics' gauge)."""
    reported: list[int] = []
    budget = BodyBudget(4 * MB, reported.append)
    assert budget.take(4 * MB, timeout=0)
    order: list[str] = []
    first = taker(budget, 3 * MB, order, "first (3 MB)")
    wait_until(lambda: budget.waiting() == 1)
    second = taker(budget, 1 * MB, order, "second (1 MB)")
    wait_until(lambda: budget.waiting() == 2)
    budget.give_back(2 * MB)  # 2 MB free: the second would fit, the first not yet
    time.sleep(0.2)
    assert order == []
    budget.give_back(2 * MB)
    first.join(5)
    second.join(5)
    assert order == ["first (3 MB)", "second (1 MB)"]
    assert budget.in_use == 4 * MB and budget.waiting() == 0
    assert reported == [1, 2, 1, 0]


def test_one_that_gives_up_lets_the_next_one_in() -> None:
    budget = BodyBudget(2 * MB)
    assert budget.take(2 * MB, timeout=0)
    gave_up = threading.Thread(target=budget.take, args=(2 * MB, 0.3), daemon=True)
    gave_up.start()
    wait_until(lambda: budget.waiting() == 1)
    order: list[str] = []
    later = taker(budget, 1 * MB, order, "later")
    gave_up.join(5)
    budget.give_back(1 * MB)  # 1 MB free: only the later one, now first in line, fits
    later.join(5)
    assert order == ["later"]


class Chunks:
    """An answer's chunks with the ``close`` a WSGI body may have."""

    def __init__(self) -> None:
        self.closed = 0
        self._items = iter([b"a", b"b"])

    def __iter__(self) -> Chunks:
        return self

    def __next__(self) -> bytes:
        return next(self._items)

    def close(self) -> None:
        self.closed += 1


@pytest.mark.parametrize("read", [0, 1, 2])
def test_a_streamed_answer_gives_the_share_back_once_when_closed(read: int) -> None:
    """Closed before its first chunk (a client gone), midway or at the end: given back once,
    and the answer's own chunks closed."""
    given_back: list[int] = []
    chunks = Chunks()
    answer = GivenBackWhenClosed(chunks, lambda: given_back.append(1))
    assert [next(answer) for _ in range(read)] == [b"a", b"b"][:read]
    assert given_back == []
    answer.close()
    answer.close()
    assert given_back == [1]
    assert chunks.closed == 1
