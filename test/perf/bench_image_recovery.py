"""Kills in a container of the image: how long each process takes to serve again (issue 55).

One container of the image serves ``half_plus_three`` (test/resources/models). Clients on the
host send small JSON predictions over kept-alive connections all along; every process kind of
the stack is SIGKILLed ``--kills`` times in turn, from the host (rootful podman: the
container's processes are the host's, so the kill and the clock are on the same side). Per
kill, recovery is the time from the kill until a process of that kind with a new pid exists, the
container runs as many processes as before the kill (what the killed one left serving, such as
a dead gunicorn master's worker, is gone: the supervisor counts the successor as ready; a dead
nginx master's workers are not counted, they serve their clients' kept-alive connections
until those close) and a prediction on a new connection answers correctly (with stream
clients, a new stream too); per kind, the requests the clients lost (any answer that is not a
correct 200), and what each was (its status or the client's exception). The next kill waits
for that, so it never hits a successor that is still starting (a failed start, which the
supervisor retries after a backoff).

With ``--stream-clients N`` the model directory also holds the README's stream example
(``examples/inference/stream/code``: ``stream_handler`` only, so ``/invocations`` serves as
without it) and N more clients each hold a WebSocket at ``/invocations-bidirectional-stream``,
one message answered before the next is sent; per kind, the messages answered, the messages
lost (sent and never answered: a cut connection cannot be resumed, the client opens a new
one), the connections that broke, by their close code or the exception, and the opens refused.

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
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import requests
from websockets.exceptions import ConnectionClosed

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration" / "stack"))

from local_ports import free_port  # noqa: E402
from stream_clients import open_stream  # noqa: E402
from whole_stack import cmdline, descendant_pids  # noqa: E402

MODELS = Path(__file__).resolve().parents[1] / "resources" / "models"
STREAM_CODE = Path(__file__).resolve().parents[2] / "examples" / "inference" / "stream" / "code"
BODY = b'{"instances": [1.0, 2.0, 5.0]}'
EXPECTED = [3.5, 4.0, 5.5]  # half_plus_three: x / 2 + 3
NAME = "sagemaker-tfs-recovery-bench"


def model_dir(code: Path | None, scratch: Path) -> Path:
    """The models the container serves: ``half_plus_three``, with ``code`` as its ``code/``."""
    if code is None:
        return MODELS
    shutil.copytree(MODELS, scratch / "model")
    shutil.copytree(code, scratch / "model" / "code")
    return scratch / "model"


def start(image: str, models: Path) -> tuple[int, int]:
    """Starts the container; returns its published port and its init's host pid."""
    port = free_port()
    subprocess.run(["podman", "rm", "-f", NAME], capture_output=True, check=False)
    subprocess.run(
        ["podman", "run", "--detach", "--name", NAME, "--volume", f"{models}:/opt/ml/model:ro",
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
    while not (predicts(port) and started_up()):
        if time.monotonic() > deadline:
            raise SystemExit("the container did not serve within 180 s")
        time.sleep(0.5)
    return port, init


def started_up() -> bool:
    """The supervisor has finished starting the stack. A prediction alone is not enough: the
    supervisor holds the public port, so nginx answers before its start-up wait has seen it
    listen, and an nginx killed then is started again with its workers killed (its start-up's
    handling, not the handover a running stack's nginx gets)."""
    logs = subprocess.run(["podman", "logs", NAME], capture_output=True, text=True, check=False)
    return "serving on port" in logs.stdout + logs.stderr


def predicts(port: int, session: requests.Session | None = None) -> bool:
    """True if one prediction (on ``session``, else a new connection) answers correctly."""
    return outcome_of_prediction(port, session) == "ok"


def outcome_of_prediction(port: int, session: requests.Session | None = None) -> str:
    """``ok`` for a correct answer, else what came: the status and body, or the exception."""
    try:
        sender = session or requests
        response = sender.post(
            f"http://127.0.0.1:{port}/invocations", data=BODY,
            headers={"Content-Type": "application/json"}, timeout=10,
        )  # fmt: skip
    except requests.RequestException as error:
        return f"{type(error).__name__}: {str(error)[-80:]}"
    try:
        if response.status_code == 200 and response.json()["predictions"] == EXPECTED:
            return "ok"
    except (ValueError, KeyError):
        pass
    return f"{response.status_code} {response.text[:80]!r}"


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
        # A worker of the current master: a killed master's worker serves on until the new
        # master's is ready.
        "gunicorn worker": lambda pid: gunicorn in cmdline(pid)
        and not is_gunicorn_master(pid)
        and is_gunicorn_master(parent_of(pid)),
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

    def _note(self, outcome: str) -> None:
        with self.lock:
            self.answers[outcome] += 1

    def _run(self) -> None:
        session = requests.Session()
        while not self.stopping.is_set():
            outcome = outcome_of_prediction(self.port, session)
            if outcome != "ok":
                session.close()
                session = requests.Session()
            self._note(outcome)


def refusal(error: Exception) -> str:
    """Why a stream did not open: the handshake's HTTP status, or the exception."""
    response = getattr(error, "response", None)
    status = getattr(response, "status_code", None)
    return f"HTTP {status}" if status is not None else type(error).__name__


def streams(port: int) -> bool:
    """True if a new stream opens and answers one message correctly."""
    try:
        with open_stream(f"http://127.0.0.1:{port}", keepalive=None) as connection:
            connection.send(StreamClients.MESSAGE)
            return json.loads(connection.recv(timeout=10)) == StreamClients.ANSWER
    except Exception:  # noqa: BLE001 (not serving yet)
        return False


class StreamClients(Clients):
    """Threads each holding a bidirectional stream, one message answered before the next."""

    MESSAGE = '{"instances": [1.0, 2.0, 5.0]}'
    ANSWER = {"predictions": EXPECTED}

    def _run(self) -> None:
        while not self.stopping.is_set():
            try:
                connection = open_stream(f"http://127.0.0.1:{self.port}", keepalive=None)
            except Exception as error:  # noqa: BLE001 (counted, then tried again)
                self._note(f"open failed: {refusal(error)}")
                time.sleep(0.05)
                continue
            with connection:
                self._note(self._exchange(connection))

    def _exchange(self, connection: Any) -> str:
        """Messages back and forth until the connection breaks; how it broke."""
        while not self.stopping.is_set():
            try:
                connection.send(self.MESSAGE)
                answer = json.loads(connection.recv(timeout=10))
            except ConnectionClosed as closed:
                code = closed.rcvd.code if closed.rcvd is not None else "none (cut)"
                return f"lost: closed, close code {code}"
            except Exception as error:  # noqa: BLE001 (the client's view of the break)
                return f"lost: {type(error).__name__}"
            self._note("ok" if answer == self.ANSWER else "lost: wrong answer")
        return "stopped"


def supervised(init: int) -> list[int]:
    """The container's processes but a killed nginx master's workers: those serve the
    connections they hold until those close and the supervisor then tells them to quit, which
    may be after later kills; they are waited for by no one, unlike a gunicorn master's worker."""
    return [
        pid for pid in descendant_pids(init)
        if not (cmdline(pid).startswith("nginx: worker")
                and not cmdline(parent_of(pid)).startswith("nginx: master"))
    ]  # fmt: skip


def recover(
    kind: str, find: Callable[[], int | None], init: int, port: int, stream: bool = False
) -> float:
    """Kills the current process of ``kind``; seconds until it is replaced and it predicts (and,
    with ``stream``, a new bidirectional stream answers)."""
    pid = find()
    if pid is None:
        raise SystemExit(f"no {kind} process in the container")
    processes = len(supervised(init))
    # What the killed one leaves serving (a gunicorn master's worker) must be gone: the count
    # alone can match while the successor has not started its own yet.
    left = set() if kind == "nginx master" else set(descendant_pids(pid))
    killed_at = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    deadline = killed_at + 60
    while time.monotonic() < deadline:
        alive = set(supervised(init))
        replaced = find() not in (None, pid) and len(alive) == processes and not left & alive
        if replaced and predicts(port) and (not stream or streams(port)):
            return time.monotonic() - killed_at
        time.sleep(0.02)
    raise SystemExit(f"{kind}: not back within 60 s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--image", required=True)
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--stream-clients", type=int, default=0)
    parser.add_argument("--logs", type=Path, help="the container's log, written here at the end")
    parser.add_argument(
        "--code", type=Path, help="a code/ folder for the model (default: the stream example's "
        "with --stream-clients, else none), e.g. one whose inference.py serves /invocations",
    )  # fmt: skip
    parser.add_argument(
        "--kinds", default="nginx master,nginx worker,gunicorn master,gunicorn worker,"
        "stream server,model server",
    )  # fmt: skip
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="bench-image-recovery-"))
    code = args.code or (STREAM_CODE if args.stream_clients else None)
    port, init = start(args.image, model_dir(code, scratch))
    try:
        with Clients(port, args.clients) as clients, StreamClients(
            port, args.stream_clients
        ) as streams:
            for kind in args.kinds.split(","):
                find = finder(kind, init)
                clients.take()
                streams.take()
                seconds = []
                for _ in range(args.kills):
                    seconds.append(recover(kind, find, init, port, args.stream_clients > 0))
                    time.sleep(0.5)
                print(json.dumps(row(kind, args, seconds, clients.take(), streams.take())),
                      flush=True)  # fmt: skip
    finally:
        if args.logs is not None:
            with args.logs.open("w") as log:
                subprocess.run(["podman", "logs", NAME], stdout=log, stderr=log, check=False)
        subprocess.run(["podman", "rm", "-f", NAME], capture_output=True, check=False)
        shutil.rmtree(scratch, ignore_errors=True)


def row(
    kind: str, args: argparse.Namespace, seconds: list[float],
    answers: Counter[str], messages: Counter[str],
) -> dict[str, Any]:  # fmt: skip
    """One kind's figures; the stream's only where stream clients ran."""
    figures: dict[str, Any] = {
        "killed": kind, "kills": args.kills, "clients": args.clients,
        "recovery_median_s": round(statistics.median(seconds), 2),
        "recovery_max_s": round(max(seconds), 2),
        "requests": sum(answers.values()), "lost": sum(answers.values()) - answers["ok"],
        "lost_as": {outcome: n for outcome, n in answers.items() if outcome != "ok"},
        "load_average": [round(load, 2) for load in os.getloadavg()],
    }  # fmt: skip
    if args.stream_clients:
        broken = {outcome: n for outcome, n in messages.items() if outcome.startswith("lost")}
        figures.update({
            "stream_clients": args.stream_clients, "stream_messages_answered": messages["ok"],
            "stream_messages_lost": sum(broken.values()), "stream_broken_as": broken,
            "stream_opens_failed": {o: n for o, n in messages.items() if o.startswith("open")},
        })  # fmt: skip
    return figures


if __name__ == "__main__":
    main()
