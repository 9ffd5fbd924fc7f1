"""This stack against the Python serving frameworks users would pick instead, on the same
SavedModels, side by side on this machine: KServe's model server (V1, and V2 where it helps),
BentoML, Triton through PyTriton and Ray Serve, each in a venv of its own
(``peer_venvs.py``, installed on first use), each server written as its docs write one
(``peers/*``), one server at a time, driven by ``wrk`` with the same bodies.

Scenarios (``--scenarios``), each at ``--connections`` (1,8,32), ``--warmup`` seconds of wrk
first (not counted), then ``--duration`` seconds measured:

- ``small``: half_plus_three, three values as JSON;
- ``heavy``: compute_heavy, 64 rows of 16 (about 0.3 s of TensorFlow a call); also
  TensorFlow in-process (the same number of threads calling the SavedModel);
- ``image``: one 224x224 JPEG to MobileNetV2 (this stack: the raw JPEG; peers: their image
  input: KServe's base64 instance, BentoML's multipart image, Triton's BYTES tensor, Ray's raw
  body);
- ``json10mb``: 10 MB of JSON values to half_plus_three;
- ``tensor100mb``: 100 MB of float32 to half_plus_three and back (this stack: ``.npy``;
  peers: V2 binary tensors, BentoML's file upload and file answer, Ray's raw ``.npy``);
- ``handlers``: Python pre/post-processing around half_plus_three (this stack's
  ``inference.py`` input_handler/output_handler, KServe's preprocess/postprocess, the
  others' service code: ``peers/tf_models.py``'s pair).

Per server: cold start (process start to the first good answer), memory at idle (after the
first answer) and at the peak of the run, as the sum of the PSS of its processes (shared pages
counted once). The load average is sampled through the run. Prints a markdown table and
writes ``peers.json`` (and ``peers.png``) to ``--out-dir``.

Usage::

    .venv/bin/python test/perf/bench_peers.py                      # everything, 15 s a cell
    .venv/bin/python test/perf/bench_peers.py --peers stack,kserve --scenarios small \\
        --connections 1,8 --duration 3 --warmup 1                  # a quick subset
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import requests

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "peers"))

import peer_venvs  # noqa: E402
from bench_fast_paths import load_test_models, photo_like_jpeg  # noqa: E402
from local_ports import free_port_range  # noqa: E402
from peer_requests import CALLS, Call, Payloads  # noqa: E402
from whole_stack import descendant_pids, launch  # noqa: E402

# OMP_NUM_THREADS as the user set it: main() sets 1 for TensorFlow in-process (as the stack's
# supervisor does for its model server); the peers get the user's environment, not that.
USER_OMP_NUM_THREADS = os.environ.get("OMP_NUM_THREADS")
SCENARIOS = ("small", "heavy", "image", "json10mb", "tensor100mb", "handlers")
PEERS = ("stack", "kserve", "kserve-v2", "bentoml", "pytriton", "ray")
MODELS = ("half_plus_three", "compute_heavy", "mobilenet_v2")
STACK_CODE = HERE / "peers" / "stack_code"
START_TIMEOUT = 240.0
# wrk's own threads: one per connection up to the machine's two cores
WRK_THREADS = 2


# ---------------------------------------------------------------- servers


@dataclass
class Server:
    """A running server: its base URL and the process whose group holds all of it."""

    name: str
    url: str
    process: subprocess.Popen
    stop: Callable[[], None]
    settled: Callable[[], None] = lambda: None  # waits until start-up work is over


def stop_group(process: subprocess.Popen, timeout: float = 30.0) -> None:
    """SIGTERM to the server's own process group (started in a session of its own), then
    SIGKILL to whatever is left of it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def start_peer(name: str, models_dir: Path, log: Path) -> Server:
    """One peer's server, from its venv (installed if needed), on free ports."""
    venv = "kserve" if name == "kserve-v2" else name
    peer_venvs.install(venv)
    python = str(peer_venvs.venv_python(venv))
    low, _ = free_port_range(3)
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": ""}
    if USER_OMP_NUM_THREADS is None:
        env.pop("OMP_NUM_THREADS", None)
    peers = HERE / "peers"
    if venv == "kserve":
        command = [python, "kserve_server.py", str(models_dir), "--http_port", str(low),
                   "--grpc_port", str(low + 1)]  # fmt: skip
    elif venv == "bentoml":
        env["SAGEMAKER_TFS_PEER_MODELS"] = str(models_dir)
        bentoml = str(Path(python).parent / "bentoml")
        command = [bentoml, "serve", "bentoml_service:TFModels", "--port", str(low)]
    elif venv == "pytriton":
        # The Python backend's stub links libpython3.11.so.1.0: without this it finds the
        # system's 3.11.2 under the venv's 3.11.7 standard library and fails to start
        # ('_thread.RLock' object has no attribute '_recursion_count').
        env["LD_LIBRARY_PATH"] = str(Path(sys.base_prefix) / "lib")
        command = [python, "pytriton_server.py", str(models_dir), str(low), str(low + 1),
                   str(low + 2)]  # fmt: skip
    else:
        command = [python, "ray_server.py", str(models_dir), str(low)]
    with open(log, "ab") as out:
        process = subprocess.Popen(command, cwd=peers, env=env, stdout=out,
                                   stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
    return Server(name, f"http://127.0.0.1:{low}", process, lambda: stop_group(process))


def start_stack(model_dir: Path, work_dir: Path) -> Server:
    """``sagemaker-tfs serve`` with default settings."""
    work_dir.mkdir(parents=True, exist_ok=True)
    stack = launch(model_dir, work_dir)

    def stop() -> None:
        with contextlib.suppress(Exception):
            stack.stop()
        stack.kill_session()

    # the standby model server imports TensorFlow after the stack answers: part of its idle
    return Server("stack", stack.url, stack.process, stop, stack.wait_until_settled)


def stack_model_dir(models_root: Path, root: Path, with_code: bool) -> Path:
    """The three models (symlinked), and the handlers scenario's code/ when asked."""
    model_dir = root / ("model-handlers" if with_code else "model")
    model_dir.mkdir(parents=True)
    for name in MODELS if not with_code else ("half_plus_three",):
        (model_dir / name).symlink_to(models_root / name, target_is_directory=True)
    if with_code:
        shutil.copytree(STACK_CODE, model_dir / "code")
    return model_dir


# ---------------------------------------------------------------- memory and load


def pss_mb(root: int) -> float:
    """PSS of ``root`` and every process below it, in MB."""
    total = 0
    for pid in [root, *descendant_pids(root)]:
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
                    break
    return round(total / 1024, 1)


def cpu_seconds(root: int) -> float:
    """User + system CPU of ``root`` and every process below it."""
    total = 0
    for pid in [root, *descendant_pids(root)]:
        with contextlib.suppress(OSError, IndexError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def wait_until_idle(root: int, timeout: float = 120.0, busy: float = 0.1) -> float:
    """Until the server uses less than ``busy`` of a core over a second: requests that wrk
    left behind at the end of a cell (32 heavy ones are 20 s of work) would otherwise run
    into the next cell. Returns the seconds waited."""
    start = time.monotonic()
    before = cpu_seconds(root)
    while time.monotonic() - start < timeout:
        time.sleep(1.0)
        now = cpu_seconds(root)
        if now - before < busy:
            break
        before = now
    return round(time.monotonic() - start, 1)


class Sampler:
    """Samples a server's memory and the load average in a thread, every ``interval`` s."""

    def __init__(self, root: int, interval: float = 0.5) -> None:
        self.root, self.interval = root, interval
        self.peak_mb = 0.0
        self.loads: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.peak_mb = max(self.peak_mb, pss_mb(self.root))
            self.loads.append(os.getloadavg()[0])

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


# ---------------------------------------------------------------- wrk


LUA = """local f = assert(io.open("{body}", "rb"))
wrk.body = f:read("*a")
f:close()
wrk.method = "POST"
{headers}
"""


def wrk_script(call: Call, directory: Path) -> Path:
    body = directory / "body.bin"
    body.write_bytes(call.body)
    headers = "\n".join(
        f'wrk.headers["{name}"] = "{value}"' for name, value in call.headers.items()
    )
    script = directory / "request.lua"
    script.write_text(LUA.format(body=body, headers=headers))
    return script


_UNITS = {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60000.0}


def _ms(text: str) -> float:
    number, unit = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text).groups()  # type: ignore[union-attr]
    return round(float(number) * _UNITS[unit], 2)


def parse_wrk(output: str) -> dict:
    """Requests/s, p50/p99 and the failures of wrk --latency's report."""
    figures: dict = {"req_per_s": float(re.search(r"Requests/sec:\s+([\d.]+)", output)[1])}  # type: ignore[index]
    for percent, key in (("50", "p50_ms"), ("99", "p99_ms")):
        found = re.search(rf"^\s+{percent}%\s+(\S+)", output, re.MULTILINE)
        figures[key] = _ms(found[1]) if found else None
    figures["requests"] = int(re.search(r"(\d+) requests in", output)[1])  # type: ignore[index]
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", output)
    errors = re.search(r"Socket errors: (.*)", output)
    figures["non_2xx"] = int(bad[1]) if bad else 0
    figures["socket_errors"] = errors[1] if errors else ""
    return figures


def run_wrk(url: str, script: Path, connections: int, seconds: int) -> dict:
    threads = min(connections, WRK_THREADS)
    # wrk takes whole seconds only ("1.0s" is refused)
    command = ["wrk", "-t", str(threads), "-c", str(connections), "-d", f"{seconds}s",
               "--latency", "--timeout", "120s", "-s", str(script), url]  # fmt: skip
    output = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    return parse_wrk(output)


# ---------------------------------------------------------------- one server's run


def first_answer(server: Server, call: Call, timeout: float = START_TIMEOUT) -> float:
    """Seconds from now until ``call`` is answered 200 (the server was just started)."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if server.process.poll() is not None:
            raise RuntimeError(f"{server.name} exited with {server.process.returncode}")
        with contextlib.suppress(requests.RequestException):
            answer = requests.post(server.url + call.path, data=call.body, headers=call.headers,
                                   timeout=10)  # fmt: skip
            if answer.status_code == 200:
                return time.monotonic() - start
        time.sleep(0.1)
    raise RuntimeError(f"{server.name}: no answer within {timeout} s")


def checked(server: Server, call: Call) -> None:
    """One request, its answer checked, before wrk sends thousands."""
    answer = requests.post(
        server.url + call.path, data=call.body, headers=call.headers, timeout=300
    )
    if answer.status_code != 200:
        raise RuntimeError(
            f"{server.name} {call.path}: {answer.status_code} {answer.content[:300]!r}"
        )
    call.check(answer.content)


def cell_seconds(scenario: str, connections: int, args: argparse.Namespace) -> tuple[int, int]:
    """(measured, warm-up) seconds of a cell: a heavy call takes ~0.3-0.6 s, so with many
    connections each one needs seconds before its first answer counts."""
    if scenario == "heavy":
        return max(args.duration, 2 * connections), max(args.warmup, connections // 4)
    return args.duration, args.warmup


def measure_server(server: Server, calls: dict[str, Call], args: argparse.Namespace,
                   temp: Path) -> dict:  # fmt: skip
    """Every scenario's cells on one running server (its cold start already measured)."""
    cells: dict = {}
    for scenario, call in calls.items():
        try:
            checked(server, call)
        except Exception as error:  # noqa: BLE001 - reported in the table, the run goes on
            cells[scenario] = {"error": str(error)[:300]}
            print(f"  {server.name} {scenario}: {error}", flush=True)
            continue
        wait_until_idle(server.process.pid)
        directory = temp / f"{server.name}-{scenario}"
        directory.mkdir()
        script = wrk_script(call, directory)
        cells[scenario] = {}
        for connections in args.connections:
            seconds, warmup = cell_seconds(scenario, connections, args)
            if warmup > 0:
                run_wrk(server.url + call.path, script, connections, warmup)
                wait_until_idle(server.process.pid)
            figures = run_wrk(server.url + call.path, script, connections, seconds)
            figures["load"] = round(os.getloadavg()[0], 2)
            figures["idle_wait_s"] = wait_until_idle(server.process.pid)
            cells[scenario][str(connections)] = figures
            print(f"  {server.name:10s} {scenario:12s} c={connections:<3d} {figures}", flush=True)
        shutil.rmtree(directory)
    return cells


def run_server(name: str, start: Callable[[], Server], ready_calls: list[Call],
               calls: dict[str, Call], args: argparse.Namespace, temp: Path) -> dict:  # fmt: skip
    """Start; cold start: until each of ``ready_calls`` (one per model) has been answered
    (some servers answer for their first model while they load the others); idle memory,
    the scenarios, peak memory; stop."""
    began = time.monotonic()
    server = start()
    try:
        cold = time.monotonic() - began
        for call in ready_calls:
            cold += first_answer(server, call)
        server.settled()
        time.sleep(args.settle)
        idle = pss_mb(server.process.pid)
        with Sampler(server.process.pid) as sampler:
            cells = measure_server(server, calls, args, temp)
        return {"cold_start_s": round(cold, 2), "idle_mb": idle,
                "peak_mb": max(sampler.peak_mb, idle), "cells": cells,
                "load": _load_summary(sampler.loads)}  # fmt: skip
    finally:
        server.stop()


def _load_summary(loads: list[float]) -> dict:
    if not loads:
        return {}
    return {"min": min(loads), "mean": round(statistics.mean(loads), 2), "max": max(loads)}


# ---------------------------------------------------------------- TensorFlow in-process


def in_process_heavy(models_root: Path, payloads: Payloads, args: argparse.Namespace) -> dict:
    """compute_heavy called in this process by as many threads as connections."""
    import tf_models

    model = tf_models.SavedModel(str(models_root), tf_models.HEAVY)
    model.predict(payloads.heavy)
    cells = {}
    for connections in args.connections:
        if args.warmup > 0:
            _threads_calling(model, payloads.heavy, connections, args.warmup)
        latencies, seconds = _threads_calling(model, payloads.heavy, connections, args.duration)
        ordered = sorted(latencies)
        cells[str(connections)] = {
            "req_per_s": round(len(latencies) / seconds, 2),
            "p50_ms": round(1000 * ordered[len(ordered) // 2], 2),
            "p99_ms": round(1000 * ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))], 2),
            "requests": len(latencies), "load": round(os.getloadavg()[0], 2),
        }  # fmt: skip
        print(f"  in-process heavy c={connections:<3d} {cells[str(connections)]}", flush=True)
    return {"cells": {"heavy": cells}}


