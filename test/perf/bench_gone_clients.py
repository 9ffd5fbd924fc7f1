"""What clients that give up while the model server refuses, or is slow, cost the Python
service and the model server, between versions of the code (issue 55): the service's resends
or the calls it leaves running, its CPU, /ping, and how the clients that wait are answered.

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

With ``--model-server slow``, the stand-in (``slow_model_server.SlowModelServer``) takes every
call and works ``--work`` seconds on each, ``--capacity`` at a time, the others waiting their
turn (a call its caller cancelled meanwhile is dropped at its turn; work begun runs to its end);
the predictions are small ``.npy`` bodies (the service's fast path: one gRPC Predict each).
Per variant: the Predicts the model server took and worked on from the first request to the
last waiting client's answer (those for gone clients: all but the waiting ones'), the
worker's CPU, and the waiting clients' answers: how many 200, the median and slowest from
their request.

With ``--model-server python``, the real Python model server of the variant's code serves
the ``sleeper`` test model (``SAGEMAKER_TFS_TEST_MODELS``) with batching on: one batch thread,
``--capacity`` tasks a batch, each batch sleeping ``--work`` seconds (the ``.npy`` body's
value). Per variant: the batches run and the tasks in them (from the scheduler's DEBUG line)
until the last waiting client's answer, and the waiting clients' answers as with ``slow``.

Usage::

    git archive HEAD container | tar -x -C /tmp/base
    .venv/bin/python test/perf/bench_gone_clients.py --variant before=/tmp/base/container \\
        --variant after=container --rounds 3 [--model-server slow|python]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import io
import os
import random
import re
import socket
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import numpy as np
import requests

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # local_ports
sys.path.insert(0, str(HERE.parent / "integration" / "stack"))
sys.path.insert(0, str(HERE.parent / "integration" / "model_server"))

from local_ports import free_port  # noqa: E402
from model_server_process import launch_model_server, stop_server, wait_until_ready  # noqa: E402
from nginx_in_front import (  # noqa: E402
    RestartingModelServer,
    start_gunicorn,
    start_nginx,
    stop_gunicorn,
    stop_nginx,
)
from sagemaker_tfs.config import load_config  # noqa: E402
from sagemaker_tfs.ports import Instance  # noqa: E402
from sagemaker_tfs.service.routing.connections import Channels  # noqa: E402
from slow_model_server import SlowModelServer  # noqa: E402

EXAMPLE_MODELS = HERE.parent / "resources" / "models"
JSON_BODY = b'{"instances": [1.0, 2.0, 5.0]}'


def _npy_body() -> bytes:
    out = io.BytesIO()
    np.save(out, np.array([1.0, 2.0, 5.0], np.float32))
    return out.getvalue()


BODIES = {"refusing": (JSON_BODY, "application/json"), "slow": (_npy_body(), "application/x-npy")}
BODIES["python"] = BODIES["slow"]  # its value replaced by --work (``body_of``)
BATCH_LINE = re.compile(r"Ran batch: tasks=(\d+)")
TEST_MODELS = Path(os.environ.get("SAGEMAKER_TFS_TEST_MODELS") or HERE.parent / ".models-cache")


def body_of(args: argparse.Namespace) -> tuple[bytes, str]:
    if args.model_server != "python":
        return BODIES[args.model_server]
    out = io.BytesIO()
    np.save(out, np.array([args.work], np.float32))
    return out.getvalue(), "application/x-npy"


class PythonModelServer:
    """The Python model server of ``directory``'s code serving ``sleeper`` with batching."""

    def __init__(self, directory: str, target: str, grpc_port: int, root: Path,
                 capacity: int) -> None:  # fmt: skip
        parameters = root / "batching.config"
        parameters.write_text(
            f"max_batch_size {{ value: {capacity} }} batch_timeout_micros {{ value: 1000 }} "
            "max_enqueued_batches { value: 100000 } num_batch_threads { value: 1 }"
        )
        args = ("--model_name=sleeper", f"--model_base_path={TEST_MODELS / 'sleeper'}",
                f"--port={grpc_port}", "--enable_batching",
                f"--batching_parameters_file={parameters}")  # fmt: skip
        if target.startswith("unix:"):
            args += (f"--grpc_socket_path={target[len('unix:'):]}",)
        env = {"PYTHONPATH": directory, "SAGEMAKER_TFS_LOG_LEVEL": "DEBUG"}
        self.handle = launch_model_server(args, root / "model_server.log", env)
        wait_until_ready(self.handle, timeout=120)

    @property
    def rest_port(self) -> int:
        return self.handle.rest_port

    def batches(self) -> list[int]:
        """The tasks of each batch run so far."""
        return [int(match.group(1)) for match in BATCH_LINE.finditer(self.handle.log)]

    def close(self) -> None:
        stop_server(self.handle)


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@dataclasses.dataclass
class Outcome:
    calls_in_window: int
    worker_cpu_seconds: float
    slowest_ping: float
    waiting: int
    answered: int
    slowest_after_back: float  # slow: the slowest from its request
    worked: int = 0  # slow: the Predicts worked on (those for gone clients: less ``answered``)
    median_wait: float = float("nan")  # slow: the waiting clients' median from their request


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


