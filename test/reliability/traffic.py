"""Traffic for the reliability suite: checked predictions on every path, request streams,
kills of the stack's processes, and their memory (all read from /proc)."""

from __future__ import annotations

import io
import json
import os
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import requests
from whole_stack import Stack, cmdline, descendant_pids, wait_for

MODEL_SERVER_MARKER = "--rest_api_port"
# half_plus_three: y = x / 2 + 3
INPUTS = [1.0, 2.0, 5.0]
EXPECTED = [3.5, 4.0, 5.5]


def _npy(values: list[float]) -> bytes:
    stream = io.BytesIO()
    np.save(stream, np.asarray(values, np.float32), allow_pickle=False)
    return stream.getvalue()


@dataclass(frozen=True)
class PredictPath:
    """One way into the stack: how to ask for a prediction and how to read the answer."""

    name: str
    content_type: str
    accept: str
    body: bytes
    attributes: str = ""

    def send(self, session: requests.Session, url: str, timeout: float) -> requests.Response:
        headers = {"Content-Type": self.content_type, "Accept": self.accept}
        if self.attributes:
            headers["X-Amzn-SageMaker-Custom-Attributes"] = self.attributes
        return session.post(f"{url}/invocations", data=self.body, headers=headers, timeout=timeout)

    def correct(self, response: requests.Response) -> bool:
        if response.status_code != 200:
            return False
        if self.accept == "application/x-npy":
            values = np.load(io.BytesIO(response.content), allow_pickle=False)
            return np.allclose(values.reshape(-1), EXPECTED)
        return response.json().get("predictions") == EXPECTED


JSON_BODY = b'{"instances": [1.0, 2.0, 5.0]}'
# Without inference.py: JSON is converted by njs in nginx; NumPy goes to the gRPC fast path.
NJS = PredictPath("njs", "application/json", "application/json", JSON_BODY)
FAST_PATH = PredictPath("fast-path", "application/x-npy", "application/x-npy", _npy(INPUTS))
PLAIN_PATHS = (NJS, FAST_PATH)
# With inference.py: the user's handler posts to context.rest_uri, or calls gRPC.
SCRIPT_REST = PredictPath("script-rest", "application/json", "application/json", JSON_BODY)
SCRIPT_GRPC = PredictPath("script-grpc", "application/json", "application/json", JSON_BODY, "grpc")
SCRIPT_PATHS = (SCRIPT_REST, SCRIPT_GRPC)


def serves(stack: Stack, paths: tuple[PredictPath, ...], session: requests.Session) -> bool:
    """/ping answers 200 and every path gives a correct prediction."""
    try:
        if session.get(f"{stack.url}/ping", timeout=1).status_code != 200:
            return False
        return all(path.correct(path.send(session, stack.url, 5)) for path in paths)
    except (requests.RequestException, ValueError):
        return False


def wait_until_serving(
    stack: Stack, paths: tuple[PredictPath, ...], timeout: float
) -> float | None:
    """Seconds until ``serves`` holds, polling every 10 ms; None after ``timeout``."""
    start = time.monotonic()
    with requests.Session() as session:
        while time.monotonic() - start < timeout:
            if serves(stack, paths, session):
                return time.monotonic() - start
            time.sleep(0.01)
    return None


def every_model_server_available(stack: Stack) -> bool:
    """Each model server of the stack reports half_plus_three AVAILABLE on its REST port."""
    config = json.loads((stack.work_dir / "stack.json").read_text())
    for instance in config["instances"]:
        url = f"http://127.0.0.1:{instance['rest_port']}/v1/models/half_plus_three"
        try:
            status = requests.get(url, timeout=2).json()
        except (requests.RequestException, ValueError):
            return False
        states = [v.get("state") for v in status.get("model_version_status", [])]
        if "AVAILABLE" not in states:
            return False
    return True


# --- the processes ----------------------------------------------------------------------------


def model_server_pids(stack: Stack) -> list[int]:
    return sorted(stack.child_pids(MODEL_SERVER_MARKER))


def gunicorn_master_pid(stack: Stack) -> int:
    (pid,) = stack.child_pids("gunicorn")
    return pid


def gunicorn_worker_pids(stack: Stack) -> list[int]:
    master = gunicorn_master_pid(stack)
    return [pid for pid in descendant_pids(master) if "gunicorn" in cmdline(pid)]


def nginx_master_pid(stack: Stack) -> int:
    (pid,) = stack.child_pids("nginx")
    return pid


KINDS: dict[str, Callable[[Stack], int]] = {
    "nginx master": nginx_master_pid,
    "gunicorn master": gunicorn_master_pid,
    "gunicorn worker": lambda stack: gunicorn_worker_pids(stack)[0],
    "model server": lambda stack: model_server_pids(stack)[0],
}


def kill(pid: int) -> float:
    """SIGKILL ``pid``; returns the wall-clock time of the kill."""
    at = time.time()
    os.kill(pid, signal.SIGKILL)
    return at


