"""The supervisor's own metrics: its children (restarts, readiness, memory), its uptime, and
the multi-model registry's loads and unloads.

Restarts and readiness are read from the ``Child`` objects at each scrape (``children.py``
already counts them), through ``ObservedStack`` (the Supervisor); only the loads and unloads
are recorded as they happen, by the control API (``ModelLoads.timed``).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric

from sagemaker_tfs.supervisor.processes.children import Child
from sagemaker_tfs.supervisor.processes.process_memory import process_rss_bytes
from sagemaker_tfs.wire.errors import HttpError
from sagemaker_tfs.wire.metrics import PREFIX

# Seconds: a small model loads in a fraction of a second, a large one in minutes.
LOAD_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)


class ObservedStack(Protocol):
    """What the metrics read of the stack at each scrape (the Supervisor gives it)."""

    serving: bool  # the stack has started serving

    def children(self) -> list[Child]:
        """Every child of every tier."""

    def model_server_children(self) -> list[Child]: ...

    def models_loaded(self) -> int | None:
        """The models loaded on a multi-model endpoint; None single-model."""

    def serves_model(self, name: str) -> bool:
        """Whether the stack serves a model of that name now (requests may name any)."""


class StackCollector:
    """The supervised processes as the supervisor sees them at each scrape."""

    def __init__(self, stack: ObservedStack) -> None:
        self._stack = stack
        self._started = time.time()

    def collect(self) -> Iterator[Metric]:
        children = self._stack.children()
        restarts = CounterMetricFamily(
            f"{PREFIX}_child_restarts",
            "Restarts of each process the supervisor runs (nginx, gunicorn, model servers)",
            labels=("child",),
        )
        ready = GaugeMetricFamily(
            f"{PREFIX}_child_ready", "1 while the process is ready, else 0", labels=("child",)
        )
        for child in children:
            restarts.add_metric((child.name,), child.restarts)
            ready.add_metric((child.name,), 1.0 if child.ready and child.running() else 0.0)
        yield restarts
        yield ready
        serving = self._stack.serving and all(child.ready for child in children)
        yield GaugeMetricFamily(
            f"{PREFIX}_ready",
            "1 once the stack serves and while every process is ready, else 0",
            value=1.0 if serving else 0.0,
        )
        yield GaugeMetricFamily(
            f"{PREFIX}_uptime_seconds",
            "Time since the supervisor started",
            value=time.time() - self._started,
        )
        yield GaugeMetricFamily(
            f"{PREFIX}_start_time_seconds",
            "When the supervisor started (Unix time)",
            value=self._started,
        )
        memory = GaugeMetricFamily(
            f"{PREFIX}_model_server_memory_bytes",
            "Resident memory of each model server process",
            labels=("model_server",),
        )
        for child in self._stack.model_server_children():
            size = process_rss_bytes(child.pid) if child.running() else 0
            if size:  # 0: gone
                memory.add_metric((child.name,), float(size))
        yield memory
        loaded = self._stack.models_loaded()
        if loaded is not None:
            yield GaugeMetricFamily(
                f"{PREFIX}_models_loaded",
                "Models loaded on the multi-model endpoint",
                value=float(loaded),
            )


class ModelLoads:
    """Multi-model loads and unloads through the control API: counts by HTTP status (507:
    refused, no memory or ports left) and the time of the successful ones."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._counts = {
            action: Counter(
                f"{PREFIX}_model_{action}s",
                f"Model {action}s asked of the multi-model endpoint, by HTTP status",
                ("code",),
                registry=registry,
            )
            for action in ("load", "unload")
        }
        self._seconds = {
            action: Histogram(
                f"{PREFIX}_model_{action}_seconds",
                f"Time of the successful model {action}s",
                buckets=LOAD_BUCKETS,
                registry=registry,
            )
            for action in ("load", "unload")
        }

    @contextlib.contextmanager
    def timed(self, action: str) -> Iterator[None]:
        """Around one load or unload: its status is 200, an ``HttpError``'s, or 500."""
        started = time.monotonic()
        code = 500
        try:
            yield
            code = 200
        except HttpError as error:
            code = error.status
            raise
        finally:
            self._counts[action].labels(str(code)).inc()
            if code == 200:
                self._seconds[action].observe(time.monotonic() - started)
