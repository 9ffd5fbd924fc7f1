"""Multi-model density (issue 31): a thousand small models in one stack.

Starts ``sagemaker-tfs serve`` in multi-model mode (shared model servers, our Python model
server) with ``--models`` copies of half_plus_three, each in its own directory, and prints:

- the memory the model server processes gain per loaded model, beside the model's own files,
  and the number of processes before and after (it must not change);
- every loaded model invoked once through nginx;
- the latency of loading one more model into the running stack (p50/p99 over ``--extra``
  loads), and the total time of the first ``--models`` loads;
- the latency of invoking one model in a stack with 10 models loaded and in the stack with
  all of them, requests to the two stacks alternating (``--invokes`` each, one client), so
  that both see the same machine;
- unload + load of one model ``--cycles`` times: the model server's RSS at the start, every
  tenth of the way and at the end;
- the time a killed model server takes to serve every model again.

    .venv/bin/python test/perf/bench_multi_model.py [--models 1000] [--extra 100] \\
        [--invokes 500] [--cycles 1000] [--in-process-cycles 1000] [--no-restart] [--per-model]

``--in-process-cycles`` also loads and closes a Servable that many times in this process
(no stack), to tell TensorFlow's own cost per load from the stack's.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # local_ports, for whole_stack
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration" / "stack"))
from control_socket import control, load  # noqa: E402
from whole_stack import Stack, descendant_pids, running_stack, wait_for  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[2]
HALF_PLUS_THREE = REPO_ROOT / "test" / "resources" / "models" / "half_plus_three"
MIB = 1024 * 1024


def rss_bytes(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return 0
    return 0


def model_server_rss(stack: Stack) -> int:
    return sum(rss_bytes(pid) for pid in stack.child_pids("--rest_api_port"))


def stack_rss(stack: Stack) -> int:
    return sum(rss_bytes(pid) for pid in descendant_pids(stack.process.pid))


def model_files_bytes() -> int:
    return sum(path.stat().st_size for path in HALF_PLUS_THREE.rglob("*") if path.is_file())


def variables_bytes() -> int:
    return sum(path.stat().st_size for path in HALF_PLUS_THREE.rglob("variables/*"))


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def name_of(index: int) -> str:
    return f"m{index:04d}"


def timed_load(stack: Stack, name: str) -> float:
    started = time.perf_counter()
    status, body = load(stack, name, name)
    elapsed = time.perf_counter() - started
    if status != 200:
        raise RuntimeError(f"loading {name}: {status} {body}")
    return elapsed


def unload(stack: Stack, name: str) -> None:
    status, body = control(stack, "DELETE", f"/models/{name}")
    if status != 200:
        raise RuntimeError(f"unloading {name}: {status} {body}")


def invoke_latencies(session: requests.Session, stack: Stack, name: str, count: int) -> list[float]:
    url = f"{stack.url}/models/{name}/invoke"
    times = []
    for _ in range(count):
        started = time.perf_counter()
        response = session.post(url, data=b"[1.0]", headers={"Content-Type": "application/json"})
        times.append(time.perf_counter() - started)
        if response.status_code != 200:
            raise RuntimeError(f"invoking {name}: {response.status_code} {response.text}")
    return times


def describe_latency(label: str, times: list[float]) -> float:
    p50 = statistics.median(times) * 1000
    print(
        f"  {label}: p50 {p50:.2f} ms, p99 {percentile(times, 0.99) * 1000:.2f} ms, "
        f"mean {statistics.fmean(times) * 1000:.2f} ms"
    )
    return p50


@contextlib.contextmanager
def models_stack(count: int, extra_env: dict[str, str] | None = None) -> Iterator[Stack]:
    temp = Path(tempfile.mkdtemp(prefix="bench-multi-model-"))
    try:
        root = temp / "models"
        for index in range(count):
            shutil.copytree(HALF_PLUS_THREE, root / name_of(index))
        work_dir = temp / "work"
        work_dir.mkdir()
        env = {"SAGEMAKER_TFS_LOG_LEVEL": "WARNING", "SAGEMAKER_TFS_WAIT_TIME_SECONDS": "600"}
        env.update(extra_env or {})
        with running_stack(root, work_dir, env, multi_model=True) as stack:
            stack.wait_until_settled()
            yield stack
    finally:
        shutil.rmtree(temp, ignore_errors=True)


def in_process_cycles(cycles: int) -> None:
    """SavedModelServable.load + close in this process: TensorFlow's own memory per load."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf
    from sagemaker_tfs.model_server.serving.saved_model_servable import SavedModelServable

    (version,) = [p for p in HALF_PLUS_THREE.iterdir() if p.name.isdigit()]
    config = tf.compat.v1.ConfigProto(allow_soft_placement=True)
    for _ in range(20):  # warm: first loads allocate caches once
        SavedModelServable.load("m", 1, str(version), config).close()
    gc.collect()
    start = rss_bytes(os.getpid())
    samples = []
    for cycle in range(cycles):
        SavedModelServable.load("m", 1, str(version), config).close()
        if (cycle + 1) % max(1, cycles // 5) == 0:
            gc.collect()
            samples.append(rss_bytes(os.getpid()))
    print(f"in-process load+close x{cycles}: RSS {start / MIB:.1f} MB at the start, then")
    print("  " + ", ".join(f"{s / MIB:.1f}" for s in samples) + " MB")
    print(f"  growth per load: {(samples[-1] - start) / cycles / 1024:.2f} KB")


class Bench:
    """One stack, one client session; each step prints its figures."""

    def __init__(self, stack: Stack, models: int, extra: int) -> None:
        self.stack = stack
        self.models = models
        self.extra = extra
        self.session = requests.Session()

    def answers(self, name: str) -> bool:
        response = self.session.post(
            f"{self.stack.url}/models/{name}/invoke",
            data=b"[1.0]",
            headers={"Content-Type": "application/json"},
        )
        return response.status_code == 200 and response.json() == {"predictions": [[3.5]]}

    def load_range(self, first: int, end: int) -> list[float]:
        return [timed_load(self.stack, name_of(index)) for index in range(first, end)]

    def density(self) -> None:
        """Loads the models; memory, processes, every model invoked."""
        stack = self.stack
        processes = len(descendant_pids(stack.process.pid))
        empty_server, empty_stack = model_server_rss(stack), stack_rss(stack)
        print(f"empty stack: {processes} processes, model server {empty_server / MIB:.1f} MB,")
        print(f"  whole stack {empty_stack / MIB:.1f} MB")
        loads = self.load_range(0, self.models)
        time.sleep(3)  # unloads and garbage of the loads settle
        server, whole = model_server_rss(stack), stack_rss(stack)
        print(f"{self.models} models loaded: {sum(loads):.1f} s of loads, ", end="")
        print(f"p50 {statistics.median(loads) * 1000:.0f} ms")
        print(
            f"  model server {server / MIB:.1f} MB (+{(server - empty_server) / MIB:.1f}),", end=""
        )
        print(f" whole stack {whole / MIB:.1f} MB (+{(whole - empty_stack) / MIB:.1f})")
        print(
            f"  per model: {(server - empty_server) / self.models / MIB:.2f} MB in the model ",
            end="",
        )
        print(f"server; its files {model_files_bytes() / 1024:.1f} KB", end="")
        print(f" (variables {variables_bytes()} bytes)")
        print(f"  processes: {processes} before, {len(descendant_pids(stack.process.pid))} after")
        answered = sum(self.answers(name_of(index)) for index in range(self.models))
        print(f"  every model invoked once: {answered} of {self.models} answered")

    def one_more(self) -> None:
        extra = self.load_range(self.models, self.models + self.extra)
        print(f"one more model into a running stack of {self.models}+ ({self.extra} loads):")
        print(f"  p50 {statistics.median(extra) * 1000:.0f} ms, ", end="")
        print(f"p99 {percentile(extra, 0.99) * 1000:.0f} ms, max {max(extra) * 1000:.0f} ms")

    def cycles(self, cycles: int) -> None:
        start = model_server_rss(self.stack)
        samples = []
        for cycle in range(cycles):
            unload(self.stack, name_of(5))
            timed_load(self.stack, name_of(5))
            if (cycle + 1) % max(1, cycles // 10) == 0:
                samples.append(model_server_rss(self.stack))
        print(f"unload + load x{cycles}: model server RSS {start / MIB:.1f} MB at the start,")
        print("  then " + ", ".join(f"{s / MIB:.1f}" for s in samples) + " MB")

    def restart(self) -> None:
        """Kill the model server with every model loaded; time until it serves them all."""
        (server,) = self.stack.child_pids("--rest_api_port")
        line = f"serves the {self.models} loaded model(s)"
        seen = self.stack.log_text().count(line)
        started = time.perf_counter()
        os.kill(server, signal.SIGKILL)
        back = wait_for(lambda: self.stack.log_text().count(line) > seen, 600, 0.1)
        restored = time.perf_counter() - started
        answered = sum(self.answers(name_of(index)) for index in range(self.models))
        print(f"model server killed with {self.models} models: in line again after ", end="")
        print(f"{restored:.1f} s (back={back}); {answered} of {self.models} answer")


def alternating_latencies(
    stacks: dict[str, Stack], name: str, invokes: int
) -> dict[str, list[float]]:
    """One request to each stack in turn, ``invokes`` rounds (after 50 to warm up); every
    other round the other stack goes first, so neither always follows the other's request."""
    sessions = {label: requests.Session() for label in stacks}
    times: dict[str, list[float]] = {label: [] for label in stacks}
    for round_ in range(50 + invokes):
        order = list(stacks.items())
        for label, stack in order if round_ % 2 else reversed(order):
            (took,) = invoke_latencies(sessions[label], stack, name, 1)
            if round_ >= 50:
                times[label].append(took)
    return times


def print_latencies(latencies: dict[str, list[float]], invokes: int) -> None:
    print(f"invoke latency of one model ({invokes} requests per stack, alternating):")
    few, many = (describe_latency(label, times) for label, times in latencies.items())
    print(f"  p50 with all loaded / with 10: {many / few:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=1000)
    parser.add_argument("--extra", type=int, default=100)
    parser.add_argument("--invokes", type=int, default=500)
    parser.add_argument("--cycles", type=int, default=1000)
    parser.add_argument("--in-process-cycles", type=int, default=0)
    parser.add_argument("--no-restart", action="store_true", help="skip the killed model server")
    parser.add_argument(
        "--per-model",
        action="store_true",
        help="SAGEMAKER_TFS_MODEL_SERVER_PER_MODEL=true (for comparison: use few --models)",
    )
    args = parser.parse_args()
    mode = {"SAGEMAKER_TFS_MODEL_SERVER_PER_MODEL": "true"} if args.per_model else {}

    with models_stack(args.models + args.extra, mode) as stack:
        bench = Bench(stack, args.models, args.extra)
        bench.density()
        bench.one_more()
        for index in range(args.models, args.models + args.extra):
            unload(stack, name_of(index))
        with models_stack(10, mode) as small:
            Bench(small, 10, 0).load_range(0, 10)
            labels = {"10 models loaded": small, f"{args.models} models loaded": stack}
            print_latencies(alternating_latencies(labels, name_of(0), args.invokes), args.invokes)
        if args.cycles:
            bench.cycles(args.cycles)
        if not args.no_restart:
            bench.restart()
    if args.in_process_cycles:
        in_process_cycles(args.in_process_cycles)


if __name__ == "__main__":
    main()
