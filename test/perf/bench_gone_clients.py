"""What clients that give up while the model server refuses cost the Python service, between
versions of the code (issue 55): the service's resends to the model server, its CPU, /ping,
and whether the clients that wait are all answered once the model server is back.

Per round and variant (in a new order each round): the real nginx and gunicorn as the
supervisor starts them (gunicorn importing ``sagemaker_tfs`` from the variant's directory),
in front of a stand-in model server (``nginx_in_front.RestartingModelServer``), which refuses
every call (REST 503, gRPC UNAVAILABLE) for ``--window`` seconds. Meanwhile ``--rate`` small
JSON predictions a second arrive (njs tries the model server twice, then hands each to the
service, which resends it over gRPC); all but one in ``--stay-every`` close their connection
after ``--patience`` seconds; a /ping every 0.1 s. Then the model server is back (the service's
JSON goes over REST to it). Per variant, medians of the rounds: the model-server calls
during the window, the gunicorn worker's CPU seconds from the first request to the last
answer, /ping's slowest, the waiting clients answered 200 and the slowest of them after
the model server was back.

Usage::

    git archive HEAD container | tar -x -C /tmp/base
    .venv/bin/python test/perf/bench_gone_clients.py --variant before=/tmp/base/container \\
        --variant after=container --rounds 3
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import os
import random
import socket
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import requests

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # local_ports
sys.path.insert(0, str(HERE.parent / "integration" / "stack"))

from local_ports import free_port  # noqa: E402
from nginx_in_front import (  # noqa: E402
    RestartingModelServer,
    send_invocation,
    start_gunicorn,
    start_nginx,
    stop_gunicorn,
    stop_nginx,
)
from sagemaker_tfs.config import load_config  # noqa: E402
from sagemaker_tfs.ports import Instance  # noqa: E402
from sagemaker_tfs.service.routing.connections import Channels  # noqa: E402

EXAMPLE_MODELS = HERE.parent / "resources" / "models"
BODY = b'{"instances": [1.0, 2.0, 5.0]}'
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@dataclasses.dataclass
class Outcome:
    calls_in_window: int
    worker_cpu_seconds: float
    slowest_ping: float
    waiting: int
    answered: int
    slowest_after_back: float


def worker_cpu_seconds(master: int) -> float:
    total = 0
    for pid in Path(f"/proc/{master}/task/{master}/children").read_text().split():
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / CLOCK_TICKS


def ping_while(port: int, running: threading.Event, times: list[float]) -> None:
    while running.is_set():
        started = time.monotonic()
        with contextlib.suppress(requests.RequestException):
            requests.get(f"http://127.0.0.1:{port}/ping", timeout=10)
        times.append(time.monotonic() - started)
        time.sleep(0.1)


def wait_for_answer(port: int) -> tuple[int, float]:
    """The status and the time the answer came (monotonic)."""
    url, headers = f"http://127.0.0.1:{port}/invocations", {"Content-Type": "application/json"}
    try:
        status = requests.post(url, data=BODY, timeout=60, headers=headers).status_code
    except requests.RequestException:
        status = 0
    return status, time.monotonic()


def offer_load(port: int, args: argparse.Namespace, pool: ThreadPoolExecutor
               ) -> list[Future[tuple[int, float]]]:  # fmt: skip
    """``--rate`` predictions a second for ``--window`` seconds; the gone ones closed after
    ``--patience``; the futures of those that wait."""
    waiting: list[Future[tuple[int, float]]] = []
    open_ones: collections.deque[tuple[float, socket.socket]] = collections.deque()
    start = time.monotonic()
    for number in range(int(args.rate * args.window)):
        due = start + number / args.rate
        while open_ones and open_ones[0][0] + args.patience <= time.monotonic():
            open_ones.popleft()[1].close()
        time.sleep(max(0.0, due - time.monotonic()))
        if number % args.stay_every == 0:
            waiting.append(pool.submit(wait_for_answer, port))
        else:
            open_ones.append((time.monotonic(), send_invocation(port, BODY)))
    while open_ones:
        sent, connection = open_ones.popleft()
        time.sleep(max(0.0, sent + args.patience - time.monotonic()))
        connection.close()
    return waiting


def run_once(directory: str, args: argparse.Namespace, root: Path) -> Outcome:
    model_dir = root / "model"
    model_dir.mkdir()
    (model_dir / "half_plus_three").symlink_to(EXAMPLE_MODELS / "half_plus_three")
    config = load_config({}, model_dir=str(model_dir), work_dir=str(root / "w"),
                         port=free_port())  # fmt: skip
    grpc_port = free_port()
    Path(config.work.root).mkdir(parents=True)
    model_server = RestartingModelServer(Channels(config.work.grpc_socket_path).target(grpc_port))
    config = dataclasses.replace(config, instances=(Instance(grpc_port, model_server.rest_port),))
    os.environ["PYTHONPATH"] = directory
    gunicorn = start_gunicorn(config)
    nginx = start_nginx(config)
    running, pings = threading.Event(), []
    running.set()
    pinger = threading.Thread(target=ping_while, args=(config.port, running, pings))
    try:
        cpu_before = worker_cpu_seconds(gunicorn.pid)
        pinger.start()
        with ThreadPoolExecutor(int(args.rate * args.window / args.stay_every) + 1) as pool:
            waiting = offer_load(config.port, args, pool)
            calls = model_server.grpc_calls
            back = time.monotonic()
            model_server.back = True
            answers = [future.result() for future in waiting]
        cpu = worker_cpu_seconds(gunicorn.pid) - cpu_before
    finally:
        running.clear()
        pinger.join()
        stop_nginx(nginx)
        stop_gunicorn(gunicorn)
        model_server.close()
    answered = [at for status, at in answers if status == 200]
    slowest = max((at - back for at in answered), default=float("nan"))
    return Outcome(calls, cpu, max(pings), len(answers), len(answered), slowest)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variant", action="append", required=True, metavar="LABEL=DIR")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rate", type=float, default=80.0, help="predictions a second")
    parser.add_argument("--window", type=float, default=4.0, help="seconds refused")
    parser.add_argument("--patience", type=float, default=0.5, help="seconds before giving up")
    parser.add_argument("--stay-every", type=int, default=20, help="1 in N waits")
    args = parser.parse_args()
    variants = dict(spec.split("=", 1) for spec in args.variant)
    results: dict[str, list[Outcome]] = {label: [] for label in variants}
    for _ in range(args.rounds):
        for label in random.sample(list(variants), len(variants)):
            with tempfile.TemporaryDirectory(prefix="bench-gone-") as root:
                outcome = run_once(str(Path(variants[label]).resolve()), args, Path(root))
            results[label].append(outcome)
            print(label, outcome, flush=True)
    print(f"\n{args.rate:g}/s for {args.window:g} s refused, 1 in {args.stay_every} waits, the "
          f"others give up after {args.patience:g} s; medians of {args.rounds} rounds")  # fmt: skip
    print("variant | model-server calls in the window | worker CPU s | slowest /ping s | "
          "waiting answered | slowest after back s")  # fmt: skip
    for label, outcomes in results.items():

        def median(field: str, of: list[Outcome] = outcomes) -> float:
            return statistics.median(getattr(outcome, field) for outcome in of)

        answered = f"{median('answered'):g} of {median('waiting'):g}"
        print(f"{label} | {median('calls_in_window'):g} | {median('worker_cpu_seconds'):.2f} | "
              f"{median('slowest_ping'):.3f} | {answered} | "
              f"{median('slowest_after_back'):.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
