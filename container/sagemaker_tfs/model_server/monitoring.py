"""TF Serving's Prometheus metrics (``--monitoring_config_file``), kept and written as it does.

TF Serving exports its TensorFlow monitoring metrics under their original names with every
character outside ``[A-Za-z0-9_]`` turned into ``:`` (``/tensorflow/serving/request_count``
-> ``:tensorflow:serving:request_count``): families in byte order of the original name, one
``# TYPE`` line each and no ``# HELP``, counters as integers without a ``_total`` suffix,
``{}`` for a point without labels, histograms with TF's bucket limits (microseconds) printed
``%g``-style, a value counted in the first bucket whose limit is strictly greater, every bucket
printed, no ``# EOF``; served as ``text/plain``.

This module is TF Serving's exporter re-implemented, so it writes that text itself rather than
through ``prometheus_client``, whose writers differ in each of those details and took 70-80 ms
for the 7,400 lines of 50 loaded models (the points here keep their rendered label text, which
brings that to a few milliseconds). The text is read back with ``prometheus_client``'s parser
in the tests.

The families recorded: requests (REST and gRPC) and their latency, model run latency,
MultiInference example counts, SavedModel loads and their stages, warm-up, and session
batching; the other families TF Serving declares are listed with no data, as TF Serving lists
a family nothing has written to yet.
"""

from __future__ import annotations

import bisect
import itertools
import re
import threading
import time
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

from sagemaker_tfs.wire.metrics import UNKNOWN_MODEL

CONTENT_TYPE = "text/plain"
DEFAULT_PATH = "/monitoring/prometheus/metrics"
# TF Serving's bucket limits, at the 6 significant digits it prints them with.
LATENCY_BUCKETS = tuple(float(f"{10 * 1.8**power:.6g}") for power in range(33))
EXAMPLE_COUNT_BUCKETS = tuple(float(2**power) for power in range(15))
BATCH_SIZE_BUCKETS = tuple(float(2**power) for power in range(14))
QUEUING_BUCKETS = tuple(float(f"{100 * 1.2**power:.6g}") for power in range(52))
BATCH_THREAD_POOL = "model_server_batch_threads"


def exported_name(name: str) -> str:
    """TF Serving's Prometheus name of a TF metric name."""
    exported = re.sub(r"[^A-Za-z0-9_]", ":", name)
    return "_" + exported if exported[:1].isdigit() else exported


def _label_name(name: str) -> str:
    exported = re.sub(r"[^A-Za-z0-9]", "_", name)
    return "_" + exported if exported[:1].isdigit() else exported


