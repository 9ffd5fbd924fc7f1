"""sagemaker_tfs.service.codecs.image_inputs' map_on_cores: calls spread over native threads,
also under gevent."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading

import pytest
from sagemaker_tfs.service.codecs import image_inputs

needs_two_cores = pytest.mark.skipif(
    image_inputs.usable_cores() < 2, reason="one usable core: the calls run one by one"
)


@needs_two_cores
def test_calls_run_at_the_same_time_and_results_keep_their_order() -> None:
    both_running = threading.Barrier(2, timeout=10)  # broken if the calls ran one by one

    def call(item: int) -> int:
        both_running.wait()
        return item * 10

    assert image_inputs.map_on_cores(call, [1, 2]) == [10, 20]


def test_the_first_failing_item_is_raised_once_every_run_has_stopped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two runs, items 0-2 and 3-5: each stops at its first failure."""
    monkeypatch.setattr(image_inputs, "usable_cores", lambda: 2)
    ended: list[int] = []

    def call(item: int) -> int:
        if item in (1, 4):
            raise ValueError(f"item {item} is bad")
        ended.append(item)
        return item

    with pytest.raises(ValueError, match="item 1 is bad"):
        image_inputs.map_on_cores(call, list(range(6)))
    assert sorted(ended) == [0, 3]


def test_many_items_keep_their_order() -> None:
    assert image_inputs.map_on_cores(lambda item: item * 2, list(range(101))) == [
        item * 2 for item in range(101)
    ]


def test_one_item_runs_in_the_calling_thread() -> None:
    assert image_inputs.map_on_cores(lambda _: threading.get_ident(), [0]) == [
        threading.get_ident()
    ]


@needs_two_cores
def test_under_gevent_the_calls_run_on_native_threads() -> None:
    """With threading monkey-patched, an ordinary pool would run greenlets one at a time and
    a native barrier between two calls would never open."""
    script = textwrap.dedent("""
        from gevent import monkey
        monkey.patch_all()
        from sagemaker_tfs.service.codecs import image_inputs
        native_lock = monkey.get_original("_thread", "allocate_lock")
        started = {1: native_lock(), 2: native_lock()}
        for lock in started.values():
            lock.acquire()
        def call(item):
            started[item].release()
            return started[3 - item].acquire(timeout=10)  # blocks the hub if not native
        print(image_inputs.map_on_cores(call, [1, 2]))
        """)
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[True, True]"


@needs_two_cores
def test_under_gevent_other_greenlets_run_while_the_calls_do() -> None:
    """The request's greenlet waits for the calls cooperatively: the worker's other requests
    go on meanwhile (here a greenlet that counts 10 ms ticks through 0.3 s of native work)."""
    script = textwrap.dedent("""
        from gevent import monkey
        monkey.patch_all()
        import gevent
        from sagemaker_tfs.service.codecs import image_inputs
        native_sleep = monkey.get_original("time", "sleep")
        ticks = []
        def count_ticks():
            while True:
                ticks.append(1)
                gevent.sleep(0.01)
        gevent.spawn(count_ticks)
        gevent.sleep(0)
        before = len(ticks)
        image_inputs.map_on_cores(native_sleep, [0.3, 0.3])
        print(len(ticks) - before)
        """)
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) >= 10  # ~30 when cooperative; 0 if the hub were blocked
