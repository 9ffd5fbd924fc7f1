"""``/ping`` sampled while clients keep the model server busy (issue 36's two loads), for the
host stack (test/reliability/test_ping_under_load.py) and the image
(test/image/test_container_ping_under_load.py).

``run_load`` starts ``clients`` threads that post ``body`` one request after another for
``seconds``, samples ``/ping`` every ``PING_PERIOD_SECONDS`` meanwhile (each sample with
SageMaker's 2 s timeout), then stops: a client whose request is still running gives up on it
by its read timeout, so the run ends within ``seconds`` + ``CLIENT_READ_TIMEOUT_SECONDS``.
The samples are taken by a process of their own: in the clients' process, a sample would wait
for the interpreter lock behind 48 threads sending 2 MB each, and time the test, not /ping.
"""

from __future__ import annotations

import json
import multiprocessing
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import requests

PING_TIMEOUT_SECONDS = 2.0  # SageMaker's
PING_PERIOD_SECONDS = 0.25
CLIENT_READ_TIMEOUT_SECONDS = 8.0
# Issue 36's loads: a batch of 64 rows for compute_heavy (~0.3 s each) from 16 clients, and
# 2 MB JSON bodies for half_plus_three from 48.
HEAVY_CLIENTS = 16
HEAVY_ROWS = 64
LARGE_BODY_CLIENTS = 48
LARGE_BODY_BYTES = 2 << 20


def heavy_batch_body() -> bytes:
    """``{"instances": ...}``: 64 rows of compute_heavy's 16 floats."""
    rows = np.random.default_rng(36).random((HEAVY_ROWS, 16)).round(6)
    return json.dumps({"instances": rows.tolist()}).encode()


def large_json_body(size: int = LARGE_BODY_BYTES) -> bytes:
    """``{"instances": [...]}`` of about ``size`` bytes of half_plus_three's scalar inputs."""
    value = "1.2345678"
    count = size // (len(value) + 2)
    return ('{"instances": [' + ", ".join([value] * count) + "]}").encode()


@dataclass
class PingSample:
    status: int | None  # None: no answer within the timeout
    seconds: float
    error: str = ""


@dataclass
class LoadRun:
    """What one run saw: every /ping sample, and the statuses of the clients' requests."""

    pings: list[PingSample] = field(default_factory=list)
    statuses: Counter[str] = field(default_factory=Counter)

    @property
    def ping_misses(self) -> list[PingSample]:
        """Samples that SageMaker would count as failed health checks."""
        return [s for s in self.pings if s.status != 200 or s.seconds >= PING_TIMEOUT_SECONDS]

    @property
    def slowest_ping(self) -> float:
        return max((s.seconds for s in self.pings), default=0.0)

    def summary(self) -> str:
        statuses = ", ".join(f"{k}: {v}" for k, v in sorted(self.statuses.items()))
        return (
            f"{len(self.pings)} /ping samples, {len(self.ping_misses)} missed, slowest "
            f"{self.slowest_ping * 1000:.0f} ms; invocations {statuses or 'none'}"
        )


def _client(url: str, body: bytes, headers: dict[str, str], stop: threading.Event,
            run: LoadRun, lock: threading.Lock) -> None:  # fmt: skip
    with requests.Session() as session:
        while not stop.is_set():
            try:
                response = session.post(
                    url, data=body, headers=headers, timeout=(5, CLIENT_READ_TIMEOUT_SECONDS)
                )
                outcome = str(response.status_code)
            except requests.RequestException as error:
                outcome = type(error).__name__
            with lock:
                run.statuses[outcome] += 1


def _sample_ping(session: requests.Session, url: str) -> PingSample:
    started = time.monotonic()
    try:
        response = session.get(url, timeout=PING_TIMEOUT_SECONDS)
    except requests.RequestException as error:
        return PingSample(None, time.monotonic() - started, type(error).__name__)
    text = response.text if response.status_code != 200 else ""
    return PingSample(response.status_code, time.monotonic() - started, text)


def _sample_pings(url: str, seconds: float, results: multiprocessing.Queue) -> None:
    """The sampling process: ``/ping`` every ``PING_PERIOD_SECONDS`` for ``seconds``."""
    samples = []
    with requests.Session() as session:
        started = time.monotonic()
        while time.monotonic() - started < seconds:
            samples.append(_sample_ping(session, url))
            time.sleep(PING_PERIOD_SECONDS)
    results.put(samples)


def run_load(
    base_url: str, body: bytes, clients: int, seconds: float, headers: dict[str, str]
) -> LoadRun:
    """``clients`` clients posting ``body`` to ``/invocations`` for ``seconds`` while ``/ping``
    is sampled; returns once every client has stopped."""
    run = LoadRun()
    spawn = multiprocessing.get_context("spawn")  # no fork of a process with threads
    results = spawn.Queue()
    sampler = spawn.Process(target=_sample_pings, args=(f"{base_url}/ping", seconds, results))
    sampler.start()
    stop = threading.Event()
    lock = threading.Lock()
    all_headers = {"Content-Type": "application/json", **headers}
    threads = [
        threading.Thread(
            target=_client,
            args=(f"{base_url}/invocations", body, all_headers, stop, run, lock),
            daemon=True,
        )
        for _ in range(clients)
    ]
    for thread in threads:
        thread.start()
    try:
        run.pings = results.get(timeout=seconds + 60)
    finally:
        stop.set()
        sampler.join(10)
    for thread in threads:
        thread.join(CLIENT_READ_TIMEOUT_SECONDS + 10)
    return run