def rss_kib(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def stack_processes(stack: Stack) -> dict[str, int]:
    """Every process of the stack by a readable name (supervisor, nginx master, ...)."""
    named = {"supervisor": stack.process.pid}
    for index, pid in enumerate(model_server_pids(stack)):
        named[f"model server {index}"] = pid
    named["gunicorn master"] = gunicorn_master_pid(stack)
    for index, pid in enumerate(gunicorn_worker_pids(stack)):
        named[f"gunicorn worker {index}"] = pid
    nginx = nginx_master_pid(stack)
    named["nginx master"] = nginx
    for index, pid in enumerate(p for p in descendant_pids(nginx) if "nginx" in cmdline(p)):
        named[f"nginx worker {index}"] = pid
    return named


# --- request streams ------------------------------------------------------------------------


@dataclass
class StreamResult:
    requests: int = 0
    statuses: Counter[str] = field(default_factory=Counter)
    lost_on: Counter[str] = field(default_factory=Counter)  # requests lost, by path
    wrong: int = 0
    refused: int = 0  # connections refused: nothing listened on the port
    failures: list[str] = field(default_factory=list)

    @property
    def lost(self) -> int:
        """Requests not answered with a correct 200 (errors, other statuses, wrong answers)."""
        return self.requests - self.statuses["200"] + self.wrong


class RequestStream:
    """``clients`` threads sending predictions over ``paths`` in turn until stopped."""

    def __init__(self, stack: Stack, paths: tuple[PredictPath, ...], clients: int) -> None:
        self._stack = stack
        self._paths = paths
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.result = StreamResult()
        self._threads = [
            threading.Thread(target=self._run, args=(index,), daemon=True)
            for index in range(clients)
        ]

    def __enter__(self) -> RequestStream:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> StreamResult:
        self._stop.set()
        for thread in self._threads:
            thread.join(120)
        return self.result

    def _run(self, index: int) -> None:
        turn = index
        with requests.Session() as session:
            while not self._stop.is_set():
                path = self._paths[turn % len(self._paths)]
                turn += 1
                self._record(path, session)

    def _record(self, path: PredictPath, session: requests.Session) -> None:
        try:
            response = path.send(session, self._stack.url, 60)
            status = str(response.status_code)
            wrong = status == "200" and not path.correct(response)
            detail = f"{path.name}: {status} {response.text[:200]!r}"
        except requests.RequestException as error:
            status, wrong, detail = type(error).__name__, False, f"{path.name}: {error}"
        with self._lock:
            self.result.requests += 1
            self.result.refused += "Connection refused" in detail
            self.result.statuses[status] += 1
            self.result.wrong += wrong
            if status != "200" or wrong:
                self.result.lost_on[path.name] += 1
                if len(self.result.failures) < 20:
                    self.result.failures.append(detail)


# --- kills under a stream ---------------------------------------------------------------------


@dataclass
class KillRun:
    """What ``kills`` kills of one kind of process cost a stream of requests."""

    kind: str
    clients: int
    result: StreamResult
    recoveries: list[float] = field(default_factory=list)  # kill -> replaced and serving

    def summary(self) -> str:
        result, worst = self.result, max(self.recoveries, default=0.0)
        return (
            f"{self.kind}: {len(self.recoveries)} kills under {self.clients} clients: "
            f"{result.requests} requests, lost {result.lost} {dict(result.lost_on)}, "
            f"refused {result.refused}, recovery max {worst:.2f} s"
        )


def kills_under_a_stream(
    stack: Stack,
    kind: str,
    kills: int,
    clients: int = 8,
    paths: tuple[PredictPath, ...] = PLAIN_PATHS,
    before_each: Callable[[], None] | None = None,
) -> KillRun:
    """SIGKILL the process ``KINDS[kind]`` finds, ``kills`` times, while ``clients`` threads
    send predictions over ``paths`` on kept-alive connections (no retries); each kill waits
    until the stack serves, then 0.5 s. Recovery: from the kill until the process is replaced
    and every path answers correctly again."""
    find = KINDS[kind]
    recoveries = []
    with RequestStream(stack, paths, clients) as stream:
        for _ in range(kills):
            time.sleep(0.5)
            if before_each is not None:
                before_each()
            pid = find(stack)
            kill(pid)
            started = time.monotonic()
            assert wait_for(lambda p=pid: _replaced(find, stack, p), 60, interval=0.005), kind
            assert wait_until_serving(stack, paths, 120) is not None, stack.log_tail()
            recoveries.append(time.monotonic() - started)
        time.sleep(0.5)
    return KillRun(kind, clients, stream.result, recoveries)


def _replaced(find: Callable[[Stack], int], stack: Stack, pid: int) -> bool:
    try:
        return find(stack) != pid
    except (ValueError, IndexError):  # none running right now
        return False


# --- /ping ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PingSample:
    at: float  # time.monotonic() when it was sent
    status: int | None  # None: no answer (the error's name is in ``detail``)
    detail: str


class PingSampler:
    """Asks ``/ping`` every ``interval`` seconds from a thread of its own until stopped."""

    def __init__(self, stack: Stack, interval: float = 0.05) -> None:
        self._url = f"{stack.url}/ping"
        self._interval = interval
        self._stop = threading.Event()
        self.samples: list[PingSample] = []
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> PingSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)

    def statuses(self) -> Counter[int | None]:
        return Counter(sample.status for sample in self.samples)

    def not_200(self) -> list[PingSample]:
        return [sample for sample in self.samples if sample.status != 200]

    def _run(self) -> None:
        with requests.Session() as session:
            while not self._stop.is_set():
                at = time.monotonic()
                try:
                    response = session.get(self._url, timeout=2)
                    sample = PingSample(at, response.status_code, response.text[:200])
                except requests.RequestException as error:
                    sample = PingSample(at, None, type(error).__name__)
                self.samples.append(sample)
                self._stop.wait(self._interval)
