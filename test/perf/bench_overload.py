"""Offered load from half to three times the stack's capacity (issue 36): is overload shed
instead of queued past the timeout, and does /ping stay fast meanwhile?

Starts ``sagemaker-tfs serve`` on this machine for each scenario (default settings unless
``--env`` says otherwise) and measures:

- ``small_json``: ``half_plus_three``, 3 values as JSON (njs -> the model server's REST API);
- ``heavy``: ``compute_heavy`` (test/models/make_test_models.py, ~0.3 s a call), 64-row JSON;
- ``json_2mb``: ``half_plus_three``, 2 MB JSON bodies (over the njs limit: the Python
  service converts them);
- ``io_handler``: an ``inference.py`` whose handler waits 50 ms (I/O) and calls the model;
- ``cpu_handler``: an ``inference.py`` whose handler computes ~20 ms in Python and calls it.

Capacity: the answered (200) requests per second of a closed loop of 32 connections
(8 for ``heavy``) that sends for ``--capacity-seconds``, counted as a step's throughput is: up
to the last answer. Then, for each factor of ``--factors`` (0.5 to 3), an open loop offers
factor x capacity requests per second for ``--seconds``: each request leaves at its time on
the fixed schedule, whatever the answers before it (client processes of
``http_load.LoadClient``, a connection per request in flight, kept alive). Per step:
throughput (200s per second from the step's start to its last 200), p50/p99 of the 200s, the
share shed (503 "overloaded"), the requests cut (504, or no answer within the invocation
timeout + 10 s), connections that failed, requests the client could not send (over 1,024 of
its own waiting), answers that are not JSON, /ping's p99 and misses (a probe every 0.25 s; a
miss: over 2 s or not 200), the peak RSS of the stack's processes and the CPU they used
(in cores: a container's cgroup, or the host stack's processes). Goals at the highest
factor, printed pass/fail: throughput >= 95% of capacity, p99 of the answered within the
invocation timeout, nothing cut, every answer JSON, and at every step no /ping miss and a
/ping p99 within 100 ms (500 ms with ``--image``).
The closed loop runs again after the steps, since the speed of a shared machine drifts: the
capacity the goal uses is the mean of the two, and both are printed.

The client runs on the same cores as the stack, unless ``--stack-cpus`` and ``--client-cpus``
give each its own (e.g. ``--stack-cpus 0 --client-cpus 1``: the stack's capacity is then one
core's, and the client's own work no longer takes from it); figures on a shared machine are
indicative.

Usage: ``.venv/bin/python test/perf/bench_overload.py [--scenarios small_json,heavy,...]
[--factors 0.5,1,1.5,2,3] [--seconds 10] [--capacity-seconds 8] [--processes 2]
[--env NAME=VALUE ...] [--compare NAME=VALUE ...] [--stack-cpus 0 --client-cpus 1]``:
``--compare`` starts a second stack
with those variables too, stepped in turn with the first at the same offered rates (e.g.
``--compare SAGEMAKER_TFS_MAX_CONCURRENT_INVOCATIONS=0``: no bound, as before issue 36).
``--image IMAGE [--container-args="--cpus 1 --memory 2g"]`` runs each stack in a podman
container of the image instead (``CONTAINERS_CONF=test/image/containers.conf``), its RSS the
sum of the container's processes.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import requests

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT / "test"))  # local_ports, conftest's model cache
sys.path.insert(0, str(REPO_ROOT / "test" / "integration" / "stack"))
sys.path.insert(0, str(REPO_ROOT / "test" / "models"))
sys.path.insert(0, str(REPO_ROOT / "test" / "perf"))
from http_load import LoadClient, Result, http_request  # noqa: E402
from local_ports import free_port  # noqa: E402
from whole_stack import Stack, descendant_pids, running_stack  # noqa: E402

MODELS = REPO_ROOT / "test" / "resources" / "models"
INVOCATION_TIMEOUT = 60.0  # nginx's read timeout: no SAGEMAKER_MODEL_SERVER_TIMEOUT here
PING_EVERY = 0.25
PING_MISS_SECONDS = 2.0
PING_P99_SECONDS = {"host": 0.1, "container": 0.5}  # issue 36's goals (one CPU in a container)

IO_HANDLER = """
import json, time
import requests

session = requests.Session()


