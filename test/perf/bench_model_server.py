"""Benchmark of ``sagemaker-tfs model-server`` (prints figures; not a timed test).

Measured in one run, so the ratios compare like with like on this machine:

1. one client, calling in turn the in-process TF call (the server's own
   ``Servable.predict``, a session run), gRPC and REST against a server with batching off,
   on half_plus_three and MobileNetV2 with a 1x224x224x3 input: requests/s, p50, p99 and
   the p50 overhead over the in-process call (interleaved, so all see the same load);
2. 16 concurrent gRPC clients against two servers, batching off and on, measured in
   alternation (so both see the same background load): throughput and the on/off ratio.

Goals (issue 2): gRPC adds at most 1 ms p50 over in-process for MobileNetV2; batching on
with 16 clients gives at least 1.5x the unbatched throughput.

With ``--base-tree DIR`` (a tree holding ``container/``, e.g. ``git archive main container``),
the same servers are also started from that tree's code and measured beside these, in the
same interleaving: before and after in one run.

Usage: ``.venv/bin/python test/perf/bench_model_server.py [--seconds 5] [--rounds 3]
[--base-tree DIR]``
"""

from __future__ import annotations

import argparse
import concurrent.futures
import functools
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT / "test"))  # local_ports, shared by the test helpers
sys.path.insert(0, str(REPO_ROOT / "test" / "integration" / "model_server"))
sys.path.insert(0, str(REPO_ROOT / "test" / "models"))

from grpc_helpers import predict_request, prediction_stub  # noqa: E402
from model_server_process import launch_model_server, wait_until_ready  # noqa: E402

CLIENTS = 16
# Default: one batch thread; the 16 clients' requests wait while a batch runs and then form
# the next full batch together (the timeout only bounds the wait when fewer are active).
BATCHING_TEMPLATE = """
max_batch_size {{ value: {clients} }}
batch_timeout_micros {{ value: {timeout} }}
max_enqueued_batches {{ value: 100 }}
num_batch_threads {{ value: {threads} }}
"""


def _generator():  # type: ignore[no-untyped-def]
    import make_test_models  # test/models (on sys.path above); imports TensorFlow

    return make_test_models


def _model_base(name: str) -> Path:
    """A generated model (built and cached on first use): TF Serving's TF1
    saved_model_half_plus_three or MobileNetV2."""
    return _generator().ensure_models([name]) / name


def _summary(latencies: list[float]) -> dict[str, float]:
    ordered = sorted(latencies)
    return {
        "rps": len(ordered) / sum(ordered),
        "p50_ms": statistics.median(ordered) * 1e3,
        "p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1e3,
    }


def _throughput(call: Callable[[], object], seconds: float) -> float:
    """Requests/s with ``CLIENTS`` threads calling ``call`` in a loop."""
    for _ in range(2):
        call()
    deadline = time.perf_counter() + seconds
    counts = [0] * CLIENTS

    def client(index: int) -> None:
        while time.perf_counter() < deadline:
            call()
            counts[index] += 1

    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(CLIENTS) as pool:
        list(pool.map(client, range(CLIENTS)))
    return sum(counts) / (time.perf_counter() - start)


def _print(label: str, figures: dict[str, float], baseline: dict[str, float] | None) -> None:
    line = (
        f"{label:<38} {figures['rps']:9.1f} req/s  p50 {figures['p50_ms']:8.3f} ms"
        f"  p99 {figures['p99_ms']:8.3f} ms"
    )
    if baseline:
        line += (
            f"  p50 +{figures['p50_ms'] - baseline['p50_ms']:.3f} ms"
            f"  ({figures['p50_ms'] / baseline['p50_ms']:.2f}x in-process)"
        )
    print(line, flush=True)


def _arrays() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {
        "half_plus_three": np.array([1.0, 2.0, 5.0], dtype=np.float32),
        "mobilenet_v2": rng.random((1, 224, 224, 3), dtype=np.float32),
    }


Workloads = dict[str, tuple[str, np.ndarray]]  # model -> (input alias, input array)


def _in_process_calls(bases: dict[str, Path]) -> tuple[dict[str, Callable[[], object]], Workloads]:
    """``Servable.predict`` on each model in this process; also each model's input alias."""
    import tensorflow as tf
    from sagemaker_tfs.model_server.serving.saved_model_servable import SavedModelServable
    from sagemaker_tfs.model_server.serving.version_dirs import list_versions

    calls = {}
    workloads: Workloads = {}
    for name, array in _arrays().items():
        version, path = max(list_versions(str(bases[name])).items())
        servable = SavedModelServable.load(
            name, version, path, tf.compat.v1.ConfigProto(allow_soft_placement=True)
        )
        (alias,) = servable.signature("").inputs
        workloads[name] = (alias, array)
        calls[name] = functools.partial(servable.predict, "", {alias: array})
    return calls, workloads


def _paired_latencies(
    calls: dict[str, Callable[[], object]], seconds: float
) -> dict[str, list[float]]:
    """Latencies of several calls made in turn, so all see the same background load; each
    pass starts with the next call, so none always follows the same one (an in-process run
    leaves TensorFlow's threads spinning for the call after it)."""
    for call in calls.values():
        for _ in range(3):
            call()
    results: dict[str, list[float]] = {label: [] for label in calls}
    order = list(calls.items())
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        order.append(order.pop(0))
        for label, call in order:
            start = time.perf_counter()
            call()
            results[label].append(time.perf_counter() - start)
    return results


