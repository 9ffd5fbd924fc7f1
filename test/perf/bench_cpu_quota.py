"""A CPU quota against a one-core affinity, in containers of the image (issue 36).

Containers of the same image serve ``half_plus_three`` side by side: one with a quota of
one CPU and a memory limit (``--cpus 1 --memory 2g``, as an inference component with one core
gets), one with no quota and no memory limit on one core (``--cpuset-cpus 0``), and one with
both (the quota's accounting without its processes spread over two cores). Each logs the
CPU count it sized itself for; then one client sends small JSON invocations over one kept-alive
connection to each in turn, in rounds, so that all see the same machine load. Prints one line
of JSON per container (p50/p99 of the invocations, /ping's p99, its CFS throttling counters)
and the ratio of each quota's p50 to the affinity's.

Usage (podman, with the image suite's settings, and a built image, e.g. the image suite's)::

    CONTAINERS_CONF=test/image/containers.conf .venv/bin/python test/perf/bench_cpu_quota.py \\
        --image localhost/sagemaker-tfs-under-test:2.21.0-cpu
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from local_ports import free_port  # noqa: E402

MODELS = Path(__file__).resolve().parents[1] / "resources" / "models"
BODY = json.dumps({"instances": [1.0, 2.0, 5.0]}).encode()
CONFIG_LINE = "configuration in effect: "
VARIANTS = {
    "quota_1cpu_2g": ["--cpus", "1", "--memory", "2g"],
    "affinity_1core": ["--cpuset-cpus", "0"],
    # Both: where the quota's cost comes from (its accounting, or its processes on two cores).
    "quota_on_1core": ["--cpus", "1", "--memory", "2g", "--cpuset-cpus", "0"],
}
# The CFS bandwidth counters, where each cgroup layout keeps them inside the container.
CPU_STAT_FILES = ("/sys/fs/cgroup/cpu.stat", "/sys/fs/cgroup/cpu/cpu.stat")


def start(image: str, name: str, limits: list[str]) -> int:
    port = free_port()
    subprocess.run(["podman", "rm", "-f", name], capture_output=True, check=False)
    subprocess.run(
        ["podman", "run", "--detach", "--name", name, *limits,
         "--volume", f"{MODELS}:/opt/ml/model:ro", "--publish", f"{port}:8080", image, "serve"],
        check=True, capture_output=True,
    )  # fmt: skip
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        try:
            if ask(port, "GET", "/ping")[0] == 200:
                return port
        except OSError:
            pass
        time.sleep(0.5)
    raise SystemExit(f"{name}: /ping not 200 within 180 s")


def ask(port: int, method: str, path: str, body: bytes | None = None) -> tuple[int, float]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        return timed(connection, method, path, body)
    finally:
        connection.close()


def timed(
    connection: http.client.HTTPConnection, method: str, path: str, body: bytes | None = None
) -> tuple[int, float]:
    headers = {"Content-Type": "application/json"} if body else {}
    started = time.perf_counter()
    connection.request(method, path, body=body, headers=headers)
    response = connection.getresponse()
    response.read()
    return response.status, time.perf_counter() - started


def sized_for(name: str) -> dict[str, object]:
    logs = subprocess.run(
        ["podman", "logs", name], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ).stdout
    line = next(line for line in logs.splitlines() if CONFIG_LINE in line)
    config = json.loads(line.split(CONFIG_LINE, 1)[1])
    return {key: config[key] for key in ("cpus", "container", "intra_op_parallelism")}


def throttling(name: str) -> dict[str, int]:
    """The container's periods with a quota, and those in which it was throttled."""
    for path in CPU_STAT_FILES:
        read = subprocess.run(["podman", "exec", name, "cat", path], capture_output=True, text=True)
        if read.returncode == 0:
            counters = dict(line.split() for line in read.stdout.splitlines() if " " in line)
            return {
                key: int(counters[key]) for key in ("nr_periods", "nr_throttled") if key in counters
            }
    return {}


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--image", required=True)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--requests", type=int, default=300, help="per round and container")
    args = parser.parse_args()
    ports = {name: start(args.image, f"bench-{name}", limits) for name, limits in VARIANTS.items()}
    try:
        latencies: dict[str, list[float]] = {name: [] for name in VARIANTS}
        pings: dict[str, list[float]] = {name: [] for name in VARIANTS}
        for port in ports.values():  # warm-up
            for _ in range(50):
                ask(port, "POST", "/invocations", BODY)
        for round_number in range(args.rounds):
            order = list(ports) if round_number % 2 == 0 else list(reversed(ports))
            for name in order:
                connection = http.client.HTTPConnection("127.0.0.1", ports[name], timeout=10)
                for number in range(args.requests):
                    status, seconds = timed(connection, "POST", "/invocations", BODY)
                    assert status == 200, status
                    latencies[name].append(seconds)
                    if number % 20 == 0:
                        pings[name].append(ask(ports[name], "GET", "/ping")[1])
                connection.close()
        p50 = {name: statistics.median(values) for name, values in latencies.items()}
        for name in VARIANTS:
            print(json.dumps({
                "container": name,
                "limits": " ".join(VARIANTS[name]),
                "sized_for": sized_for(f"bench-{name}"),
                "p50_ms": round(p50[name] * 1000, 3),
                "p99_ms": round(percentile(latencies[name], 0.99) * 1000, 3),
                "ping_p99_ms": round(percentile(pings[name], 0.99) * 1000, 3),
                "n": len(latencies[name]),
                "cfs": throttling(f"bench-{name}"),
            }))  # fmt: skip
        affinity = p50["affinity_1core"]
        print(json.dumps({
            "quota_p50_over_affinity_p50": round(p50["quota_1cpu_2g"] / affinity, 3),
            "quota_on_1core_p50_over_affinity_p50": round(p50["quota_on_1core"] / affinity, 3),
        }))  # fmt: skip
    finally:
        for name in VARIANTS:
            subprocess.run(["podman", "rm", "-f", f"bench-{name}"], capture_output=True)


if __name__ == "__main__":
    main()
