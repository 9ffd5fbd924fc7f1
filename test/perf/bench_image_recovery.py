"""Kills in a container of the image: how long each process takes to serve again (issue 55).

One container of the image serves ``half_plus_three`` (test/resources/models). Clients on the
host send small JSON predictions over kept-alive connections all along; every process kind of
the stack is SIGKILLed ``--kills`` times in turn, from the host (rootful podman: the
container's processes are the host's, so the kill and the clock are on the same side). Per
kill, recovery is the time from the kill until a process of that kind with a new pid exists, the
container runs as many processes as before the kill (what the killed one left serving, such as
a dead gunicorn master's worker, is gone: the supervisor counts the successor as ready; a dead
nginx master's workers are not counted, they serve their clients' kept-alive connections
until those close) and a prediction on a new connection answers correctly; per kind, the
requests the clients lost (any answer that is not a correct 200). The next kill waits for
that, so it never hits a successor that is still starting (a failed start, which the
supervisor retries after a backoff).

In the image, the model server is ``tensorflow_model_server``; here that is the test stand-in
(``test/image/stand_in``, the project's Python model server), so its figure is the stand-in's
cold start (a TensorFlow import and the model's load): the supervisor keeps no standby for a
binary it takes for TF Serving's own.

Usage (podman with the image suite's settings and a built image, e.g. the image suite's)::

    CONTAINERS_CONF=test/image/containers.conf .venv/bin/python test/perf/bench_image_recovery.py \\
        --image localhost/sagemaker-tfs-under-test:2.21.0-cpu --kills 10 --clients 4
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration" / "stack"))

from local_ports import free_port  # noqa: E402
from whole_stack import cmdline, descendant_pids  # noqa: E402

MODELS = Path(__file__).resolve().parents[1] / "resources" / "models"
BODY = b'{"instances": [1.0, 2.0, 5.0]}'
EXPECTED = [3.5, 4.0, 5.5]  # half_plus_three: x / 2 + 3
NAME = "sagemaker-tfs-recovery-bench"


def start(image: str) -> tuple[int, int]:
    """Starts the container; returns its published port and its init's host pid."""
    port = free_port()
    subprocess.run(["podman", "rm", "-f", NAME], capture_output=True, check=False)
    subprocess.run(
        ["podman", "run", "--detach", "--name", NAME, "--volume", f"{MODELS}:/opt/ml/model:ro",
         "--publish", f"{port}:8080", image, "serve"],
        check=True, capture_output=True,
    )  # fmt: skip
    init = int(
        subprocess.run(
            ["podman", "inspect", "--format", "{{.State.Pid}}", NAME],
            check=True, capture_output=True, text=True,
        ).stdout
    )  # fmt: skip
    deadline = time.monotonic() + 180
    while not predicts(port):
        if time.monotonic() > deadline:
            raise SystemExit("the container did not serve within 180 s")
        time.sleep(0.5)
    return port, init


def predicts(port: int, session: requests.Session | None = None) -> bool:
    """True if one prediction (on ``session``, else a new connection) answers correctly."""
    try:
        sender = session or requests
        response = sender.post(
            f"http://127.0.0.1:{port}/invocations", data=BODY,
            headers={"Content-Type": "application/json"}, timeout=10,
        )  # fmt: skip
        return response.status_code == 200 and response.json()["predictions"] == EXPECTED
    except (requests.RequestException, ValueError, KeyError):
        return False


def first(init: int, test: Callable[[int], bool]) -> int | None:
    return next((pid for pid in descendant_pids(init) if test(pid)), None)


def parent_of(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            return int(stat.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def finder(kind: str, init: int) -> Callable[[], int | None]:
    """How to find the current process of ``kind`` among the container's."""
    gunicorn = "-m gunicorn "

    def is_gunicorn_master(pid: int) -> bool:
        return gunicorn in cmdline(pid) and any(
            gunicorn in cmdline(below) for below in descendant_pids(pid)
        )

    tests: dict[str, Callable[[int], bool]] = {
        "nginx master": lambda pid: cmdline(pid).startswith("nginx: master"),
        # A worker of the current master: a killed master's workers serve on (unreplaced)
        # until their clients' connections close.
        "nginx worker": lambda pid: cmdline(pid).startswith("nginx: worker")
        and cmdline(parent_of(pid)).startswith("nginx: master"),
        "gunicorn master": is_gunicorn_master,
        "gunicorn worker": lambda pid: gunicorn in cmdline(pid) and not is_gunicorn_master(pid),
        "stream server": lambda pid: "sagemaker_tfs.service.stream.stream_server" in cmdline(pid),
        "model server": lambda pid: " model-server " in cmdline(pid),
    }
    return lambda: first(init, tests[kind])


class Clients:
    """Threads sending predictions back to back on kept-alive connections, counting answers."""

    def __init__(self, port: int, count: int) -> None:
        self.port = port
        self.answers: Counter[str] = Counter()
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self._run, daemon=True) for _ in range(count)]

    def __enter__(self) -> Clients:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        for thread in self.threads:
            thread.join(timeout=15)

    def take(self) -> Counter[str]:
        with self.lock:
            taken, self.answers = self.answers, Counter()
        return taken

    def _run(self) -> None:
        session = requests.Session()
        while not self.stopping.is_set():
            outcome = "ok" if predicts(self.port, session) else "lost"
            if outcome == "lost":
                session.close()
                session = requests.Session()
            with self.lock:
                self.answers[outcome] += 1


def recover(kind: str, find: Callable[[], int | None], init: int, port: int) -> float:
    """Kills the current process of ``kind``; seconds until it is replaced and it predicts."""
    pid = find()
    if pid is None:
        raise SystemExit(f"no {kind} process in the container")
    # A killed nginx master's workers serve the connections they hold until those close (up to
    # 65 s, docs/reliability.md): they are not waited for, unlike a gunicorn master's worker.
    serving_on = set(descendant_pids(pid)) if kind == "nginx master" else set()
    processes = len(descendant_pids(init)) - len(serving_on)
    killed_at = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    deadline = killed_at + 60
    while time.monotonic() < deadline:
        count = len(set(descendant_pids(init)) - serving_on)
        replaced = find() not in (None, pid) and count == processes
        if replaced and predicts(port):
            return time.monotonic() - killed_at
        time.sleep(0.02)
    raise SystemExit(f"{kind}: not back within 60 s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--image", required=True)
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument(
        "--kinds", default="nginx master,nginx worker,gunicorn master,gunicorn worker,"
        "stream server,model server",
    )  # fmt: skip
    args = parser.parse_args()
    port, init = start(args.image)
    try:
        with Clients(port, args.clients) as clients:
            for kind in args.kinds.split(","):
                find = finder(kind, init)
                clients.take()
                seconds = []
                for _ in range(args.kills):
                    seconds.append(recover(kind, find, init, port))
                    time.sleep(0.5)
                answers = clients.take()
                print(json.dumps({
                    "killed": kind, "kills": args.kills, "clients": args.clients,
                    "recovery_median_s": round(statistics.median(seconds), 2),
                    "recovery_max_s": round(max(seconds), 2),
                    "requests": sum(answers.values()), "lost": answers["lost"],
                }), flush=True)  # fmt: skip
    finally:
        subprocess.run(["podman", "rm", "-f", NAME], capture_output=True, check=False)


if __name__ == "__main__":
    main()