def _threads_calling(  # type: ignore[no-untyped-def]
    model, rows: np.ndarray, threads: int, seconds: float
) -> tuple[list[float], float]:
    latencies: list[float] = []
    deadline = time.monotonic() + seconds

    def loop() -> None:
        while time.monotonic() < deadline:
            start = time.monotonic()
            model.predict(rows)
            latencies.append(time.monotonic() - start)

    began = time.monotonic()
    with ThreadPoolExecutor(threads) as pool:
        for future in [pool.submit(loop) for _ in range(threads)]:
            future.result()
    return latencies, time.monotonic() - began


# ---------------------------------------------------------------- output


def markdown_table(results: dict, scenarios: list[str], connections: list[int]) -> str:
    """One row per scenario and connection count, one column per server: req/s, p50, p99;
    then this stack's throughput over the best peer's and its p99 against that peer's; then
    cold start and memory."""
    servers = results["servers"]
    names = list(servers)
    lines = ["| scenario | conns | " + " | ".join(names) + " | stack / best peer |",
             "|---|---|" + "---|" * (len(names) + 1)]  # fmt: skip
    for scenario in scenarios:
        for count in connections:
            row = [_cell_text(servers[name], scenario, count) for name in names]
            lines.append(f"| {scenario} | {count} | " + " | ".join(row)
                         + f" | {_against_best_peer(servers, scenario, count)} |")  # fmt: skip
    for key, label in (("cold_start_s", "cold start, s"), ("idle_mb", "memory idle, MB"),
                       ("peak_mb", "memory peak, MB")):  # fmt: skip
        row = [str(servers[name].get(key, "-")) for name in names]
        lines.append(f"| {label} | | " + " | ".join(row) + " | |")
    return "\n".join(lines)