def send_invocation(port: int, body: bytes, content_type: str) -> socket.socket:
    """An invocation sent on a raw connection, its answer not read."""
    connection = socket.create_connection(("127.0.0.1", port))
    head = f"POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Type: {content_type}\r\n"
    connection.sendall(f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body)
    return connection


def wait_for_answer(port: int, body: bytes, content_type: str) -> tuple[int, float, float]:
    """The status, the time the request was sent and the time its answer came (monotonic)."""
    url, headers = f"http://127.0.0.1:{port}/invocations", {"Content-Type": content_type}
    sent = time.monotonic()
    try:
        status = requests.post(url, data=body, timeout=60, headers=headers).status_code
    except requests.RequestException:
        status = 0
    return status, sent, time.monotonic()


def offer_load(port: int, args: argparse.Namespace, pool: ThreadPoolExecutor
               ) -> list[Future[tuple[int, float, float]]]:  # fmt: skip
    """``--rate`` predictions a second for ``--window`` seconds; the gone ones closed after
    ``--patience``; the futures of those that wait."""
    body, content_type = body_of(args)
    waiting: list[Future[tuple[int, float, float]]] = []
    open_ones: collections.deque[tuple[float, socket.socket]] = collections.deque()
    start = time.monotonic()
    for number in range(int(args.rate * args.window)):
        due = start + number / args.rate
        while open_ones and open_ones[0][0] + args.patience <= time.monotonic():
            open_ones.popleft()[1].close()
        time.sleep(max(0.0, due - time.monotonic()))
        if number % args.stay_every == 0:
            waiting.append(pool.submit(wait_for_answer, port, body, content_type))
        else:
            open_ones.append((time.monotonic(), send_invocation(port, body, content_type)))
    while open_ones:
        sent, connection = open_ones.popleft()
        time.sleep(max(0.0, sent + args.patience - time.monotonic()))
        connection.close()
    return waiting


def run_once(directory: str, args: argparse.Namespace, root: Path) -> Outcome:
    model_dir = root / "model"
    model_dir.mkdir()
    if args.model_server == "python":
        (model_dir / "sleeper").symlink_to(TEST_MODELS / "sleeper")
    else:
        (model_dir / "half_plus_three").symlink_to(EXAMPLE_MODELS / "half_plus_three")
    config = load_config({}, model_dir=str(model_dir), work_dir=str(root / "w"),
                         port=free_port())  # fmt: skip
    grpc_port = free_port()
    Path(config.work.root).mkdir(parents=True)
    target = Channels(config.work.grpc_socket_path).target(grpc_port)
    model_server: RestartingModelServer | SlowModelServer | PythonModelServer
    if args.model_server == "python":
        model_server = PythonModelServer(directory, target, grpc_port, root, args.capacity)
    elif args.model_server == "slow":
        model_server = SlowModelServer(target, args.work, args.capacity)
    else:
        model_server = RestartingModelServer(target)
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
            back = time.monotonic()
            if isinstance(model_server, RestartingModelServer):
                calls = model_server.grpc_calls
                model_server.back = True
            answers = [future.result() for future in waiting]
        cpu = worker_cpu_seconds(gunicorn.pid) - cpu_before
        if isinstance(model_server, SlowModelServer):
            return slow_outcome(model_server, cpu, max(pings), answers)
        if isinstance(model_server, PythonModelServer):
            return python_outcome(model_server.batches(), cpu, max(pings), answers)
    finally:
        running.clear()
        pinger.join()
        stop_nginx(nginx)
        stop_gunicorn(gunicorn)
        model_server.close()
    answered = [at for status, _, at in answers if status == 200]
    slowest = max((at - back for at in answered), default=float("nan"))
    return Outcome(calls, cpu, max(pings), len(answers), len(answered), slowest)


