"""Work that releases the GIL (decoding the images of one request), spread over the container's
CPUs on native threads, whichever gunicorn worker class runs the service.

Under the gevent worker ``threading`` is monkey-patched and an ordinary thread pool would run
greenlets on one core; gevent's own executor uses native threads and lets the request's
greenlet wait cooperatively. The pool is made on first use in each worker process (gunicorn
forks the workers, and a pool's threads do not survive a fork).
"""

from __future__ import annotations

import concurrent.futures
import itertools
import os
import sys
import threading
from collections.abc import Callable, Sequence
from typing import TypeVar

from sagemaker_tfs.container_limits import stack_cpus

Item = TypeVar("Item")
Result = TypeVar("Result")

_lock = threading.Lock()
_pool: tuple[int, concurrent.futures.Executor] | None = None  # (pid of its process, pool)


def usable_cores() -> int:
    """The cores this process may use: the container's CPU count (its quota and affinity)."""
    return stack_cpus()


def map_on_cores(function: Callable[[Item], Result], items: Sequence[Item]) -> list[Result]:
    """``[function(item) for item in items]``, the items cut into one run of neighbours per
    usable core, each run on its own thread (one hand-off per core, not per item: 64 small
    images would otherwise cost more in hand-offs than in decoding). If calls fail, the
    failure of the first item in order is raised once every run has stopped."""
    workers = min(usable_cores(), len(items))
    if workers < 2:
        return [function(item) for item in items]
    bounds = [len(items) * worker // workers for worker in range(workers + 1)]
    executor = _executor()
    runs = [
        executor.submit(_run, function, items[begin:end])
        for begin, end in itertools.pairwise(bounds)
    ]
    results: list[Result] = []
    failure: Exception | None = None
    for run in runs:
        done, error = run.result()
        results.extend(done)
        failure = failure or error
    if failure is not None:
        raise failure
    return results


def _run(
    function: Callable[[Item], Result], items: Sequence[Item]
) -> tuple[list[Result], Exception | None]:
    """The results of the calls up to the first failing one, and its exception if any."""
    results = []
    for item in items:
        try:
            results.append(function(item))
        except Exception as error:  # noqa: BLE001 - map_on_cores raises it, in item order
            return results, error
    return results, None


def _executor() -> concurrent.futures.Executor:
    global _pool
    with _lock:
        if _pool is None or _pool[0] != os.getpid():
            _pool = (os.getpid(), _new_executor(usable_cores()))
        return _pool[1]


def _new_executor(workers: int) -> concurrent.futures.Executor:
    if _under_gevent():
        from gevent.threadpool import ThreadPoolExecutor

        return ThreadPoolExecutor(max_workers=workers)
    return concurrent.futures.ThreadPoolExecutor(
        max_workers=workers, thread_name_prefix="native-threads"
    )


def _under_gevent() -> bool:
    gevent_monkey = sys.modules.get("gevent.monkey")
    return gevent_monkey is not None and gevent_monkey.is_module_patched("threading")
