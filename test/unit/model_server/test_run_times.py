"""``rest/server.py``'s ``RunTimes``: which requests run on the REST loop itself."""

from __future__ import annotations

from sagemaker_tfs.model_server.rest import server as rest_server
from sagemaker_tfs.model_server.rest.request_reader import Request


class Api:
    """What RunTimes asks of ``RestApi``: whether a path's model batches."""

    def __init__(self, batched: set[str] = frozenset()) -> None:  # type: ignore[assignment]
        self.batched = batched

    def runs_batched(self, method: str, path: str) -> bool:
        return path in self.batched


def request(path: str, body: bytes = b"{}") -> Request:
    return Request("POST", path + "?q", (1, 1), {}, body, True)


def test_a_path_runs_inline_once_a_run_of_it_was_quick_and_until_its_runs_are_slow() -> None:
    times = rest_server.RunTimes(Api())  # type: ignore[arg-type]
    quick = request("/v1/models/m:predict")
    assert not times.quick(quick)  # never timed: the pool
    times.record(quick, 0.0002)
    assert times.quick(quick)
    assert not times.quick(request("/v1/models/other:predict"))
    assert not times.quick(request("/v1/models/m:predict", b"x" * (64 * 1024 + 1)))
    times.record(quick, 0.008)  # one spike (a busy machine) keeps it on the loop
    assert times.quick(quick)
    times.record(quick, 0.5)  # two slow runs send it to the pool
    assert not times.quick(quick)
    for _ in range(20):
        times.record(quick, 0.0002)
    assert times.quick(quick)  # quick again: back on the loop


def test_a_path_first_timed_slow_stays_in_the_pool() -> None:
    times = rest_server.RunTimes(Api())  # type: ignore[arg-type]
    slow = request("/v1/models/heavy:predict")
    times.record(slow, 0.3)
    times.record(slow, 0.3)
    assert not times.quick(slow)


def test_a_batched_model_never_runs_inline() -> None:
    times = rest_server.RunTimes(Api({"/v1/models/b:predict"}))  # type: ignore[arg-type]
    batched = request("/v1/models/b:predict")
    for _ in range(10):
        times.record(batched, 0.0001)
    assert not times.quick(batched)


def test_the_table_of_paths_is_bounded() -> None:
    times = rest_server.RunTimes(Api())  # type: ignore[arg-type]
    for n in range(5000):
        times.record(request(f"/v1/models/m{n}:predict"), 0.0001)
    assert times.quick(request("/v1/models/m0:predict"))
    assert not times.quick(request("/v1/models/m4999:predict"))
    assert len(times._seconds) == rest_server._MAX_TIMED_TARGETS
