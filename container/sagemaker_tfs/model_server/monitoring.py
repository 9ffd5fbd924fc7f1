"""TF Serving's Prometheus metrics (``--monitoring_config_file``), kept by ``prometheus_client``.

TF Serving exports its TensorFlow monitoring metrics under their original names with every
character outside ``[A-Za-z0-9_]`` turned into ``:`` (``/tensorflow/serving/request_count``
-> ``:tensorflow:serving:request_count``), counters without a ``_total`` suffix, histograms
with TF's bucket limits, in microseconds, families sorted by original name. The values are
kept in ``prometheus_client`` metrics (one process, no multiprocess mode); ``TfServingNames``
presents them under TF Serving's names, and ``prometheus_client``'s OpenMetrics writer (which
writes a counter's samples under the names it is given) writes the text, served as
``text/plain`` as TF Serving serves it. Text parsers read the closing ``# EOF`` as a comment.

The families recorded here: requests (REST and gRPC) and their latency, model run latency,
MultiInference example counts, SavedModel loads and their stages, warm-up, and session
batching; the other families TF Serving declares are listed with no data, as TF Serving
lists a family nothing has written to yet.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.metrics_core import Metric
from prometheus_client.openmetrics.exposition import ALLOWUTF8, generate_latest
from prometheus_client.registry import Collector

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


class TfServingNames(Collector):
    """The metrics of ``metrics`` (original TF name -> prometheus_client metric) under
    TF Serving's exported names: counters keep their name, ``_created`` samples are dropped."""

    def __init__(self, metrics: dict[str, Counter | Gauge | Histogram]) -> None:
        self._metrics = metrics

    def collect(self) -> Iterator[Metric]:
        for original in sorted(self._metrics):
            name = exported_name(original)
            (family,) = self._metrics[original].collect()
            renamed = Metric(name, original, family.type)
            for sample in family.samples:
                suffix = sample.name[len(family.name) :]
                if suffix == "_created":
                    continue
                sample_name = name if family.type in ("counter", "gauge") else name + suffix
                renamed.add_sample(sample_name, sample.labels, sample.value)
            yield renamed


class ServingMetrics:
    """Every metric family the server exports, as TF Serving names and labels them."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self._metrics: dict[str, Counter | Gauge | Histogram] = {}
        self._children: dict[tuple, object] = {}
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
        self._metrics[serving + "mlmd_map"] = Gauge(
            "mlmd_map", "", ["model_name", "version"], registry=None
        )
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
        self.registry.register(TfServingNames(self._metrics))

    def _counter(self, name: str, *labels: str) -> Counter:
        metric = Counter(_internal_name(name), name, list(labels), registry=None)
        self._metrics[name] = metric
        return metric

    def _histogram(self, name: str, buckets: tuple[float, ...], *labels: str) -> Histogram:
        metric = Histogram(_internal_name(name), name, list(labels), buckets=buckets, registry=None)
        self._metrics[name] = metric
        return metric

    def exposition(self) -> bytes:
        return generate_latest(self.registry, escaping=ALLOWUTF8)

    # ----- recording -----

    def child(self, metric: Counter | Histogram, *labels: str):  # type: ignore[no-untyped-def]
        """``metric.labels(*labels)``, cached (prometheus_client's lookup takes a lock)."""
        key = (id(metric), labels)
        found = self._children.get(key)
        if found is None:
            found = self._children[key] = metric.labels(*labels)
        return found

    def request(self, entrypoint: str, api: str, model_name: str = "") -> RequestRecord:
        """A context manager counting one request and, if it succeeds, its latency; the
        caller may set the record's ``model_name``/``api`` once it knows them, or ``status``
        if it answers an error without raising."""
        return RequestRecord(self, entrypoint, api, model_name)

    def runtime(self, model_name: str, api: str) -> RunTimer:
        """A context manager timing one successful model run (``runtime="TF1"``)."""
        return RunTimer(self.child(self.runtime_latency, model_name, api, "TF1"))

    def record_load(self, model_path: str, ok: bool, stages: dict[str, float]) -> None:
        """One SavedModel load: ``stages`` are seconds by stage (restore_graph, init_graph)."""
        self.load_attempts.labels(model_path, "success" if ok else "fail").inc()
        if not ok:
            return
        self.load_latency.labels(model_path).inc(int(sum(stages.values()) * 1e6))
        for stage, seconds in stages.items():
            self.load_latency_by_stage.labels(model_path, stage).observe(seconds * 1e6)

    def record_warmup(self, model_path: str, records: int, seconds: float, status: str) -> None:
        self.warmup_latency.labels(model_path, status).observe(seconds * 1e6)
        self.warmup_records.labels(model_path, status).inc(records)

    def record_multi_inference(self, model_name: str, examples: int) -> None:
        self.example_counts.labels(model_name).observe(examples)
        self.example_count_total.labels(model_name).inc(examples)

    def record_batch(self, task_sizes: list[int], queued_seconds: list[float], padded: int) -> None:
        """One batched run: each task's size and time in the queue, the padded batch size."""
        self.wrapped_run_count.inc()
        for size, seconds in zip(task_sizes, queued_seconds, strict=True):
            self.input_batch_size.observe(size)
            self.queuing_latency.labels(BATCH_THREAD_POOL).observe(seconds * 1e6)
        self.processed_batch_size.observe(padded)
        self.padding_size.labels(str(padded)).observe(padded - sum(task_sizes))


class RequestRecord:
    """One request being counted (``ServingMetrics.request``)."""

    __slots__ = ("_metrics", "_entrypoint", "_started", "model_name", "api", "status")

    def __init__(self, metrics: ServingMetrics, entrypoint: str, api: str, model_name: str):
        self._metrics = metrics
        self._entrypoint = entrypoint
        self.model_name = model_name
        self.api = api
        self.status = "OK"

    def __enter__(self) -> RequestRecord:
        self._started = time.perf_counter()
        return self

    def __exit__(self, kind: type | None, error: BaseException | None, trace: object) -> None:
        if error is not None:
            code = getattr(getattr(error, "code", None), "name", None)
            self.status = code if isinstance(code, str) else "INTERNAL"
        metrics = self._metrics
        metrics.child(metrics.request_count, self.model_name, self.status).inc()
        if self.status == "OK":
            latency = metrics.child(
                metrics.request_latency, self.model_name, self.api, self._entrypoint
            )
            latency.observe(_micros_since(self._started))


class RunTimer:
    """One model run being timed (``ServingMetrics.runtime``); failed runs are not."""

    __slots__ = ("_histogram", "_started")

    def __init__(self, histogram) -> None:  # type: ignore[no-untyped-def]
        self._histogram = histogram

    def __enter__(self) -> None:
        self._started = time.perf_counter()

    def __exit__(self, kind: type | None, error: BaseException | None, trace: object) -> None:
        if error is None:
            self._histogram.observe(_micros_since(self._started))


def _internal_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", name).strip("_")


def _micros_since(started: float) -> float:
    return (time.perf_counter() - started) * 1e6


METRICS = ServingMetrics()  # the process's metrics, as TF's monitoring registry is global