def _figures(server: dict, scenario: str, count: int) -> dict | None:
    cells = server.get("cells", {}).get(scenario, {})
    figures = cells.get(str(count)) if isinstance(cells, dict) else None
    return figures if figures and figures.get("requests") else None


def _cell_text(server: dict, scenario: str, count: int) -> str:
    if "error" in server.get("cells", {}).get(scenario, {}):
        return "error"
    figures = _figures(server, scenario, count)
    if figures is None:
        return "-"
    return f"{figures['req_per_s']:g}/s, p50 {figures['p50_ms']:g}, p99 {figures['p99_ms']:g} ms"


def _against_best_peer(servers: dict, scenario: str, count: int) -> str:
    """This stack's req/s over the best peer's (named), and both p99s."""
    ours = None
    for name in ("stack", "stack+handlers"):
        ours = ours or (_figures(servers[name], scenario, count) if name in servers else None)
    peers = {}
    for name, server in servers.items():
        figures = _figures(server, scenario, count)
        if figures and not name.startswith(("stack", "tf-")):
            peers[name] = figures
    if ours is None or not peers:
        return "-"
    best = max(peers, key=lambda name: peers[name]["req_per_s"])
    theirs = peers[best]
    return (f"{ours['req_per_s'] / theirs['req_per_s']:.2f}x ({best}); "
            f"p99 {ours['p99_ms']:g} vs {theirs['p99_ms']:g} ms")  # fmt: skip


