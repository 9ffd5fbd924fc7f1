"""Multi-model failure domains (issue 55): one shared model server killed with many models.

Starts ``sagemaker-tfs serve`` in multi-model mode with ``--models`` copies of
half_plus_three, loads them all, then SIGKILLs one shared model server while one client
invokes a sample of ``--sample`` models in rounds and another thread samples ``/ping`` every
50 ms. Prints: the memory the model servers gained per loaded model; how many of the sampled
models ever failed to give a correct 200 (no client retries; the stack's own resends count as
the stack's); the seconds from the kill until the first round in which every sampled model
answered, and until the supervisor logged the killed server serving every model again;
``/ping``'s answers meanwhile.

    .venv/bin/python test/perf/bench_multi_model_kill.py [--models 1000] [--sample 50] \\
        [--instances 1 2] [--after 5]

``--instances`` runs one stack per value (``SAGEMAKER_TFS_INSTANCE_COUNT``; leave it out for
the default).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_multi_model import (  # noqa: E402
    MIB,
    model_server_rss,
    models_stack,
    name_of,
    timed_load,
)
from whole_stack import Stack, wait_for  # noqa: E402

PING_INTERVAL_SECONDS = 0.05
REQUEST_TIMEOUT_SECONDS = 30.0


@dataclass
class PingSamples:
    """``/ping``'s status codes (None: no answer) from the kill on."""

    stack: Stack
    codes: list[int | None] = field(default_factory=list)
    stopped: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        while not self.stopped.is_set():
            self.codes.append(self.stack.ping(timeout=2.0))
            self.stopped.wait(PING_INTERVAL_SECONDS)

    def summary(self) -> str:
        counts = Counter("none" if code is None else str(code) for code in self.codes)
        return f"{counts.get('200', 0)} of {len(self.codes)} 200 ({dict(counts)})"


def correct(session: requests.Session, stack: Stack, name: str, waits: list[float]) -> bool:
    """One request; its seconds appended to ``waits``."""
    started = time.monotonic()
    try:
        response = session.post(
            f"{stack.url}/models/{name}/invoke",
            data=b"[1.0]",
            headers={"Content-Type": "application/json"},
            timeout=REQUEST_TIMEOUT_SECONDS,
        )
    except requests.RequestException:
        return False
    finally:
        waits.append(time.monotonic() - started)
    return response.status_code == 200 and response.json() == {"predictions": [[3.5]]}


def kill_one_server(stack: Stack, models: int, sample: list[str], after: float) -> None:
    """Kill the first shared model server; invoke ``sample`` in rounds until every sampled
    model answered in one round and ``after`` seconds more have passed."""
    servers = stack.child_pids("--rest_api_port")
    line = f"serves the {models} loaded model(s)"
    seen = stack.log_text().count(line)
    pings = PingSamples(stack)
    pinger = threading.Thread(target=pings.run, daemon=True)
    session = requests.Session()
    failed: set[str] = set()
    rounds: list[tuple[float, int]] = []
    waits: list[float] = []
    all_back: float | None = None
    pinger.start()
    killed = time.monotonic()
    os.kill(servers[0], signal.SIGKILL)
    while time.monotonic() - killed < 120:
        answered = [name for name in sample if correct(session, stack, name, waits)]
        failed.update(set(sample) - set(answered))
        ended = time.monotonic() - killed
        rounds.append((ended, len(answered)))
        if all_back is None and len(answered) == len(sample):
            all_back = ended
        if all_back is not None and ended > all_back + after:
            break
    reloaded = wait_for(lambda: stack.log_text().count(line) > seen, 120, 0.1)
    reload_seconds = time.monotonic() - killed
    pings.stopped.set()
    pinger.join()
    print(f"  model servers: {len(servers)}; killed pid {servers[0]}")
    print(f"  sampled models that ever failed: {len(failed)} of {len(sample)}")
    back = "never" if all_back is None else f"{all_back:.2f} s after the kill"
    slowest = sorted(waits)[-3:]
    print(f"  slowest requests: {', '.join(f'{w:.2f}' for w in slowest)} s of {len(waits)}")
    print(f"  first round with all {len(sample)} answering ended: {back}")
    shown = ", ".join(f"{ended:.2f}s:{count}" for ended, count in rounds[:8])
    print(f"  rounds (end: models answering): {shown}{' ...' if len(rounds) > 8 else ''}")
    print(f"  killed server serving all {models} again: {reloaded} by {reload_seconds:.1f} s")
    print(f"  /ping after the kill: {pings.summary()}")


def run(models: int, sample_size: int, instances: int | None, after: float) -> None:
    env = {} if instances is None else {"SAGEMAKER_TFS_INSTANCE_COUNT": str(instances)}
    label = "default" if instances is None else f"SAGEMAKER_TFS_INSTANCE_COUNT={instances}"
    with models_stack(models, env) as stack:
        empty = model_server_rss(stack)
        started = time.monotonic()
        for index in range(models):
            timed_load(stack, name_of(index))
        loading = time.monotonic() - started
        time.sleep(3)
        loaded = model_server_rss(stack)
        print(f"{models} models, {label}: loaded in {loading:.1f} s")
        print(
            f"  model servers' RSS {empty / MIB:.1f} -> {loaded / MIB:.1f} MB: "
            f"{(loaded - empty) / models / MIB:.2f} MB a model"
        )
        step = max(1, models // sample_size)
        sample = [name_of(index) for index in range(0, models, step)][:sample_size]
        kill_one_server(stack, models, sample, after)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=1000)
    parser.add_argument("--sample", type=int, default=50)
    parser.add_argument("--instances", type=int, nargs="*", default=[])
    parser.add_argument("--after", type=float, default=5.0, help="rounds after all answer")
    args = parser.parse_args()
    for instances in args.instances or [None]:
        run(args.models, args.sample, instances, args.after)


if __name__ == "__main__":
    main()