def handler(data, context):
    time.sleep(0.05)  # waiting on I/O (gevent yields)
    answer = session.post(context.rest_uri, data=data.read())
    return answer.content, "application/json"
"""

CPU_HANDLER = """
import json
import requests

session = requests.Session()


def handler(data, context):
    body = data.read()
    total = 0
    for number in range(200_000):  # ~20 ms of Python on one core
        total += number * number % 7
    answer = session.post(context.rest_uri, data=body)
    return answer.content, "application/json"
"""


@dataclass(frozen=True)
class Scenario:
    name: str
    model: str
    body: Callable[[], bytes]
    clients: int = 32
    code: str | None = None


def small_json() -> bytes:
    return b'{"instances": [1.0, 2.0, 5.0]}'


def heavy_batch() -> bytes:
    rows = [[0.01 * (row + column) for column in range(16)] for row in range(64)]
    return json.dumps({"instances": rows}).encode()


def json_2mb() -> bytes:
    values = [round(0.001 * index, 3) for index in range(300_000)]
    body = json.dumps({"instances": values}).encode()
    return body[: 2 << 20].rsplit(b",", 1)[0] + b"]}"


SCENARIOS = {
    s.name: s
    for s in (
        Scenario("small_json", "half_plus_three", small_json),
        Scenario("heavy", "compute_heavy", heavy_batch, clients=8),
        Scenario("json_2mb", "half_plus_three", json_2mb),
        Scenario("io_handler", "half_plus_three", small_json, code=IO_HANDLER),
        Scenario("cpu_handler", "half_plus_three", small_json, code=CPU_HANDLER),
    )
}


def open_loop_process(
    port: int,
    request: bytes,
    rate: float,
    seconds: float,
    start_at: float,
    offset: float,
    timeout: float,
) -> list[Result]:
    """One client process's share of the schedule (run in a ProcessPoolExecutor)."""
    return LoadClient(port, request, timeout).open_loop(rate, seconds, start_at, offset)


def closed_loop_process(
    port: int, request: bytes, clients: int, seconds: float, timeout: float
) -> list[Result]:
    return LoadClient(port, request, timeout).closed_loop(clients, seconds)


# ----- what is watched meanwhile


@dataclass
class Watch:
    """/ping probes and the stack's RSS, sampled on threads while a step runs, and the CPU the
    stack used meanwhile (``cpus``: in cores, e.g. 0.94)."""

    stack: Stack
    pings: list[float] = field(default_factory=list)
    ping_misses: int = 0
    peak_rss: int = 0
    cpus: float = 0.0
    _stop: threading.Event = field(default_factory=threading.Event)

    def _probe(self) -> None:
        session = requests.Session()
        while not self._stop.wait(PING_EVERY):
            started = time.monotonic()
            try:
                status = session.get(self.stack.url + "/ping", timeout=5).status_code
            except requests.RequestException:
                status = 0
            seconds = time.monotonic() - started
            self.pings.append(seconds)
            if status != 200 or seconds > PING_MISS_SECONDS:
                self.ping_misses += 1

    def _memory(self) -> None:
        while not self._stop.wait(0.5):
            self.peak_rss = max(self.peak_rss, stack_rss(self.stack))

    def __enter__(self) -> Watch:
        self._cpu_started = (time.monotonic(), cpu_seconds(self.stack))
        self._threads = [
            threading.Thread(target=t, daemon=True) for t in (self._probe, self._memory)
        ]
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()
        started, used = self._cpu_started
        self.cpus = (cpu_seconds(self.stack) - used) / (time.monotonic() - started)


def cpu_seconds(stack: Any) -> float:
    """CPU time the stack has used: its container's cgroup (every process it ever ran), or
    on the host the sum over its live processes (one that exited takes its time with it)."""
    usage_file = getattr(stack, "cpu_usage_file", None)
    if usage_file is not None:
        text = Path(usage_file).read_text()
        if usage_file.endswith("cpuacct.usage"):
            return int(text) / 1e9
        fields = dict(line.split() for line in text.splitlines())
        return int(fields["usage_usec"]) / 1e6
    total = 0.0
    for pid in [stack.process.pid, *descendant_pids(stack.process.pid)]:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")
    return total