def _label_value(value: str) -> str:
    """Escaped as TF Serving escapes (``\\``, ``"``), and a newline too, which TF Serving leaves
    as it is: a model name with a newline (from a client's URL) must not break every scrape."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels_text(names: Sequence[str], values: Sequence[str]) -> str:
    return ",".join(
        f'{name}="{_label_value(value)}"' for name, value in zip(names, values, strict=True)
    )


class CounterPoint:
    """One counter (or gauge) point: an int64, as TF Serving prints it."""

    __slots__ = ("_lock", "_line_start", "value")

    def __init__(self, family: str, labels: str, bounds: Sequence[float] = ()) -> None:
        self._lock = threading.Lock()
        self._line_start = f"{family}{{{labels}}} "
        self.value = 0

    def inc(self, amount: int = 1) -> None:
        with self._lock:
            self.value += amount

    def lines(self) -> list[str]:
        return [self._line_start + str(self.value)]


class HistogramPoint:
    """One histogram point: counts per bucket (not cumulative), their total and the sum."""

    __slots__ = ("_lock", "_bounds", "_bucket_starts", "_sum_start", "_count_start", "_counts",
                 "_sum")  # fmt: skip

    def __init__(self, family: str, labels: str, bounds: Sequence[float]) -> None:
        self._lock = threading.Lock()
        self._bounds = bounds
        before_le = labels + "," if labels else ""
        self._bucket_starts = [
            f'{family}_bucket{{{before_le}le="{limit}"}} '
            for limit in [*(f"{bound:g}" for bound in bounds), "+Inf"]
        ]
        self._sum_start = f"{family}_sum{{{labels}}} "
        self._count_start = f"{family}_count{{{labels}}} "
        self._counts = [0] * (len(bounds) + 1)
        self._sum = 0.0

    def observe(self, value: float) -> None:
        index = bisect.bisect_right(self._bounds, value)  # the first limit strictly greater
        with self._lock:
            self._counts[index] += 1
            self._sum += value

    def lines(self) -> list[str]:
        with self._lock:
            counts, total = list(self._counts), self._sum
        cumulative = list(itertools.accumulate(counts))
        buckets = [
            start + str(count) for start, count in zip(self._bucket_starts, cumulative, strict=True)
        ]
        return [*buckets, f"{self._sum_start}{total:g}", f"{self._count_start}{cumulative[-1]}"]


Point = TypeVar("Point", CounterPoint, HistogramPoint)


class Family(Generic[Point]):
    """One TF metric: its points by label values, created on first use."""

    def __init__(
        self,
        original: str,
        kind: str,
        point_type: type[Point],
        label_names: Sequence[str],
        bounds: Sequence[float] = (),
    ) -> None:
        self.original = original
        self.name = exported_name(original)
        self.kind = kind
        self._label_names = [_label_name(name) for name in label_names]
        self._bounds = tuple(bounds)
        self._point_type: type[Point] = point_type
        self._points: dict[tuple[str, ...], Point] = {}
        self._lock = threading.Lock()

    def point(self, *values: str) -> Point:
        found = self._points.get(values)
        if found is None:
            with self._lock:
                found = self._points.get(values)
                if found is None:
                    labels = _labels_text(self._label_names, values)
                    found = self._point_type(self.name, labels, self._bounds)
                    self._points[values] = found
        return found

    def lines(self) -> list[str]:
        lines = [f"# TYPE {self.name} {self.kind}"]
        for values in sorted(self._points.copy()):
            lines += self._points[values].lines()
        return lines


class ServingMetrics:
    """Every metric family the server exports, as TF Serving names and labels them."""

    def __init__(self) -> None:
        self._families: list[Family[CounterPoint] | Family[HistogramPoint]] = []
        # Whether the server serves a model of that name (main.py: the manager's); a request
        # naming any other is counted under UNKNOWN_MODEL, so made-up names add no series.
        self.serves: Callable[[str], bool] = lambda name: True
        serving = "/tensorflow/serving/"
        self.request_count = self._counter(serving + "request_count", "model_name", "status")
        self.request_latency = self._histogram(
            serving + "request_latency", LATENCY_BUCKETS, "model_name", "API", "entrypoint"
        )
        self.runtime_latency = self._histogram(
            serving + "runtime_latency", LATENCY_BUCKETS, "model_name", "API", "runtime"
        )
        self.example_counts = self._histogram(
            serving + "request_example_counts", EXAMPLE_COUNT_BUCKETS, "model"
        )
        self.example_count_total = self._counter(serving + "request_example_count_total", "model")
        self._counter(serving + "request_log_count", "model_name", "status_code")
        self.warmup_latency = self._histogram(
            serving + "model_warmup_latency", LATENCY_BUCKETS, "model_path", "status"
        )
        self.warmup_records = self._counter(
            serving + "model_warmup_records_read", "model_path", "status"
        )
        mlmd_map = Family(serving + "mlmd_map", "gauge", CounterPoint, ["model_name", "version"])
        self._families.append(mlmd_map)
        batching = serving + "batching_session/"
        self.queuing_latency = self._histogram(
            batching + "queuing_latency", QUEUING_BUCKETS, "thread_pool_name"
        )
        self.wrapped_run_count = self._counter(batching + "wrapped_run_count")
        self.input_batch_size = self._histogram(batching + "input_batch_size", BATCH_SIZE_BUCKETS)
        self.processed_batch_size = self._histogram(
            batching + "processed_batch_size", BATCH_SIZE_BUCKETS
        )
        self.padding_size = self._histogram(
            batching + "padding_size", BATCH_SIZE_BUCKETS, "execution_batch_size"
        )
        saved_model = "/tensorflow/cc/saved_model/"
        self.load_attempts = self._counter(
            saved_model + "load_attempt_count", "model_path", "status"
        )
        self.load_latency = self._counter(saved_model + "load_latency", "model_path")
        self.load_latency_by_stage = self._histogram(
            saved_model + "load_latency_by_stage", LATENCY_BUCKETS, "model_path", "stage"
        )
        self._families.sort(key=lambda family: family.original.encode())

    def _counter(self, name: str, *labels: str) -> Family[CounterPoint]:
        family = Family(name, "counter", CounterPoint, labels)
        self._families.append(family)
        return family

    def _histogram(
        self, name: str, buckets: tuple[float, ...], *labels: str
    ) -> Family[HistogramPoint]:
        family = Family(name, "histogram", HistogramPoint, labels, buckets)
        self._families.append(family)
        return family

    def exposition(self) -> bytes:
        lines = [line for family in self._families for line in family.lines()]
        return ("\n".join(lines) + "\n").encode()

    # ----- recording -----

    def request(self, entrypoint: str, api: str, model_name: str = "") -> CountedRequest:
        """A context manager counting one request and, if it succeeds, its latency; the
        caller may set the record's ``model_name``/``api`` once it knows them, or ``status``
        if it answers an error without raising."""
        return CountedRequest(self, entrypoint, api, model_name)

    def runtime(self, model_name: str, api: str) -> RunTimer:
        """A context manager timing one successful model run (``runtime="TF1"``)."""
        return RunTimer(self.runtime_latency.point(model_name, api, "TF1"))

    def record_load(self, model_path: str, ok: bool, stages: dict[str, float]) -> None:
        """One SavedModel load: ``stages`` are seconds by stage (restore_graph, init_graph)."""
        self.load_attempts.point(model_path, "success" if ok else "fail").inc()
        if not ok:
            return
        self.load_latency.point(model_path).inc(int(sum(stages.values()) * 1e6))
        for stage, seconds in stages.items():
            self.load_latency_by_stage.point(model_path, stage).observe(seconds * 1e6)

    def record_warmup(self, model_path: str, records: int, seconds: float, status: str) -> None:
        self.warmup_latency.point(model_path, status).observe(seconds * 1e6)
        self.warmup_records.point(model_path, status).inc(records)

    def record_multi_inference(self, model_name: str, examples: int) -> None:
        self.example_counts.point(model_name).observe(examples)
        self.example_count_total.point(model_name).inc(examples)

    def record_batch(self, task_sizes: list[int], queued_seconds: list[float], padded: int) -> None:
        """One batched run: each task's size and time in the queue, the padded batch size."""
        self.wrapped_run_count.point().inc()
        for size, seconds in zip(task_sizes, queued_seconds, strict=True):
            self.input_batch_size.point().observe(size)
            self.queuing_latency.point(BATCH_THREAD_POOL).observe(seconds * 1e6)
        self.processed_batch_size.point().observe(padded)
        self.padding_size.point(str(padded)).observe(padded - sum(task_sizes))