def slow_outcome(model_server: SlowModelServer, cpu: float, slowest_ping: float,
                 answers: list[tuple[int, float, float]]) -> Outcome:  # fmt: skip
    """What a slow model server was asked and worked on until the last waiting answer."""
    return waited_outcome(model_server.calls, model_server.worked, cpu, slowest_ping, answers)


def python_outcome(batches: list[int], cpu: float, slowest_ping: float,
                   answers: list[tuple[int, float, float]]) -> Outcome:  # fmt: skip
    """The batches (``calls_in_window``) and tasks (``worked``) the model server ran."""
    return waited_outcome(len(batches), sum(batches), cpu, slowest_ping, answers)


def waited_outcome(calls: int, worked: int, cpu: float, slowest_ping: float,
                   answers: list[tuple[int, float, float]]) -> Outcome:  # fmt: skip
    waits = [at - sent for status, sent, at in answers if status == 200]
    slowest, median = (max(waits), statistics.median(waits)) if waits else (float("nan"),) * 2
    return Outcome(calls, cpu, slowest_ping, len(answers), len(waits), slowest, worked,
                   median)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variant", action="append", required=True, metavar="LABEL=DIR")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rate", type=float, default=80.0, help="predictions a second")
    parser.add_argument("--window", type=float, default=4.0, help="seconds refused")
    parser.add_argument("--patience", type=float, default=0.5, help="seconds before giving up")
    parser.add_argument("--stay-every", type=int, default=20, help="1 in N waits")
    parser.add_argument("--model-server", choices=BODIES, default="refusing")
    parser.add_argument("--work", type=float, default=0.15, help="slow: seconds a Predict")
    parser.add_argument("--capacity", type=int, default=4, help="slow: Predicts at a time")
    args = parser.parse_args()
    variants = dict(spec.split("=", 1) for spec in args.variant)
    results: dict[str, list[Outcome]] = {label: [] for label in variants}
    for _ in range(args.rounds):
        for label in random.sample(list(variants), len(variants)):
            with tempfile.TemporaryDirectory(prefix="bench-gone-") as root:
                outcome = run_once(str(Path(variants[label]).resolve()), args, Path(root))
            results[label].append(outcome)
            print(label, outcome, flush=True)
    print_medians(args, results)


def print_medians(args: argparse.Namespace, results: dict[str, list[Outcome]]) -> None:
    slow = args.model_server in ("slow", "python")
    how = f"{args.work:g} s a Predict, {args.capacity} at a time" if slow else "refused"
    if args.model_server == "python":
        how = f"Python model server, {args.work:g} s a batch of up to {args.capacity}"
    print(f"\n{args.rate:g}/s for {args.window:g} s, {how}; 1 in {args.stay_every} waits, the "
          f"others give up after {args.patience:g} s; medians of {args.rounds} rounds")  # fmt: skip
    if args.model_server == "python":
        print(
            "variant | batches run | tasks run | of them for gone clients | "
            "worker CPU s | slowest /ping s | waiting answered 200 | median s | slowest s"
        )
    elif slow:
        print(
            "variant | Predicts begun | worked to the end | of them for gone clients | "
            "worker CPU s | slowest /ping s | waiting answered 200 | median s | slowest s"
        )
    else:
        print("variant | model-server calls in the window | worker CPU s | slowest /ping s | "
              "waiting answered | slowest after back s")  # fmt: skip
    for label, outcomes in results.items():

        def median(field: str, of: list[Outcome] = outcomes) -> float:
            return statistics.median(getattr(outcome, field) for outcome in of)

        answered = f"{median('answered'):g} of {median('waiting'):g}"
        calls = f"{median('calls_in_window'):g}"
        if slow:
            gone = statistics.median(o.worked - o.answered for o in outcomes)
            calls += f" | {median('worked'):g} | {gone:g}"
        print(f"{label} | {calls} | {median('worker_cpu_seconds'):.2f} | "
              f"{median('slowest_ping'):.3f} | {answered} | "
              + (f"{median('median_wait'):.2f} | " if slow else "")
              + f"{median('slowest_after_back'):.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