def cgroup_cpu_usage_file(pid: int) -> str:
    """The file with the CPU time of ``pid``'s cgroup: cgroup v1's ``cpuacct.usage``, else v2's
    ``cpu.stat`` (mounted at /sys/fs/cgroup, or at /sys/fs/cgroup/unified in the mixed
    layout)."""
    candidates = []
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "cpuacct" in controllers.split(","):
            candidates += [f"/sys/fs/cgroup/{name}{path}/cpuacct.usage"
                           for name in ("cpuacct", "cpu,cpuacct")]  # fmt: skip
        elif not controllers:
            candidates += [
                f"/sys/fs/cgroup{path}/cpu.stat",
                f"/sys/fs/cgroup/unified{path}/cpu.stat",
            ]
    found = [path for path in candidates if os.path.exists(path)]
    if not found:
        raise SystemExit(f"no cgroup CPU usage found for pid {pid} among {candidates}")
    return found[0]


def stack_rss(stack: Stack) -> int:
    total = 0
    for pid in [stack.process.pid, *descendant_pids(stack.process.pid)]:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1]) * 1024
    return total


def percentile(values: list[float], share: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


@dataclass
class Step:
    factor: float
    offered: float
    answers: list[Result]
    start_at: float  # epoch seconds of the schedule's start
    seconds: float  # the schedule's length
    watch: Watch

    @property
    def ok(self) -> list[float]:
        return [seconds for status, seconds, _, _, _ in self.answers if status == 200]

    @property
    def throughput(self) -> float:
        """200s per second, from the schedule's start to the last 200 (at least the
        schedule's length): the stack's rate while it had work, queued work drained included."""
        ends = [a[4] for a in self.answers if a[0] == 200]
        if not ends:
            return 0.0
        return len(ends) / max(self.seconds, max(ends) - self.start_at)

    @property
    def shed(self) -> float:
        return sum(1 for answer in self.answers if answer[3]) / max(1, len(self.answers))

    @property
    def cut(self) -> int:
        """Cut by a timeout: nginx's or the model server's 504, or no answer in time."""
        return sum(1 for status, _, _, _, _ in self.answers if status in (504, 0))

    @property
    def failed(self) -> int:
        """Connections refused or reset (the client's or the kernel's limits)."""
        return sum(1 for status, _, _, _, _ in self.answers if status == -1)

    @property
    def unsent(self) -> int:
        """Not sent: the client process had http_load.MAX_IN_FLIGHT requests waiting already."""
        return sum(1 for status, _, _, _, _ in self.answers if status == -2)

    @property
    def not_json(self) -> int:
        return sum(1 for status, _, is_json, _, _ in self.answers if status > 0 and not is_json)

    @property
    def other(self) -> int:
        return sum(
            1 for s, _, _, shed, _ in self.answers if s > 0 and s not in (200, 504) and not shed
        )


def run_step(
    pool: concurrent.futures.ProcessPoolExecutor,
    stack: Stack,
    request: bytes,
    factor: float,
    capacity: float,
    seconds: float,
    processes: int,
) -> Step:
    rate = factor * capacity
    start_at = time.time() + 0.5
    timeout = INVOCATION_TIMEOUT + 10
    with Watch(stack) as watch:
        futures = [
            pool.submit(
                open_loop_process,
                stack.port,
                request,
                rate / processes,
                seconds,
                start_at,
                index / rate,
                timeout,
            )
            for index in range(processes)
        ]
        answers = [answer for future in futures for answer in future.result()]
    return Step(factor, rate, answers, start_at, seconds, watch)


def measure_capacity(
    pool: concurrent.futures.ProcessPoolExecutor,
    stack: Stack,
    request: bytes,
    clients: int,
    seconds: float,
    processes: int,
) -> float:
    shares = [
        clients // processes + (1 if i < clients % processes else 0) for i in range(processes)
    ]
    started = time.time()
    futures = [
        pool.submit(closed_loop_process, stack.port, request, share, seconds, INVOCATION_TIMEOUT)
        for share in shares
        if share
    ]
    answers = [answer for future in futures for answer in future.result()]
    ends = [answer[4] for answer in answers if answer[0] == 200]
    # As a step's throughput: up to the last 200, since the requests still in flight when the
    # loop stops sending (one per connection, seconds each for a heavy model) end after it.
    return len(ends) / max(seconds, max(ends, default=started) - started)


def model_dir_for(scenario: Scenario, root: Path) -> Path:
    model_dir = root / "model"
    if scenario.model == "half_plus_three":
        shutil.copytree(MODELS / "half_plus_three", model_dir / "half_plus_three")
    else:
        from make_test_models import default_cache_dir, ensure_models  # cached test models

        ensure_models([scenario.model], default_cache_dir())
        shutil.copytree(default_cache_dir() / scenario.model, model_dir / scenario.model)
    if scenario.code is not None:
        (model_dir / "code").mkdir()
        (model_dir / "code" / "inference.py").write_text(scenario.code)
    return model_dir


@contextlib.contextmanager
def running_container(
    image: str, model_dir: Path, env: dict[str, str], engine_args: str
) -> Iterator[Any]:
    """A container of ``image`` serving ``model_dir``, as the ``Stack`` the steps use (its
    ``process.pid``: the container's first process, as this machine sees it)."""
    port = free_port()
    name = f"bench-overload-{port}"
    model_dir.chmod(0o755)
    env_args = [arg for key, value in env.items() for arg in ("--env", f"{key}={value}")]
    subprocess.run(
        ["podman", "run", "--detach", "--name", name, *shlex.split(engine_args), *env_args,
         "--volume", f"{model_dir}:/opt/ml/model:ro", "--publish", f"{port}:8080", image,
         "serve"],
        check=True, capture_output=True,
    )  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 180
        while not _pings(url):
            if time.monotonic() > deadline:
                raise SystemExit(f"{image}: /ping not 200 within 180 s")
            time.sleep(0.5)
        inspect = ["podman", "inspect", "--format", "{{.State.Pid}}", name]
        pid = int(subprocess.run(inspect, check=True, capture_output=True, text=True).stdout)
        yield SimpleNamespace(
            url=url,
            port=port,
            process=SimpleNamespace(pid=pid),
            cpu_usage_file=cgroup_cpu_usage_file(pid),
        )
    finally:
        subprocess.run(["podman", "rm", "-f", name], capture_output=True, check=False)


def _pings(url: str) -> bool:
    try:
        return requests.get(url + "/ping", timeout=2).status_code == 200
    except requests.RequestException:
        return False


def print_scenario(
    name: str, capacities: tuple[float, float], steps: list[Step], ping_p99_goal: float
) -> bool:
    capacity = sum(capacities) / 2
    print(
        f"\n{name}: capacity {capacity:.1f}/s (closed loop: {capacities[0]:.1f}/s before the "
        f"steps, {capacities[1]:.1f}/s after)"
    )
    print(
        f"{'x':>4} {'offered/s':>9} {'tput/s':>8} {'p50 s':>7} {'p99 s':>7} {'shed':>6} "
        f"{'cut':>4} {'conn':>5} {'unsent':>6} {'other':>5} {'!json':>5} {'ping p99':>8} "
        f"{'misses':>6} {'RSS MB':>7} {'CPUs':>5}"
    )
    for step in steps:
        ok = step.ok
        print(
            f"{step.factor:>4g} {step.offered:>9.1f} {step.throughput:>8.1f} "
            f"{percentile(ok, 0.5):>7.3f} {percentile(ok, 0.99):>7.3f} {step.shed:>6.1%} "
            f"{step.cut:>4d} {step.failed:>5d} {step.unsent:>6d} {step.other:>5d} "
            f"{step.not_json:>5d} "
            f"{percentile(step.watch.pings, 0.99) * 1000:>6.0f}ms {step.watch.ping_misses:>6d} "
            f"{step.watch.peak_rss / 2**20:>7.0f} {step.watch.cpus:>5.2f}"
        )
    top = steps[-1]
    at_capacity = [step for step in steps if step.factor == 1]
    if at_capacity and at_capacity[0].throughput:
        ratio = top.throughput / at_capacity[0].throughput
        print(f"  throughput at {top.factor:g}x / at 1x (open loop both): {ratio:.2f}")
    goals = {
        f"throughput at {top.factor:g}x >= 95% of capacity": top.throughput >= 0.95 * capacity,
        "p99 of answered within the invocation timeout": percentile(top.ok, 0.99)
        <= INVOCATION_TIMEOUT,
        "no request cut by a timeout": all(step.cut == 0 for step in steps),
        "every answer JSON": all(step.not_json == 0 for step in steps),
        "no /ping miss": all(step.watch.ping_misses == 0 for step in steps),
        f"/ping p99 <= {ping_p99_goal * 1000:.0f} ms at every step": all(
            percentile(step.watch.pings, 0.99) <= ping_p99_goal for step in steps
        ),
    }
    for goal, met in goals.items():
        print(f"  {'PASS' if met else 'FAIL'}: {goal}")
    return all(goals.values())


def run_scenario(
    pool: concurrent.futures.ProcessPoolExecutor,
    scenario: Scenario,
    envs: dict[str, dict[str, str]],
    args: argparse.Namespace,
) -> bool:
    """The scenario on a stack per entry of ``envs`` (started side by side): capacity measured
    on the first, then each factor's step on every stack in turn, so that a comparison sees
    the same moments of the machine. Goals are checked for the first."""
    factors = [float(f) for f in args.factors.split(",")]
    request_body = scenario.body()
    with tempfile.TemporaryDirectory(prefix="bench-overload-") as tmp, ExitStack() as stacks:
        running: dict[str, tuple[Stack, bytes]] = {}
        for label, env in envs.items():
            root = Path(tmp) / label
            (root / "work").mkdir(parents=True)
            model_dir = model_dir_for(scenario, root)
            stack = stacks.enter_context(
                running_container(args.image, model_dir, env, args.container_args)
                if args.image
                else running_stack(model_dir, root / "work", env, affinity=args.stack_cpus)
            )
            if not args.image:  # TensorFlow's import by the standby would take from the steps
                stack.wait_until_settled()
            running[label] = stack, http_request(stack.port, request_body)
        for stack, request in running.values():  # warm-up
            measure_capacity(pool, stack, request, scenario.clients, 2.0, args.processes)
        first, request = next(iter(running.values()))
        capacity = measure_capacity(
            pool, first, request, scenario.clients, args.capacity_seconds, args.processes
        )
        steps: dict[str, list[Step]] = {label: [] for label in running}
        for factor in factors:
            for label, (stack, request) in running.items():
                steps[label].append(
                    run_step(pool, stack, request, factor, capacity, args.seconds, args.processes)
                )
                time.sleep(1.0)
        capacity_after = measure_capacity(
            pool, first, request, scenario.clients, args.capacity_seconds, args.processes
        )
        ping_goal = PING_P99_SECONDS["container" if args.image else "host"]
        met = True
        for index, (label, taken) in enumerate(steps.items()):
            title = scenario.name if label == "default" else f"{scenario.name} [{label}]"
            met_here = print_scenario(title, (capacity, capacity_after), taken, ping_goal)
            met = met and (met_here or index > 0)
        sys.stdout.flush()
        return met


def cpu_set(text: str) -> set[int]:
    """``0`` or ``0,1`` -> {0} or {0, 1}."""
    return {int(cpu) for cpu in text.split(",")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--factors", default="0.5,1,1.5,2,3")
    parser.add_argument("--seconds", type=float, default=10.0, help="each open-loop step")
    parser.add_argument("--capacity-seconds", type=float, default=8.0)
    parser.add_argument("--processes", type=int, default=2, help="client processes")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument(
        "--compare",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="also a second stack with these variables, stepped in turn with the first",
    )
    parser.add_argument("--image", help="run the stacks in containers of this image")
    parser.add_argument("--container-args", default="", help='e.g. "--cpus 1 --memory 2g"')
    parser.add_argument("--stack-cpus", type=cpu_set, help="the host stack's CPUs, e.g. 0")
    parser.add_argument("--client-cpus", type=cpu_set, help="the client's CPUs, e.g. 1")
    args = parser.parse_args()
    if args.client_cpus:  # this process (the /ping probes) and the client processes
        os.sched_setaffinity(0, args.client_cpus)
    env = dict(item.split("=", 1) for item in args.env)
    envs = {"default": env}
    if args.compare:
        envs[" ".join(args.compare)] = {**env, **dict(i.split("=", 1) for i in args.compare)}
    results = {}
    with concurrent.futures.ProcessPoolExecutor(args.processes) as pool:
        for name in args.scenarios.split(","):
            results[name] = run_scenario(pool, SCENARIOS[name], envs, args)
    print(
        "\nall goals met"
        if all(results.values())
        else "\nsome goals not met: " + ", ".join(name for name, met in results.items() if not met)
    )


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    main()
