"""nginx's per-invocation lines counted into Prometheus families (metrics/edge_log.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from metrics_scrape import Scrape
from process_checks import wait_until
from prometheus_client import CollectorRegistry, generate_latest
from sagemaker_tfs.supervisor.metrics.edge_log import EdgeCounts, EdgeLog, upstream_seconds


class Families:
    def __init__(self, counts: EdgeCounts) -> None:
        self.collect = counts.families


def serves_m(name: str) -> bool:
    """The stack of these tests serves one model, ``m``."""
    return name == "m"


def exposition(collector: object) -> str:
    """What ``collector`` (anything with ``collect()``) shows, as a scrape reads it."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)  # type: ignore[arg-type]
    return generate_latest(registry).decode()


def exposed(collector: object) -> Scrape:
    """What ``collector`` shows, parsed."""
    return Scrape(exposition(collector))


def test_lines_become_counters_and_histograms() -> None:
    counts = EdgeCounts(serves_m)
    counts.add(b"njs\tm\t200\t0.004\t0.003\t150\t90\t")
    counts.add(b"njs\tm\t200\t0.020\t0.019\t150\t90\t")
    counts.add(b"fast_path\tm\t415\t0.002\t\t3000\t120\t")
    counts.add(b"nginx\t\t413\t0.000\t\t7000000\t300\t")
    found = exposed(Families(counts))
    requests = "sagemaker_tfs_requests_total"
    assert found.value(requests, model="m", route="njs", status_class="2xx") == 2
    assert found.value(requests, model="m", route="fast_path", status_class="4xx") == 1
    assert found.value(requests, model="", route="nginx", status_class="4xx") == 1
    duration = "sagemaker_tfs_request_duration_seconds"
    assert found.value(f"{duration}_bucket", route="njs", le="0.005") == 1
    assert found.value(f"{duration}_bucket", route="njs", le="0.025") == 2
    assert found.value(f"{duration}_sum", route="njs") == pytest.approx(0.024)
    # Only the njs conversions carry nginx's model server time (the service times its own).
    call = "sagemaker_tfs_model_server_call_seconds"
    assert found.value(f"{call}_count") == found.value(f"{call}_count", route="njs") == 2
    assert found.value(f"{call}_sum") == pytest.approx(0.022)
    sizes = "sagemaker_tfs_request_size_bytes"
    assert found.value(f"{sizes}_bucket", route="nginx", le="4.194304e+06") == 0
    assert found.value(f"{sizes}_bucket", route="nginx", le="1.6777216e+07") == 1
    assert found.value("sagemaker_tfs_response_size_bytes_sum", route="njs") == 180


def test_a_drained_batch_counts_each_line_as_often_as_it_came() -> None:
    """The pipe's lines are counted per distinct line: every family must read the same as
    for the lines added one by one (counts, shed reasons, histogram buckets and sums)."""
    lines = [
        b"njs\tm\t503\t0.000\t\t250\t330\toverloaded",
        b"njs\tm\t200\t0.004\t0.003\t250\t90\t",
        b"njs\tm\t503\t0.000\t\t250\t330\toverloaded",
        b"python\tzz\t200\t0.300\t\t2000000\t90\t",
        b"",
        b"njs\tm\t200\t0.004\t0.003\t250\t90\t",
        b"njs\tm\t503\t0.000\t\t250\t330\toverloaded",
    ]
    one_by_one, batched = EdgeCounts(serves_m), EdgeCounts(serves_m)
    for line in filter(None, lines):
        one_by_one.add(line)
    batched.add_lines(lines)
    assert exposition(Families(batched)) == exposition(Families(one_by_one))
    found = exposed(Families(batched))
    assert found.value("sagemaker_tfs_requests_shed_total", reason="overloaded") == 3
    assert found.value("sagemaker_tfs_request_duration_seconds_sum", route="njs") == (
        pytest.approx(0.008)
    )
    assert found.value("sagemaker_tfs_model_server_call_seconds_count") == 2


