"""A/B of whole stacks under ``wrk``: one stack per variant, side by side, the same body posted
to each in turn (a new random order each round), so that the ratios compare versions of the
code, or settings, under the same load of the machine.

Each ``--variant LABEL=DIR[:NAME=VALUE...]`` starts ``sagemaker-tfs serve`` on ``--model-dir``
with its processes importing ``sagemaker_tfs`` from DIR (a ``container/`` directory, e.g. from
``git archive`` of another commit) and the given variables set. Per variant and connection
count: the median of the rounds' requests/s, p50 and p99, and every round's requests/s; with
``--memory``, also the median of each round's peak PSS of the whole stack (sampled every 0.5 s).
``--stack-cpus 0 --client-cpus 1`` gives the stacks one core and ``wrk`` the other.

Usage::

    git archive HEAD | tar -x -C /tmp/base
    .venv/bin/python test/perf/ab_wrk.py --model-dir MODEL --body body.json \\
        --variant before=/tmp/base/container --variant after=container --connections 1,8
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # local_ports, shared by the test helpers
sys.path.insert(0, str(HERE.parent / "integration" / "stack"))

from bench_peers import pss_mb  # noqa: E402
from whole_stack import Stack, launch  # noqa: E402

UNITS_MS = {"us": 0.001, "ms": 1.0, "s": 1000.0}


def parse_variant(spec: str) -> tuple[str, str, dict[str, str]]:
    """``LABEL=DIR[:NAME=VALUE...]`` -> (label, absolute DIR, variables)."""
    label, _, rest = spec.partition("=")
    directory, *settings = rest.split(":")
    if not label or not Path(directory, "sagemaker_tfs").is_dir():
        raise argparse.ArgumentTypeError(f"{spec}: LABEL=DIR with DIR/sagemaker_tfs")
    return label, str(Path(directory).resolve()), dict(s.split("=", 1) for s in settings)


def wrk_lua(body: Path, content_type: str, accept: str | None, directory: Path) -> Path:
    script = directory / "post.lua"
    accept_line = f'wrk.headers["Accept"] = "{accept}"\n' if accept else ""
    script.write_text(
        'wrk.method = "POST"\n'
        f'local f = io.open("{body}", "rb"); wrk.body = f:read("*a"); f:close()\n'
        f'wrk.headers["Content-Type"] = "{content_type}"\n' + accept_line
    )
    return script


def run_wrk_watching_memory(stack: Stack, url: str, script: Path, connections: int,
                            seconds: int) -> dict[str, float]:  # fmt: skip
    """``run_wrk``, plus the stack's peak PSS meanwhile (``peak_mb``)."""
    peak, done = [0.0], threading.Event()

    def sample() -> None:
        while not done.wait(0.5):
            peak[0] = max(peak[0], pss_mb(stack.process.pid))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        figures = run_wrk(url, script, connections, seconds)
    finally:
        done.set()
        sampler.join()
    return {**figures, "peak_mb": peak[0]}


# --client-cpus: wrk runs under taskset on these CPUs (the stacks on --stack-cpus).
CLIENT_PREFIX: list[str] = []


def run_wrk(url: str, script: Path, connections: int, seconds: int) -> dict[str, float]:
    command = [*CLIENT_PREFIX, "wrk", f"-t{min(connections, 2)}", f"-c{connections}",
               f"-d{seconds}s", "-s", str(script), "--latency", "--timeout", "120s",
               url]  # fmt: skip
    output = subprocess.run(command, capture_output=True, text=True, check=True).stdout

    def latency(percent: str) -> float:
        found = re.search(rf"{percent}%\s+([\d.]+)(us|ms|s)", output)
        return float(found.group(1)) * UNITS_MS[found.group(2)] if found else float("nan")

    non_2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", output)
    return {
        "req_per_s": float(re.search(r"Requests/sec:\s+([\d.]+)", output).group(1)),  # type: ignore[union-attr]
        "p50_ms": latency("50"),
        "p99_ms": latency("99"),
        "non_2xx": int(non_2xx.group(1)) if non_2xx else 0,
    }


def start_variant(
    model_dir: Path, work: Path, directory: str, env: dict[str, str], cpus: set[int] | None
) -> Stack:
    work.mkdir(parents=True)
    previous = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = directory  # the stack's processes import this code
    try:
        stack = launch(model_dir, work, env=env, affinity=cpus)
    finally:
        if previous is None:
            os.environ.pop("PYTHONPATH")
        else:
            os.environ["PYTHONPATH"] = previous
    stack.wait_for_ping()
    stack.wait_until_settled()
    return stack


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model-dir", type=Path, required=True)
    parser.add_argument("--body", type=Path, required=True, help="the file posted")
    parser.add_argument("--content-type", default="application/json")
    parser.add_argument("--accept", default=None, help="the Accept header, if any")
    parser.add_argument("--memory", action="store_true", help="also each run's peak PSS")
    parser.add_argument("--path", default="/invocations")
    parser.add_argument("--variant", action="append", required=True, type=parse_variant)
    parser.add_argument("--connections", default="1,8")
    parser.add_argument("--stack-cpus", type=cpus, help="the stacks' CPUs, e.g. 0")
    parser.add_argument("--client-cpus", type=cpus, help="wrk's CPUs, e.g. 1")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=6)
    return parser.parse_args(argv)


def cpus(text: str) -> set[int]:
    return {int(cpu) for cpu in text.split(",")}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.client_cpus:
        CLIENT_PREFIX[:] = ["taskset", "-c", ",".join(str(cpu) for cpu in sorted(args.client_cpus))]
    connections = [int(count) for count in args.connections.split(",")]
    temp = Path(tempfile.mkdtemp(prefix="ab-wrk-"))
    script = wrk_lua(args.body.resolve(), args.content_type, args.accept, temp)
    stacks: dict[str, Stack] = {}
    results: dict[tuple[int, str], list[dict[str, float]]] = {}
    load_at_start = os.getloadavg()
    try:
        for label, directory, env in args.variant:
            stacks[label] = start_variant(
                args.model_dir, temp / label, directory, env, args.stack_cpus
            )
        for count in connections:
            for stack in stacks.values():  # warm-up, not counted
                run_wrk(stack.url + args.path, script, count, 2)
            for _ in range(args.rounds):
                for label in random.sample(list(stacks), len(stacks)):
                    stack, url = stacks[label], stacks[label].url + args.path
                    figures = (
                        run_wrk_watching_memory(stack, url, script, count, args.seconds)
                        if args.memory
                        else run_wrk(url, script, count, args.seconds)
                    )
                    results.setdefault((count, label), []).append(figures)
        for count in connections:
            for label in stacks:
                rounds = results[(count, label)]
                median = {k: statistics.median(r[k] for r in rounds) for k in rounds[0]}
                print(f"c={count:<3d} {label:10s} {median['req_per_s']:8.1f} req/s  "
                      f"p50 {median['p50_ms']:7.2f} ms  p99 {median['p99_ms']:7.2f} ms  "
                      f"non-2xx {sum(r['non_2xx'] for r in rounds)}  "
                      + (f"peak PSS {median['peak_mb']:.0f} MB  " if args.memory else "") +
                      f"rounds {[round(r['req_per_s'], 1) for r in rounds]}")  # fmt: skip
        print(f"load average: start {load_at_start[0]:.2f}, end {os.getloadavg()[0]:.2f}")
    finally:
        for stack in stacks.values():
            with contextlib.suppress(Exception):
                stack.stop()
            stack.kill_session()
    return 0


if __name__ == "__main__":
    sys.exit(main())
