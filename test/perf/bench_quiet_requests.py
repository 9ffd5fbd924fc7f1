"""What a request after a quiet spell pays on the Python service's route, between versions of
the code: one stack per version (``--variant LABEL=DIR``, as in ab_stacks.py), each serving
half_plus_three; a small ``.npy`` prediction (the service's fast path) goes to each stack in
turn, a new order each round, ``--gap`` seconds after the last one, on a new client
connection (nginx's connection to gunicorn is the one that may be kept). Since issue 55 nginx
closes a connection to gunicorn idle 1 s (30 s before), so after a quiet second the request
opens a new one. Prints each variant's median and mean latency.

Usage::

    git archive BASE container | tar -x -C /tmp/base
    .venv/bin/python test/perf/bench_quiet_requests.py --variant before=/tmp/base/container \\
        --variant after=container --rounds 20 --gap 1.5
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import random
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import requests

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from ab_stacks import variants  # noqa: E402
from bench_fast_paths import stack_for  # noqa: E402

MODELS = HERE.parent / "resources" / "models"


def npy(values: list[float]) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.array(values, np.float32))
    return buffer.getvalue()


def one_request(url: str, body: bytes) -> float:
    started = time.perf_counter()
    response = requests.post(f"{url}/invocations", data=body, timeout=30,
                             headers={"Content-Type": "application/x-npy"})  # fmt: skip
    took = time.perf_counter() - started
    if response.status_code != 200:
        raise SystemExit(f"{response.status_code}: {response.text[:200]}")
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--variant", action="append", required=True, help="LABEL=DIR")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--gap", type=float, default=1.5)
    args = parser.parse_args()
    chosen = variants(args.variant)
    body = npy([1.0, 2.0, 5.0])
    samples: dict[str, list[float]] = {label: [] for label in chosen}
    with contextlib.ExitStack() as stacks:
        urls = {
            label: stacks.enter_context(
                stack_for(MODELS, ["half_plus_three"], env={"PYTHONPATH": directory})
            ).url
            for label, directory in chosen.items()
        }
        for url in urls.values():
            for _ in range(5):
                one_request(url, body)  # warm-up: imports, first connections
        order = list(chosen)
        for _ in range(args.rounds):
            random.shuffle(order)
            for label in order:
                time.sleep(args.gap)
                samples[label].append(one_request(urls[label], body))
    for label, taken in samples.items():
        figures = {
            "median_ms": round(statistics.median(taken) * 1000, 2),
            "mean_ms": round(statistics.mean(taken) * 1000, 2),
        }
        print(json.dumps({"variant": label, "requests": len(taken), **figures}), flush=True)


if __name__ == "__main__":
    main()