def tables_from(paths: list[Path]) -> str:
    """The table of one or more saved ``peers.json`` (e.g. a run of the small bodies and one of
    the large ones), their servers' cells merged."""
    merged: dict = {"servers": {}}
    scenarios: list[str] = []
    connections: set[int] = set()
    for path in paths:
        saved = json.loads(path.read_text())
        for name, server in saved["servers"].items():
            into = merged["servers"].setdefault(name, {"cells": {}})
            into["cells"].update(server.get("cells", {}))
            for key in ("cold_start_s", "idle_mb", "peak_mb"):
                if key in server:
                    into[key] = server[key] if key not in into else max(into[key], server[key])
            for scenario, cells in server.get("cells", {}).items():
                if scenario not in scenarios:
                    scenarios.append(scenario)
                if isinstance(cells, dict) and "error" not in cells:
                    connections.update(int(count) for count in cells)
    return markdown_table(merged, scenarios, sorted(connections))


def chart(results: dict, scenarios: list[str], path: Path) -> None:
    """``charts.peers_chart`` where matplotlib is installed (``pip install -e '.[perf]'``)."""
    try:
        import charts
    except ImportError:
        print("no chart: matplotlib is not installed")
        return
    charts.peers_chart(results, scenarios, path)


# ---------------------------------------------------------------- main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peers", default=",".join(PEERS), help=f"some of {','.join(PEERS)}")
    parser.add_argument(
        "--scenarios", default=",".join(SCENARIOS), help=f"some of {','.join(SCENARIOS)}"
    )
    parser.add_argument("--connections", default="1,8,32")
    parser.add_argument("--duration", type=int, default=15, help="seconds measured per cell")
    parser.add_argument("--warmup", type=int, default=3, help="seconds of wrk before each cell")
    parser.add_argument(
        "--settle",
        type=float,
        default=3.0,
        help="seconds after the first answer before idle memory is read",
    )
    parser.add_argument("--no-in-process", action="store_true", help="skip TensorFlow in-process")
    parser.add_argument("--out-dir", type=Path, help="writes peers.json and peers.png there")
    parser.add_argument("--table-from", type=Path, nargs="+",
                        help="only print the table of saved peers.json files (merged)")  # fmt: skip
    args = parser.parse_args(argv)
    args.peers = [p for p in args.peers.split(",") if p]
    args.scenarios = [s for s in args.scenarios.split(",") if s]
    args.connections = [int(c) for c in args.connections.split(",")]
    for value, allowed, flag in (
        (args.peers, PEERS, "--peers"),
        (args.scenarios, SCENARIOS, "--scenarios"),
    ):
        unknown = set(value) - set(allowed)
        if unknown:
            parser.error(f"{flag}: unknown {sorted(unknown)}")
    return args


