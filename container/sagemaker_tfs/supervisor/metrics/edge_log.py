"""Invocations counted from nginx's log lines: every route, the njs conversions included.

nginx writes one line per invocation to ``StackConfig.work.edge_log_pipe`` (an access log in
``nginx/logging.conf``'s ``tfs_edge`` format: route, model, status, seconds, model server
seconds, bytes in, bytes out, why it was shed; tab-separated). ``EdgeLog`` reads them on a
thread of the supervisor, off every request's path, and keeps the counts that ``collect``
turns into Prometheus families.

Every label value is from a fixed set, whatever clients send: a model the stack does not
serve (``served_models``) is counted as ``unknown``, an unknown route as ``nginx``, a shed
reason outside ``SHED_REASONS`` not at all; so the counts' memory is bounded by the models
served, not by the names requests make up.
"""

from __future__ import annotations

import bisect
import contextlib
import fcntl
import itertools
import logging
import os
import select
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence

from prometheus_client.metrics_core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.utils import floatToGoString

from sagemaker_tfs.wire.metrics import (
    LATENCY_BUCKETS,
    MODEL_SERVER_CALL_HELP,
    MODEL_SERVER_CALL_SECONDS,
    PREFIX,
    ROUTE_NGINX,
    ROUTE_NJS,
    ROUTES,
    SHED_REASONS,
    SIZE_BUCKETS,
    UNKNOWN_MODEL,
)

logger = logging.getLogger(__name__)

FIELDS = 8
DRAIN_SECONDS = 0.05
IDLE_WAKE_SECONDS = 1.0
PIPE_BYTES = 1 << 20  # the kernel's default limit for an unprivileged pipe


class Histogram:
    """One histogram's counts: per bucket (not cumulative), their sum and the values' sum."""

    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.total = 0.0

    def observe(self, value: float, times: int = 1) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += times
        self.total += value * times

    def buckets(self) -> list[tuple[str, float]]:
        """Cumulative, as Prometheus wants them, ``+Inf`` last."""
        bounds = [*map(floatToGoString, self.bounds), "+Inf"]
        return list(zip(bounds, itertools.accumulate(map(float, self.counts)), strict=True))


class Series:
    """Where the lines of one route, model and status go (looked up once per line)."""

    __slots__ = ("key", "seconds", "model_server_seconds", "request_bytes", "response_bytes")

    def __init__(self, counts: EdgeCounts, route: str, model: str, status_class: str) -> None:
        self.key = (model, route, status_class)
        counts.requests.setdefault(self.key, 0)
        self.seconds = counts.seconds.setdefault((model, route), Histogram(LATENCY_BUCKETS))
        self.request_bytes = counts.request_bytes.setdefault((route,), Histogram(SIZE_BUCKETS))
        self.response_bytes = counts.response_bytes.setdefault((route,), Histogram(SIZE_BUCKETS))
        # nginx's model server time is only the njs conversions' (the service times its own).
        self.model_server_seconds = (
            counts.model_server_seconds.setdefault((route,), Histogram(LATENCY_BUCKETS))
            if route == ROUTE_NJS
            else None
        )


SeriesKey = tuple[bytes, bytes | None, bytes]  # route, model (None: unknown), status


class EdgeCounts:
    """The invocations seen so far, by label values; ``served_models(name)``: whether the
    stack serves that model now (its name is a label value then)."""

    def __init__(self, served_models: Callable[[str], bool]) -> None:
        self._served_models = served_models
        self.requests: dict[tuple[str, str, str], int] = {}
        self.shed: dict[tuple[str, str], int] = {}
        self.seconds: dict[tuple[str, ...], Histogram] = {}
        self.model_server_seconds: dict[tuple[str, ...], Histogram] = {}
        self.request_bytes: dict[tuple[str, ...], Histogram] = {}
        self.response_bytes: dict[tuple[str, ...], Histogram] = {}
        self.unreadable = 0
        self._series: dict[SeriesKey, Series] = {}

    def add_lines(self, lines: Iterable[bytes]) -> None:
        """``tfs_edge`` lines (without their newlines), each distinct line parsed once: under
        load most lines repeat (every refusal's is the same, and times are in milliseconds),
        so counting them first costs a hash a line instead of a parse."""
        for line, times in Counter(lines).items():
            if line:  # close() wakes the thread with an empty one
                self.add(line, times)

    def add(self, line: bytes, times: int = 1) -> None:
        """One ``tfs_edge`` line (without its newline), seen ``times`` times."""
        fields = line.split(b"\t")
        if len(fields) != FIELDS:
            self.unreadable += 1
            return
        route, model, status, seconds, model_server, bytes_in, bytes_out, shed = fields
        try:
            values = float(seconds), int(bytes_in), int(bytes_out)
            series = self._series.get((route, model, status)) or self._new(route, model, status)
        except ValueError:
            self.unreadable += 1
            return
        self.requests[series.key] += times
        if shed:
            self._count_shed(series.key[1], shed, times)
        series.seconds.observe(values[0], times)
        series.request_bytes.observe(values[1], times)
        series.response_bytes.observe(values[2], times)
        if series.model_server_seconds is not None:
            spent = upstream_seconds(model_server.decode("ascii", "replace"))
            if spent is not None:
                series.model_server_seconds.observe(spent, times)

    def _new(self, route: bytes, model: bytes, status: bytes) -> Series:
        """The series of a line whose route, model and status were not seen together yet;
        kept under the raw values only for a served model (made-up names share one)."""
        status_class = f"{int(status) // 100}xx"  # ValueError: not a status
        route_label = route.decode("utf-8", "replace")
        if route_label not in ROUTES:
            route_label = ROUTE_NGINX
        name = model.decode("utf-8", "replace")
        key: SeriesKey = (route, model, status)
        if name and not self._served_models(name):
            key = (route, None, status)
            name = UNKNOWN_MODEL
            found = self._series.get(key)
            if found is not None:
                return found
        series = self._series[key] = Series(self, route_label, name, status_class)
        return series

    def _count_shed(self, route: str, reason: bytes, times: int) -> None:
        label = reason.decode("ascii", "replace")
        if label in SHED_REASONS:
            self.shed[(route, label)] = self.shed.get((route, label), 0) + times

    def families(self) -> Iterator[Metric]:
        requests = CounterMetricFamily(
            f"{PREFIX}_requests",
            "Invocations answered, by model, route and status class (counted by nginx)",
            labels=("model", "route", "status_class"),
        )
        for labels, count in sorted(self.requests.items()):
            requests.add_metric(labels, count)
        yield requests
        shed = CounterMetricFamily(
            f"{PREFIX}_requests_shed",
            "Invocations answered 503 with Retry-After instead of being served, by route and "
            "reason: overloaded (SAGEMAKER_TFS_MAX_CONCURRENT_INVOCATIONS), expired (waited past "
            "the invocation timeout), queue_full (the model server's batch queue)",
            labels=("route", "reason"),
        )
        for route_reason, count in sorted(self.shed.items()):
            shed.add_metric(route_reason, count)
        yield shed
        yield _family(
            f"{PREFIX}_request_duration_seconds",
            "Whole invocations as nginx saw them, from the first byte read to the last sent",
            ("model", "route"),
            self.seconds,
        )
        yield _family(
            MODEL_SERVER_CALL_SECONDS, MODEL_SERVER_CALL_HELP, ("route",), self.model_server_seconds
        )
        yield _family(
            f"{PREFIX}_request_size_bytes",
            "Invocation requests' sizes (request line, headers and body)",
            ("route",),
            self.request_bytes,
        )
        yield _family(
            f"{PREFIX}_response_size_bytes",
            "Invocation answers' sizes (status line, headers and body)",
            ("route",),
            self.response_bytes,
        )


