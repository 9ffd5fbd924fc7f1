"""Work that releases the GIL (decoding the images of one request), spread over the machine's
cores on native threads, whichever gunicorn worker class runs the service.

Under the gevent worker ``threading`` is monkey-patched and an ordinary thread pool would run
greenlets on one core; gevent's own executor uses native threads and lets the request's
greenlet wait cooperatively. The pool is made on first use in each worker process (gunicorn
forks the workers, and a pool's threads do not survive a fork).
"""

from __future__ import annotations

import concurrent.futures
import os
import sys
import threading
from collections.abc import Callable, Sequence
from typing import TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")

_lock = threading.Lock()
_pool: tuple[int, concurrent.futures.Executor] | None = None  # (pid of its process, pool)


def usable_cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def map_on_cores(function: Callable[[Item], Result], items: Sequence[Item]) -> list[Result]:
    """``[function(item) for item in items]``, the calls spread over the usable cores. The
    first exception a call raises is raised here, after every call has ended."""
    if min(usable_cores(), len(items)) < 2:
        return [function(item) for item in items]
    executor = _executor()
    futures = [executor.submit(function, item) for item in items]
    results, failure = [], None
    for future in futures:
        try:
            results.append(future.result())
        except Exception as error:  # noqa: BLE001 - raised below, once all calls are done
            failure = failure or error
    if failure is not None:
        raise failure
    return results


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
