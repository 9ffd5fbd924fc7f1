"""What a model server's restart costs the JSON predictions that meet it, between versions of
the code: one stack per version, side by side (``--variant LABEL=DIR``, a ``container/``
directory, as in ab_stacks.py), each serving half_plus_three with one model server.

Round after round, in a new order each round, each stack's model server is SIGKILLed while
``--clients`` threads send small JSON predictions (the njs's route) on kept-alive connections,
without retries; the kill's window ends 0.3 s after the stack serves again. Per variant:
the predictions that met the restart (took over 50 ms), their median and slowest latency, the
answers that were not a correct 200, and the CPU seconds nginx and gunicorn used in the
windows. Since issue 55, njs hands a prediction that no model server took on two tries to
the Python service, which resends it (before: njs resent it every 100 ms for up to 10 s).

Usage::

    git archive BASE | tar -x -C /tmp/base
    .venv/bin/python test/perf/bench_refused_predictions.py --variant before=/tmp/base/container \\
        --variant after=container --rounds 4
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import statistics
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import requests

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "reliability"))

from ab_stacks import variants  # noqa: E402
from bench_fast_paths import CLOCK_TICKS, stack_for  # noqa: E402
from traffic import NJS, model_server_pids, wait_until_serving  # noqa: E402
from whole_stack import Stack, cmdline, descendant_pids  # noqa: E402

MODELS = HERE.parent / "resources" / "models"
MET_THE_RESTART_SECONDS = 0.05


@dataclass
class Figures:
    latencies: list[float] = field(default_factory=list)  # of those that met the restart
    requests: int = 0
    not_correct: int = 0
    front_cpu_seconds: float = 0.0

    def summary(self) -> dict[str, object]:
        met = sorted(self.latencies)
        return {
            "requests": self.requests,
            "met_the_restart": len(met),
            "median_ms": round(statistics.median(met) * 1000, 1) if met else None,
            "slowest_ms": round(met[-1] * 1000, 1) if met else None,
            "not_correct": self.not_correct,
            "nginx_gunicorn_cpu_s": round(self.front_cpu_seconds, 2),
        }


def front_cpu_seconds(stack: Stack) -> float:
    """User and system CPU of the stack's nginx and gunicorn processes so far."""
    ticks = 0
    for pid in descendant_pids(stack.process.pid):
        if not any(name in cmdline(pid) for name in ("nginx", "gunicorn")):
            continue
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            ticks += int(fields[11]) + int(fields[12])
    return ticks / CLOCK_TICKS


def client(stack: Stack, stop: threading.Event, figures: Figures, lock: threading.Lock) -> None:
    with requests.Session() as session:
        while not stop.is_set():
            started = time.monotonic()
            try:
                correct = NJS.correct(NJS.send(session, stack.url, 30))
            except (requests.RequestException, ValueError):
                correct = False
            took = time.monotonic() - started
            with lock:
                figures.requests += 1
                figures.not_correct += not correct
                if took > MET_THE_RESTART_SECONDS:
                    figures.latencies.append(took)


def one_kill(stack: Stack, clients: int, figures: Figures) -> None:
    stack.wait_until_settled()  # the zygote is ready: the restart is a fork, as in production
    stop, lock = threading.Event(), threading.Lock()
    threads = [threading.Thread(target=client, args=(stack, stop, figures, lock))
               for _ in range(clients)]  # fmt: skip
    cpu_before = front_cpu_seconds(stack)
    for thread in threads:
        thread.start()
    time.sleep(0.3)
    os.kill(model_server_pids(stack)[0], signal.SIGKILL)
    time.sleep(0.05)
    if wait_until_serving(stack, (NJS,), 60) is None:
        raise SystemExit(f"the stack did not serve again:\n{stack.log_tail(3000)}")
    time.sleep(0.3)
    stop.set()
    for thread in threads:
        thread.join()
    figures.front_cpu_seconds += front_cpu_seconds(stack) - cpu_before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--variant", action="append", required=True, help="LABEL=DIR")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--clients", type=int, default=4)
    args = parser.parse_args()
    chosen = variants(args.variant)
    figures = {label: Figures() for label in chosen}
    with contextlib.ExitStack() as stacks:
        running = {
            label: stacks.enter_context(
                stack_for(MODELS, ["half_plus_three"], env={"PYTHONPATH": directory})
            )
            for label, directory in chosen.items()
        }
        order = list(chosen)
        for _ in range(args.rounds):
            random.shuffle(order)
            for label in order:
                one_kill(running[label], args.clients, figures[label])
    for label in chosen:
        print(json.dumps({"variant": label, **figures[label].summary()}), flush=True)


if __name__ == "__main__":
    main()