ServerRun = tuple[str, Callable[[], Server], list[Call], dict[str, Call]]


def server_runs(
    args: argparse.Namespace, models_root: Path, payloads: Payloads, temp: Path
) -> Iterator[ServerRun]:
    """(label, start, calls that answer once every model is ready, calls) for every server
    run: this stack twice (its handlers need a code/ of their own, where every request goes
    through them), each peer once."""
    for name in args.peers:
        calls = {s: c for s in args.scenarios if (c := CALLS[name](payloads, s)) is not None}
        ready = [c for s in ("small", "heavy", "image") if (c := CALLS[name](payloads, s))]
        if name == "stack":
            plain = {s: c for s, c in calls.items() if s != "handlers"}
            if plain:
                model_dir = stack_model_dir(models_root, temp, with_code=False)
                yield "stack", lambda d=model_dir: start_stack(d, temp / "work"), ready, plain
            if "handlers" in calls:
                model_dir = stack_model_dir(models_root, temp, with_code=True)
                handlers = calls["handlers"]
                yield ("stack+handlers", lambda d=model_dir: start_stack(d, temp / "work-handlers"),
                       [handlers], {"handlers": handlers})  # fmt: skip
        elif calls:
            log = temp / f"{name}.log"
            yield name, lambda n=name, log=log: start_peer(n, models_root, log), ready, calls


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.table_from:
        print(tables_from(args.table_from))
        return 0
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # in-process TF as the stack's model server
    models_root = load_test_models(list(MODELS))
    payloads = Payloads(photo_like_jpeg(224, seed=1))
    results: dict = {"command": " ".join(sys.argv), "load_at_start": os.getloadavg(),
                     "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
                     "versions": {}, "servers": {}}  # fmt: skip
    for name in {("kserve" if p == "kserve-v2" else p) for p in args.peers} - {"stack"}:
        results["versions"][name] = peer_venvs.install(name)["versions"]
        print(name, results["versions"][name], flush=True)
    temp = Path(tempfile.mkdtemp(prefix="bench-peers-"))
    try:
        if "heavy" in args.scenarios and not args.no_in_process:
            results["servers"]["tf-in-process"] = in_process_heavy(models_root, payloads, args)
        for label, start, ready, calls in server_runs(args, models_root, payloads, temp):
            print(f"{label}: starting", flush=True)
            try:
                results["servers"][label] = run_server(label, start, ready, calls, args, temp)
            except Exception as error:  # noqa: BLE001 - one server failing leaves the others
                results["servers"][label] = {"error": str(error)[:500]}
                print(f"{label}: {error}", flush=True)
    finally:
        for log in temp.glob("*.log"):
            print(
                f"--- {log.name} (last lines)\n"
                + "\n".join(log.read_text(errors="replace").splitlines()[-5:])
            )
        shutil.rmtree(temp, ignore_errors=True)
    results["load_at_end"] = os.getloadavg()
    table = markdown_table(results, args.scenarios, args.connections)
    print(table)
    print(f"load average: start {results['load_at_start']}, end {results['load_at_end']}")
    if args.out_dir:
        args.out_dir.mkdir(parents=True, exist_ok=True)
        (args.out_dir / "peers.json").write_text(json.dumps(results, indent=1))
        chart(results, args.scenarios, args.out_dir / "peers.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
