"""Where a request's CPU goes, process by process: user and system CPU milliseconds and minor
page faults per request of the stack's nginx, gunicorn and model server processes, and of
this process (the client: requests, reading the answer as botocore does).

Requests are sent one at a time to one settled stack, scenario 2 of bench_fast_paths.py by
default (ten 512x512 JPEGs to the detector, its 55 MB of outputs as ``.npz``)::

    .venv/bin/python test/perf/stack_cpu.py [--scenario 1] [--requests 30] [--rounds 2] \\
        [--env SAGEMAKER_GUNICORN_WORKER_CLASS=gthread]

On 2 cores, a request whose processes use more than twice its latency in CPU is limited by
the cores, not by waiting; the in-process call's own CPU is printed for comparison.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_fast_paths import (  # noqa: E402
    CLOCK_TICKS,
    CPU_ROLES,
    SLOW_ANSWERS,
    Poster,
    RunningStack,
    cmdline,
    decode_rgb,
    descendant_pids,
    image_stream,
    in_process_servable,
    load_test_models,
    photo_like_jpeg,
    stack_for,
)

Usage = dict[str, list[float]]  # role -> [minor faults, user s, system s]


def usage_of(pid: int) -> list[float]:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return [0.0, 0.0, 0.0]
    return [int(fields[7]), int(fields[11]) / CLOCK_TICKS, int(fields[12]) / CLOCK_TICKS]


def usage_by_role(stack: RunningStack) -> Usage:
    used: Usage = {"client": usage_of(os.getpid())}
    for pid in descendant_pids(stack.process.pid):
        command = cmdline(pid)
        role = next((role for role, marker in CPU_ROLES if marker in command), "other")
        used[role] = [a + b for a, b in zip(used.get(role, [0, 0, 0]), usage_of(pid), strict=True)]
    return used


def scenario(number: int) -> tuple[str, bytes, str, str, Callable[[], object]]:
    """(model, body, content type, accept, the in-process call) of a scenario."""
    if number == 1:
        image = photo_like_jpeg(224, seed=1)
        servable = in_process_servable(load_test_models(["mobilenet_v2"]), "mobilenet_v2")
        return (
            "mobilenet_v2",
            image,
            "image/jpeg",
            "application/x-npy",
            lambda: servable.predict("serving_default", {"input_1": decode_rgb(image, 224)[None]}),
        )
    images = [photo_like_jpeg(512, seed=10 + i) for i in range(10)]
    servable = in_process_servable(load_test_models(["detector"]), "detector")
    return (
        "detector",
        image_stream(images),
        "application/x-image-stream",
        "application/x-npz",
        lambda: servable.predict(
            "serving_default", {"images": np.stack([decode_rgb(data, 512) for data in images])}
        ),
    )


def print_round(latencies: list[float], before: Usage, after: Usage, count: int) -> None:
    print(f"p50 {1000 * statistics.median(latencies):.1f} ms per request; per request:")
    total = 0.0
    for role in sorted(after):
        faults, user, system = (
            (a - b) / count for a, b in zip(after[role], before.get(role, [0, 0, 0]), strict=True)
        )
        total += user + system
        print(
            f"  {role:13s} user {1000 * user:6.1f} ms  system {1000 * system:6.1f} ms  "
            f"minor faults {faults:7.0f}"
        )
    print(f"  {'all':13s} {1000 * total:.1f} ms of CPU")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scenario", type=int, choices=(1, 2), default=2)
    parser.add_argument("--requests", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--env", action="append", default=[], help="NAME=VALUE for the stack")
    args = parser.parse_args()
    model, body, content_type, accept, in_process = scenario(args.scenario)
    env = dict(SLOW_ANSWERS, **dict(item.split("=", 1) for item in args.env))
    with stack_for(load_test_models([model]), [model], env=env) as stack:
        post = Poster(stack, content_type, accept, model)
        for _ in range(5):
            post(body)
        for _ in range(args.rounds):
            before, latencies = usage_by_role(stack), []
            for _ in range(args.requests):
                started = time.perf_counter()
                post(body)
                latencies.append(time.perf_counter() - started)
            print_round(latencies, before, usage_by_role(stack), args.requests)
    for _ in range(5):
        in_process()
    before_times, latencies = os.times(), []
    for _ in range(args.requests):
        started = time.perf_counter()
        in_process()
        latencies.append(time.perf_counter() - started)
    after_times = os.times()
    cpu = (after_times.user + after_times.system - before_times.user - before_times.system) * 1000
    print(
        f"in-process: p50 {1000 * statistics.median(latencies):.1f} ms per request, "
        f"{cpu / args.requests:.1f} ms of CPU"
    )


if __name__ == "__main__":
    main()