@pytest.mark.parametrize(
    "line", [b"", b"njs\tm\t200", b"njs\tm\tOK\t0.1\t\t1\t1\t", b"njs\tm\t200\tx\t\t1\t1\t"]
)
def test_unreadable_lines_are_counted_apart(line: bytes) -> None:
    counts = EdgeCounts(serves_m)
    counts.add(line)
    assert counts.unreadable == 1 and counts.requests == {}


def test_upstream_times_of_several_tries_add_up() -> None:
    assert upstream_seconds("0.004") == 0.004
    assert upstream_seconds("0.001, 0.004 : 0.002") == pytest.approx(0.007)
    assert upstream_seconds("") is None and upstream_seconds("-") is None


def test_the_pipe_is_read_as_nginx_writes_it(tmp_path: Path) -> None:
    """Lines written in pieces (several workers, each line one write) are counted once
    complete; the pipe stays open for writers (nginx restarts) and is removed at the end."""
    path = tmp_path / "edge.pipe"
    log = EdgeLog(str(path), serves_m)
    try:
        for _ in range(2):
            with open(path, "wb", buffering=0) as nginx:  # a restarted nginx opens it again
                nginx.write(b"njs\tm\t503\t0.1\t\t10\t20\t\nnjs\tm\t200\t0.1")
                assert exposed(log).value("sagemaker_tfs_requests_total") in (1, 3)
                nginx.write(b"\t\t10\t20\t\n")
        found = exposed(log)
        assert found.value("sagemaker_tfs_requests_total", status_class="5xx") == 2
        assert found.value("sagemaker_tfs_requests_total", status_class="2xx") == 2
        with open(path, "wb", buffering=0) as nginx:
            nginx.write(b"njs\tm\t200\t0.1\t\t10\t20\t\n")
        assert wait_until(lambda: log._counts.requests.get(("m", "njs", "2xx")) == 3)
    finally:
        log.close()
    assert not path.exists()


def test_models_the_stack_does_not_serve_share_one_label() -> None:
    """3,000 made-up names (each a 404) leave one ``unknown`` series and no memory per name;
    the served model keeps its own series."""
    counts = EdgeCounts(serves_m)
    for number in range(3000):
        counts.add(b"njs\tmade-up-%d\t404\t0.001\t0.001\t150\t90\t" % number)
    counts.add(b"njs\tm\t200\t0.001\t0.001\t150\t90\t")
    found = exposed(Families(counts))
    requests = "sagemaker_tfs_requests_total"
    assert found.value(requests, model="unknown", route="njs", status_class="4xx") == 3000
    assert found.value(requests, model="m", route="njs", status_class="2xx") == 1
    assert len(counts.requests) == 2 and len(counts.seconds) == 2
    assert len(counts._series) == 2


def test_a_model_loaded_later_gets_its_own_label() -> None:
    """Multi-model: a name counted as unknown before its load is counted by name after."""
    loaded: set[str] = set()
    counts = EdgeCounts(loaded.__contains__)
    counts.add(b"service\tlate\t404\t0.001\t\t150\t90\t")
    loaded.add("late")
    counts.add(b"service\tlate\t200\t0.001\t\t150\t90\t")
    assert set(counts.requests) == {("unknown", "service", "4xx"), ("late", "service", "2xx")}


def test_routes_and_shed_reasons_come_from_fixed_sets() -> None:
    counts = EdgeCounts(serves_m)
    counts.add(b"njs\tm\t503\t0.001\t\t150\t90\toverloaded")
    counts.add(b"njs\tm\t503\t0.001\t\t150\t90\tqueue_full")
    counts.add(b"service\tm\t503\t0.001\t\t150\t90\texpired")
    counts.add(b"service\tm\t503\t0.001\t\t150\t90\tsomething-else")
    counts.add(b"invented\tm\t200\t0.001\t\t150\t90\t")
    found = exposed(Families(counts))
    shed = "sagemaker_tfs_requests_shed_total"
    assert found.value(shed, route="njs", reason="overloaded") == 1
    assert found.value(shed, route="njs", reason="queue_full") == 1
    assert found.value(shed, route="service", reason="expired") == 1
    assert found.value(shed) == 3
    assert found.value("sagemaker_tfs_requests_total", route="nginx") == 1