def upstream_seconds(text: str) -> float | None:
    """nginx's ``$upstream_response_time``: ``0.004``, or several tries (``0.001, 0.004``,
    summed), or nothing (``""``, ``-``) when no model server answered."""
    with contextlib.suppress(ValueError):
        return float(text)
    total, seen = 0.0, False
    for part in text.replace(":", ",").split(","):
        with contextlib.suppress(ValueError):
            total += float(part)
            seen = True
    return total if seen else None


def _family(
    name: str, documentation: str, labels: Sequence[str], table: dict[tuple[str, ...], Histogram]
) -> HistogramMetricFamily:
    family = HistogramMetricFamily(name, documentation, labels=labels)
    for label_values, histogram in sorted(table.items()):
        family.add_metric(list(label_values), histogram.buckets(), histogram.total)
    return family


class EdgeLog:
    """The pipe nginx logs invocations to, and the thread that counts its lines.

    A named pipe (FIFO) in the work directory: each nginx worker writes whole lines in batches
    of at most ``PIPE_BUF`` bytes, within ``nginx_config.EDGE_LOG_FLUSH_MS``
    (``nginx/metrics.conf``), so lines of several workers never mix; nothing is lost but
    a killed worker's last batch, and nothing goes over a network port. The supervisor holds
    both ends open, so nginx's open never waits and the reader never sees an end of file while
    nginx restarts. The thread drains the pipe at most every ``DRAIN_SECONDS`` (a scrape
    drains it too): no wake-up per request, and at 1 MiB the pipe holds tens of thousands of
    lines meanwhile.
    """

    def __init__(self, path: str, served_models: Callable[[str], bool]) -> None:
        self.path = path
        self._counts = EdgeCounts(served_models)
        self._lock = threading.Lock()
        self._partial = b""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        os.mkfifo(path, 0o600)
        self._read_end = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        self._write_end = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        with contextlib.suppress(OSError):
            fcntl.fcntl(self._read_end, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._drain_forever, name="edge-log", daemon=True)
        self._thread.start()

    def _drain_forever(self) -> None:
        """Waits for lines (idle: a wake-up a second), drains, then lets more accumulate."""
        while not self._stop.is_set():
            try:
                if select.select([self._read_end], [], [], IDLE_WAKE_SECONDS)[0]:
                    self.drain()
                    self._stop.wait(DRAIN_SECONDS)
            except Exception:  # noqa: BLE001 - nginx would block on a pipe nobody reads
                logger.exception("edge log: reading nginx's lines failed")
                self._stop.wait(DRAIN_SECONDS)

    def drain(self) -> None:
        """Count every complete line nginx has written so far."""
        with self._lock:
            while True:
                try:
                    data = os.read(self._read_end, PIPE_BYTES)
                except BlockingIOError:
                    return
                if not data:
                    return
                lines = (self._partial + data).split(b"\n")
                self._partial = lines.pop()
                self._counts.add_lines(lines)

    def collect(self) -> Iterator[Metric]:
        self.drain()
        with self._lock:
            families = list(self._counts.families())
            unreadable = self._counts.unreadable
        if unreadable:
            logger.debug("edge log: %d unreadable lines so far", unreadable)
        yield from families

    def close(self) -> None:
        self._stop.set()
        with contextlib.suppress(OSError):
            os.write(self._write_end, b"\n")
        self._thread.join(5)
        for fd in (self._read_end, self._write_end):
            with contextlib.suppress(OSError):
                os.close(fd)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