def _start(work: Path, bases: dict[str, Path], batching: str | None, tree: str | None = None):  # type: ignore[no-untyped-def]
    suffix = ("batching" if batching is not None else "plain") + ("_base" if tree else "")
    config = work / f"models_{suffix}.config"
    config.write_text(
        "model_config_list {\n"
        + "".join(
            f"  config {{ name: '{name}' base_path: '{base}' model_platform: 'tensorflow' }}\n"
            for name, base in bases.items()
        )
        + "}\n"
    )
    args = [f"--model_config_file={config}", "--max_num_load_retries=0"]
    if batching is not None:
        parameters = work / f"batching_{suffix}.config"
        parameters.write_text(batching)
        args += ["--enable_batching", f"--batching_parameters_file={parameters}"]
    env = {"PYTHONPATH": str(Path(tree) / "container")} if tree else None
    handle = launch_model_server(tuple(args), work / f"server_{suffix}.log", env)
    wait_until_ready(handle, timeout=300)
    return handle


def _grpc_call(stub, workloads: Workloads, name: str) -> Callable[[], object]:  # type: ignore[no-untyped-def]
    import tensorflow as tf

    alias, array = workloads[name]
    request = predict_request(name, {alias: tf.make_tensor_proto(array)})
    return lambda: stub.Predict(request)


def _rest_call(session, url: str, workloads: Workloads, name: str) -> Callable[[], object]:  # type: ignore[no-untyped-def]
    _, array = workloads[name]
    body = json.dumps({"instances": array.tolist()}).encode()
    target = f"{url}/v1/models/{name}:predict"

    def call() -> object:
        response = session.post(target, data=body)
        response.raise_for_status()
        return response.content

    return call


def _single_client(plain, bases, workloads, local_calls, seconds: float) -> None:  # type: ignore[no-untyped-def]
    """One client: in-process, gRPC and REST calls interleaved, per model (and per tree)."""
    import requests

    session = requests.Session()
    for name in bases:
        calls = {"in-process": local_calls[name]}
        for tree, server in plain.items():
            stub = prediction_stub(server.grpc_target)
            calls[f"gRPC{tree}"] = _grpc_call(stub, workloads, name)
            calls[f"REST{tree}"] = _rest_call(session, server.rest_url, workloads, name)
        latencies = _paired_latencies(calls, seconds)
        baseline = _summary(latencies["in-process"])
        _print(f"{name} in-process", baseline, None)
        for label in list(calls)[1:]:
            _print(f"{name} {label} (1 client)", _summary(latencies[label]), baseline)


def _batching_rounds(servers, bases, workloads, seconds: float, rounds: int) -> None:  # type: ignore[no-untyped-def]
    """Alternate off/on measurements (each tree's) so all see the same background load;
    median ratios, on / off and (with a base tree) each against the base's."""
    for name in bases:
        calls = {
            label: _grpc_call(prediction_stub(server.grpc_target), workloads, name)
            for label, server in servers.items()
        }
        rates: dict[str, list[float]] = {label: [] for label in calls}
        for round_index in range(rounds):
            labels = list(calls)  # each round starts with the next one: no order favoured
            for label in labels[round_index % len(labels) :] + labels[: round_index % len(labels)]:
                rates[label].append(_throughput(calls[label], seconds))
            figures = ", ".join(f"{label} {rate[-1]:8.1f} req/s" for label, rate in rates.items())
            print(f"{name} gRPC {CLIENTS} clients, round {round_index + 1}: {figures}", flush=True)
        for top, bottom in (("on", "off"), ("on", "on base"), ("off", "off base")):
            if bottom in rates:
                ratio = statistics.median(
                    a / b for a, b in zip(rates[top], rates[bottom], strict=True)
                )
                print(f"{name}: {top} / {bottom} ({CLIENTS} clients) = {ratio:.2f}x", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="duration of each figure")
    parser.add_argument("--rounds", type=int, default=3, help="batching off/on alternations")
    parser.add_argument("--batch-threads", type=int, default=1, help="num_batch_threads")
    parser.add_argument(
        "--batch-timeout-micros", type=int, default=20000, help="batch_timeout_micros"
    )
    parser.add_argument("--base-tree", help="also measure the code of DIR/container")
    args = parser.parse_args()
    bases = {
        "half_plus_three": _model_base("saved_model_half_plus_three"),
        "mobilenet_v2": _model_base("mobilenet_v2"),
    }
    print(f"CPUs: {os.cpu_count()}; {args.seconds:.0f} s per figure; {CLIENTS} clients", flush=True)
    local_calls, workloads = _in_process_calls(bases)
    with tempfile.TemporaryDirectory() as tmp:
        parameters = BATCHING_TEMPLATE.format(
            clients=CLIENTS, timeout=args.batch_timeout_micros, threads=args.batch_threads
        )
        print("batching parameters:", " ".join(parameters.split()), flush=True)
        servers = {
            "off": _start(Path(tmp), bases, None),
            "on": _start(Path(tmp), bases, parameters),
        }
        if args.base_tree:
            servers["off base"] = _start(Path(tmp), bases, None, args.base_tree)
            servers["on base"] = _start(Path(tmp), bases, parameters, args.base_tree)
        plain = {"": servers["off"]}
        if args.base_tree:
            plain[" (base)"] = servers["off base"]
        try:
            _single_client(plain, bases, workloads, local_calls, args.seconds * 3)
            _batching_rounds(servers, bases, workloads, args.seconds, args.rounds)
        finally:
            for server in servers.values():
                server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