class CountedRequest:
    """One request being counted (``ServingMetrics.request``)."""

    __slots__ = ("_metrics", "_entrypoint", "_started", "model_name", "api", "status")

    def __init__(self, metrics: ServingMetrics, entrypoint: str, api: str, model_name: str):
        self._metrics = metrics
        self._entrypoint = entrypoint
        self.model_name = model_name
        self.api = api
        self.status = "OK"

    def __enter__(self) -> CountedRequest:
        self._started = time.perf_counter()
        return self

    def __exit__(self, kind: type | None, error: BaseException | None, trace: object) -> None:
        if error is not None:
            code = getattr(getattr(error, "code", None), "name", None)
            self.status = code if isinstance(code, str) else "INTERNAL"
        metrics = self._metrics
        name = self.model_name if metrics.serves(self.model_name) else UNKNOWN_MODEL
        metrics.request_count.point(name, self.status).inc()
        if self.status == "OK":
            latency = metrics.request_latency.point(self.model_name, self.api, self._entrypoint)
            latency.observe(_micros_since(self._started))


class RunTimer:
    """One model run being timed (``ServingMetrics.runtime``); failed runs are not."""

    __slots__ = ("_histogram", "_started")

    def __init__(self, histogram: HistogramPoint) -> None:
        self._histogram = histogram

    def __enter__(self) -> None:
        self._started = time.perf_counter()

    def __exit__(self, kind: type | None, error: BaseException | None, trace: object) -> None:
        if error is None:
            self._histogram.observe(_micros_since(self._started))


def _micros_since(started: float) -> float:
    return (time.perf_counter() - started) * 1e6


METRICS = ServingMetrics()  # the process's metrics, as TF's monitoring registry is global
