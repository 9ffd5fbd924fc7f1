"""Benchmark of the fast paths against in-process inference and the seeds' handlers (issue 5).

Starts ``sagemaker-tfs serve`` on this machine once per configuration (one at a time) and runs:

1. MobileNetV2 224x224, one JPEG per request, sequential: p50/p95 of the built-in
   ``image/jpeg`` path (JSON and NumPy answers), seed 001's REST handler, seed 001's gRPC handler,
   and in-process decode + predict. Goals: built-in p50 <= 1.15x in-process, >= 3x faster than
   the REST+JSON handler.
2. Detector with three large outputs, 10 JPEGs of 512x512 in one ``application/x-image-stream``
   request: JSON vs NumPy (``application/x-npz``: three outputs) answers, seed 000's handler,
   in-process. Goals: NumPy >= 10x faster than JSON, <= 1.3x in-process.
3. JPEG-bytes model under 64 concurrent clients, batching off and on: images/s and the ratio to
   in-process batched inference. Goal: >= 0.8x in-process with batching.
4. Memory: service and model server RSS before and after 5,000 requests.

In-process inference uses the model server's own ``Servable`` (the same TF session the server
runs), in this process. A scenario's in-process and stack figures are taken interleaved
(request by request in 1 and 2, alternating rounds in 3), so that a ratio compares runs under
the same conditions. Prints a table, then one line of JSON with every figure.

Usage: ``.venv/bin/python test/perf/bench_fast_paths.py [--requests 100] [--scenarios 1,2,3,4]``
(see ``--help``; small counts for trial runs, the defaults for the real run on a quiet machine).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import functools
import io
import itertools
import json
import os
import random
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import requests
from PIL import Image

# TF in this process runs like the stack's model server (the supervisor sets OMP_NUM_THREADS=1).
os.environ.setdefault("OMP_NUM_THREADS", "1")
REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = REPO_ROOT / "test" / "examples"
sys.path.insert(0, str(REPO_ROOT / "test"))  # local_ports, shared by the test helpers
sys.path.insert(0, str(REPO_ROOT / "test" / "integration" / "stack"))
sys.path.insert(0, str(REPO_ROOT / "test" / "models"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from whole_stack import (  # noqa: E402
    RunningStack,
    StackError,
    cmdline,
    descendant_pids,
    running_stack,
)

CUSTOM_ATTRIBUTES = "X-Amzn-SageMaker-Custom-Attributes"
START_ATTEMPTS = 3  # free ports are picked, then bound: other processes can take one between
# 10 detector answers of 55 MB as JSON can take longer than gunicorn's default 30 s
# scenario 2's path that asks for one of the detector's three outputs
DETECTOR_FILTER = ",tfs-output-filter=output_0"
SLOW_ANSWERS = {"SAGEMAKER_GUNICORN_TIMEOUT_SECONDS": "300"}
ROUND_ORDER_SEED = 14  # interleaved(): the same sequence of orders in every run


# ---------------------------------------------------------------- helpers


def load_test_models(names: list[str]) -> Path:
    import make_test_models  # test/models (on sys.path above); imports TensorFlow

    return make_test_models.ensure_models(names)


def photo_like_jpeg(size: int, seed: int) -> bytes:
    """A smooth image with some noise (compresses like a photo, unlike pure noise)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:size, 0:size] / size
    base = np.stack([x, y, (x + y) / 2], axis=-1) * 200
    pixels = np.clip(base + rng.normal(0, 12, base.shape), 0, 255).astype(np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="JPEG", quality=90)
    return buffer.getvalue()


def image_stream(images: list[bytes]) -> bytes:
    return b"".join(len(image).to_bytes(4, "big") + image for image in images)


def decode_rgb(data: bytes, size: int) -> np.ndarray:
    image = Image.open(io.BytesIO(data)).convert("RGB")
    if image.size != (size, size):
        image = image.resize((size, size), Image.Resampling.BILINEAR)
    return np.asarray(image, dtype=np.float32)


def interleaved(calls: dict[str, Callable[[], object]], count: int, warmup: int) -> dict:
    """Latency summaries of several paths timed in turn, request by request, so that all see
    the same machine (these machines drift by 10-20% within minutes). Each round takes the
    paths in a new random order (seeded), so that each path follows each other path about
    equally often: a call right after an in-process run is 2-4 ms slower here (TensorFlow's
    threads in this process are still spinning on one of the two cores). A fixed order, or
    one rotated each round, charged that to whichever path comes after the in-process one.
    A path that fails is reported with its error and left out of the following rounds.
    Each summary keeps its latencies (``samples_ms``) for the charts."""
    latencies: dict[str, list[float]] = {label: [] for label in calls}
    failed: dict[str, dict] = {}
    labels = list(calls)
    order = random.Random(ROUND_ORDER_SEED)
    for index in range(warmup + count):
        for label in order.sample(labels, len(labels)):
            if label in failed:
                continue
            start = time.perf_counter()
            try:
                calls[label]()
            except RuntimeError as error:
                print(f"path {label} failed: {error}", file=sys.stderr)
                failed[label] = {"error": str(error)[:300]}
                continue
            if index >= warmup:
                latencies[label].append(time.perf_counter() - start)
    return {
        label: failed.get(label) or latency_summary(values, keep=True)
        for label, values in latencies.items()
    }


def latency_summary(latencies: list[float], keep: bool = False) -> dict:
    values = np.array(latencies) * 1e3
    summary: dict = {
        "p50_ms": round(float(np.percentile(values, 50)), 2),
        "p95_ms": round(float(np.percentile(values, 95)), 2),
        "mean_ms": round(float(values.mean()), 2),
        "n": len(latencies),
    }
    if keep:
        summary["samples_ms"] = [round(float(value), 2) for value in values]
    return summary


def ratio(figures: dict, numerator: str, denominator: str, key: str = "p50_ms") -> float | None:
    """``figures[numerator][key] / figures[denominator][key]``; None if either path failed."""
    top, bottom = figures[numerator].get(key), figures[denominator].get(key)
    return round(top / bottom, 3) if top and bottom else None


@contextlib.contextmanager
def stack_for(
    models_root: Path, models: list[str], example: str | None = None, env: dict | None = None
) -> Iterator[RunningStack]:
    """A stack serving ``models`` (and an example's code/), stopped on exit."""
    temp = Path(tempfile.mkdtemp(prefix="bench-fast-paths-"))
    try:
        model_dir = temp / "model"
        model_dir.mkdir()
        for name in models:
            (model_dir / name).symlink_to(models_root / name, target_is_directory=True)
        if example:
            shutil.copytree(EXAMPLES / example / "code", model_dir / "code")
        for attempt in itertools.count(1):
            work_dir = temp / f"work{attempt}"
            work_dir.mkdir()
            try:
                context = running_stack(model_dir, work_dir, env=env)
                stack = context.__enter__()
                break
            except StackError as error:  # e.g. a free port taken by another process meanwhile
                if attempt == START_ATTEMPTS:
                    raise
                print(f"stack did not start, trying again: {str(error)[-200:]}", file=sys.stderr)
        try:
            # The standby model server imports TensorFlow after /ping answers: seconds of CPU
            # that would land in the first measured rounds (and slow the stack more than the
            # in-process calls), so nothing is measured until it waits.
            stack.wait_until_settled()
            yield stack
        finally:
            context.__exit__(None, None, None)
    finally:
        shutil.rmtree(temp, ignore_errors=True)


class Poster:
    """POSTs to a stack with a kept-alive session, checking every answer is 200."""

    def __init__(self, stack: RunningStack, content_type: str, accept: str, model: str,
                 attributes: str = "") -> None:  # fmt: skip
        self.url = stack.url + "/invocations"
        self.headers = {"Content-Type": content_type, "Accept": accept, CUSTOM_ATTRIBUTES:
                        f"tfs-model-name={model}{attributes}"}  # fmt: skip
        self._local = threading.local()

    def __call__(self, body: bytes) -> bytes:
        session = getattr(self._local, "session", None)
        if session is None:
            session = self._local.session = requests.Session()
        # One read of the whole body, as botocore's StreamingBody.read() does for SageMaker
        # clients (requests' .content would read it in 10 KB pieces: +50 ms on 55 MB).
        response = session.post(self.url, data=body, headers=self.headers, timeout=120, stream=True)
        content = response.raw.read(decode_content=True)
        if response.status_code != 200:
            raise RuntimeError(f"{response.status_code}: {content[:500]!r}")
        return content


def cycling(post: Poster, bodies: list[bytes]) -> Callable[[], bytes]:
    """A call that posts the next body of ``bodies`` each time (thread-safe under the GIL)."""
    counter = itertools.count()
    return lambda: post(bodies[next(counter) % len(bodies)])


def in_process_servable(models_root: Path, name: str):  # type: ignore[no-untyped-def]
    import tensorflow as tf
    from sagemaker_tfs.model_server.serving.saved_model_servable import SavedModelServable

    return SavedModelServable.load(
        name, 1, str(models_root / name / "1"), tf.compat.v1.ConfigProto(allow_soft_placement=True)
    )


def built_in_calls(
    stack: RunningStack, model: str, content_type: str, body: bytes, accepts: dict[str, str]
) -> dict[str, Callable[[], bytes]]:
    """One call per label: ``body`` posted to the built-in path with that label's Accept."""
    return {
        label: functools.partial(Poster(stack, content_type, accept, model), body)
        for label, accept in accepts.items()
    }


# ---------------------------------------------------------------- scenarios


def scenario_classification(args: argparse.Namespace, models_root: Path) -> dict:
    """Scenario 1; the seed handlers' stacks run beside the built-in one, all interleaved."""
    image = photo_like_jpeg(224, seed=1)
    servable = in_process_servable(models_root, "mobilenet_v2")

    def in_process() -> object:
        batch = decode_rgb(image, 224)[np.newaxis]
        return servable.predict("serving_default", {"input_1": batch})

    accepts = {"builtin_json": "application/json", "builtin_npy": "application/x-npy"}
    with contextlib.ExitStack() as stacks:
        stack = stacks.enter_context(stack_for(models_root, ["mobilenet_v2"]))
        calls = {"in_process": in_process}
        calls.update(built_in_calls(stack, "mobilenet_v2", "image/jpeg", image, accepts))
        for example in ("seed001_grpc", "seed001_rest"):
            seed_stack = stacks.enter_context(stack_for(models_root, ["mobilenet_v2"], example))
            post = Poster(seed_stack, "application/x-image", "application/json", "mobilenet_v2")
            calls[example] = functools.partial(post, image)
        figures = interleaved(calls, args.requests, args.warmup)
    servable.close()
    figures["builtin_json_over_in_process_p50"] = ratio(figures, "builtin_json", "in_process")
    figures["builtin_npy_over_in_process_p50"] = ratio(figures, "builtin_npy", "in_process")
    figures["seed001_rest_over_builtin_json_p50"] = ratio(figures, "seed001_rest", "builtin_json")
    figures["seed001_grpc_over_builtin_json_p50"] = ratio(figures, "seed001_grpc", "builtin_json")
    return figures


def scenario_detector(args: argparse.Namespace, models_root: Path) -> dict:
    """Scenario 2; seed 000's handler runs in its own stack beside, all interleaved. The
    ``builtin_npz_filtered`` path asks for one output (``tfs-output-filter``)."""
    images = [photo_like_jpeg(512, seed=10 + i) for i in range(10)]
    body = image_stream(images)
    servable = in_process_servable(models_root, "detector")

    def in_process() -> object:
        batch = np.stack([decode_rgb(data, 512) for data in images])
        return servable.predict("serving_default", {"images": batch})

    accepts = {"builtin_npz": "application/x-npz", "builtin_json": "application/json"}
    stream = "application/x-image-stream"
    with contextlib.ExitStack() as stacks:
        served = ["detector", "detector_uint8"]
        stack = stacks.enter_context(stack_for(models_root, served, env=SLOW_ANSWERS))
        calls = {"in_process": in_process}
        calls.update(built_in_calls(stack, "detector", stream, body, accepts))
        filtered = Poster(stack, stream, "application/x-npz", "detector", DETECTOR_FILTER)
        calls["builtin_npz_filtered"] = functools.partial(filtered, body)
        # The same network taking uint8 pixels: the request to the model server is 7.8 MB,
        # not 31 MB of float32.
        pixels = Poster(stack, stream, "application/x-npz", "detector_uint8")
        calls["builtin_npz_uint8"] = functools.partial(pixels, body)
        seed_stack = stacks.enter_context(
            stack_for(models_root, ["detector"], "seed000_image_stream", SLOW_ANSWERS)
        )
        post = Poster(seed_stack, "application/octet-stream", "application/x-npy", "detector")
        calls["seed000_handler"] = functools.partial(post, body)
        figures = interleaved(calls, args.stream_requests, max(2, args.warmup // 2))
    servable.close()
    figures["json_over_npz_p50"] = ratio(figures, "builtin_json", "builtin_npz")
    figures["npz_over_in_process_p50"] = ratio(figures, "builtin_npz", "in_process")
    figures["filtered_npz_over_in_process_p50"] = ratio(
        figures, "builtin_npz_filtered", "in_process"
    )
    figures["uint8_npz_over_in_process_p50"] = ratio(figures, "builtin_npz_uint8", "in_process")
    figures["seed000_over_npz_p50"] = ratio(figures, "seed000_handler", "builtin_npz")
    return figures


def run_concurrently(call: Callable[[], object], total: int, clients: int) -> float:
    """Requests per second of ``total`` calls spread over ``clients`` threads."""
    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        list(pool.map(lambda _: call(), range(clients)))  # warm-up: one each
        start = time.perf_counter()
        list(pool.map(lambda _: call(), range(total)))
        return total / (time.perf_counter() - start)


def scenario_throughput(args: argparse.Namespace, models_root: Path) -> dict:
    """Scenario 3 for each JPEG-bytes model of ``--jpeg-models``: a toy network, where the
    per-request cost of the stack dominates, and MobileNetV2, a realistic cost per image."""
    return {model: throughput_of(args, models_root, model) for model in args.jpeg_models.split(",")}


CPU_ROLES = (("nginx", "nginx"), ("gunicorn", "gunicorn"), ("model server", "model-server"))
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of ``pid`` (all its threads), 0 for a process gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def cpu_by_role(stack: RunningStack) -> dict[str, float]:
    """CPU seconds used so far by the stack's processes, summed per role, and by this process
    (the load generator's client threads, and nothing else while a round runs)."""
    used = {role: 0.0 for role, _ in CPU_ROLES}
    used["supervisor and other"] = cpu_seconds(stack.process.pid)
    for pid in descendant_pids(stack.process.pid):
        command = cmdline(pid)
        role = next((role for role, marker in CPU_ROLES if marker in command), None)
        used[role or "supervisor and other"] += cpu_seconds(pid)
    used["benchmark clients"] = cpu_seconds(os.getpid())
    return used


def cpu_ms_per_request(stack: RunningStack, send: Callable[[], object], total: int,
                       clients: int) -> tuple[float, dict[str, float]]:  # fmt: skip
    """Requests per second of one round, and the CPU milliseconds each request cost, per
    role: where the time of a request goes when the machine's cores are the limit."""
    before = cpu_by_role(stack)
    rate = run_concurrently(send, total, clients)
    after = cpu_by_role(stack)
    requests_sent = total + clients  # run_concurrently's warm-up sends one per client
    per_request = {
        role: round(1000 * (after[role] - before[role]) / requests_sent, 2) for role in after
    }
    return rate, per_request


def throughput_of(args: argparse.Namespace, models_root: Path, model: str) -> dict:
    """In-process batched inference and the stack with batching off and on, in alternating
    rounds (both stacks run side by side, idle when not measured); medians of the rounds.
    The headline figures are those of the largest client count of ``--clients``; ``curve``
    has images/s for each count (the chart)."""
    images = [photo_like_jpeg(224, seed=20 + i) for i in range(16)]
    batch_size = args.max_batch_size
    client_counts = sorted(int(count) for count in args.clients.split(","))
    servable = in_process_servable(models_root, model)
    batch = np.array([images[i % len(images)] for i in range(batch_size)], dtype=object)
    per_round = max(client_counts[-1], args.throughput_requests // args.rounds)
    batches = max(1, per_round // batch_size)

    def in_process_rate() -> float:
        start = time.perf_counter()
        for _ in range(batches):
            servable.predict("serving_default", {"image_bytes": batch})
        return batches * batch_size / (time.perf_counter() - start)

    servable.predict("serving_default", {"image_bytes": batch})
    in_process: list[float] = []
    rates: dict[tuple[str, int], list[float]] = {}
    cpu: dict[str, list[dict[str, float]]] = {}
    with contextlib.ExitStack() as stacks:
        posts, running = {}, {}
        for label, batching in (("batching_off", "false"), ("batching_on", "true")):
            env = {
                "SAGEMAKER_TFS_ENABLE_BATCHING": batching,
                "SAGEMAKER_TFS_MAX_BATCH_SIZE": str(batch_size),
                "SAGEMAKER_TFS_BATCH_TIMEOUT_MICROS": str(args.batch_timeout_micros),
                "SAGEMAKER_GUNICORN_WORKERS": str(args.workers),
            }
            stack = stacks.enter_context(stack_for(models_root, [model], env=env))
            running[label] = stack
            posts[label] = cycling(Poster(stack, "image/jpeg", "application/json", model), images)
        for _ in range(args.rounds):
            in_process.append(in_process_rate())
            for clients in client_counts:
                for label, send in posts.items():
                    rate, used = cpu_ms_per_request(running[label], send, per_round, clients)
                    rates.setdefault((label, clients), []).append(rate)
                    if clients == client_counts[-1]:
                        cpu.setdefault(label, []).append(used)
    servable.close()
    median = {key: round(float(np.median(values)), 1) for key, values in rates.items()}
    most = client_counts[-1]
    figures: dict = {
        "in_process_batched_images_per_s": round(float(np.median(in_process)), 1),
        "batching_off_images_per_s": median[("batching_off", most)],
        "batching_on_images_per_s": median[("batching_on", most)],
    }
    figures["batching_on_over_in_process"] = round(
        figures["batching_on_images_per_s"] / figures["in_process_batched_images_per_s"], 3
    )
    figures["clients"] = most
    figures["rounds"] = args.rounds
    # CPU ms per request by role at the largest client count (medians of the rounds), and
    # in-process: what one image costs TensorFlow in a batch.
    figures["cpu_ms_per_request"] = {
        label: {role: round(float(np.median([r[role] for r in runs])), 2) for role in runs[0]}
        for label, runs in cpu.items()
    }
    figures["in_process_ms_per_image"] = round(1000 / figures["in_process_batched_images_per_s"], 2)
    figures["curve"] = {
        label: {str(clients): median[(label, clients)] for clients in client_counts}
        for label in posts
    }
    return figures


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def stack_processes(root: int) -> dict[str, list[int]]:
    """Gunicorn and model server processes below the supervisor."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                stat = Path(f"/proc/{entry}/stat").read_text()
                children.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(entry))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    groups: dict[str, list[int]] = {"service": [], "model_server": []}
    for pid in found:
        with contextlib.suppress(OSError):
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            if "gunicorn" in command:
                groups["service"].append(pid)
            elif "model-server" in command or "tensorflow_model_server" in command:
                groups["model_server"].append(pid)
    return groups


def scenario_memory(args: argparse.Namespace, models_root: Path) -> dict:
    images = [photo_like_jpeg(224, seed=30 + i) for i in range(16)]
    with stack_for(models_root, ["jpeg_classifier"]) as stack:
        post = Poster(stack, "image/jpeg", "application/x-npz", "jpeg_classifier")
        send = cycling(post, images)
        run_concurrently(send, args.memory_warmup, 8)
        groups = stack_processes(stack.process.pid)
        before = {name: sum(rss_mb(pid) for pid in pids) for name, pids in groups.items()}
        run_concurrently(send, args.memory_requests, 8)
        after = {name: sum(rss_mb(pid) for pid in pids) for name, pids in groups.items()}
    figures: dict = {"requests": args.memory_requests}
    for name in groups:
        figures[f"{name}_rss_before_mb"] = round(before[name], 1)
        figures[f"{name}_rss_after_mb"] = round(after[name], 1)
        figures[f"{name}_growth_mb"] = round(after[name] - before[name], 1)
    return figures


SCENARIOS = {
    "1": ("classification", scenario_classification),
    "2": ("detector", scenario_detector),
    "3": ("throughput", scenario_throughput),
    "4": ("memory", scenario_memory),
}


def print_table(results: dict) -> None:
    print(f"\n{'scenario':<16} {'figure':<40} {'value':>12}")
    for scenario, figures in results.items():
        for name, value in figures.items():
            if isinstance(value, dict) and "error" in value:
                print(f"{scenario:<16} {name:<40} {'FAILED':>12}  {value['error'][:60]}")
            elif isinstance(value, dict) and "p50_ms" in value:
                for key in ("p50_ms", "p95_ms"):
                    print(f"{scenario:<16} {name + ' ' + key:<40} {value[key]:>12}")
            elif isinstance(value, dict):  # scenario 3: figures per model
                for key, figure in value.items():
                    print(f"{scenario:<16} {name + ' ' + key:<40} {figure!s:>12}")
            else:
                print(f"{scenario:<16} {name:<40} {value!s:>12}")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", default="1,2,3,4", help="comma-separated: 1,2,3,4")
    parser.add_argument("--requests", type=int, default=200, help="scenario 1 requests per path")
    parser.add_argument("--warmup", type=int, default=10, help="warm-up requests per path")
    parser.add_argument("--stream-requests", type=int, default=30, help="scenario 2 requests")
    parser.add_argument("--throughput-requests", type=int, default=3000, help="scenario 3 total")
    parser.add_argument(
        "--clients", default="64", help="scenario 3: concurrent clients, comma-separated counts"
    )
    parser.add_argument("--rounds", type=int, default=3, help="scenario 3 alternating rounds")
    parser.add_argument("--max-batch-size", type=int, default=32, help="scenario 3 batching")
    parser.add_argument(
        "--jpeg-models",
        default="jpeg_classifier,jpeg_mobilenet_v2",
        help="scenario 3: comma-separated JPEG-bytes test models",
    )
    parser.add_argument("--batch-timeout-micros", type=int, default=5000)
    parser.add_argument("--workers", type=int, default=1, help="gunicorn workers (gevent)")
    parser.add_argument("--memory-requests", type=int, default=5000, help="scenario 4 requests")
    parser.add_argument("--memory-warmup", type=int, default=500)
    parser.add_argument(
        "--out-dir",
        type=Path,
        help="write fast_paths.json and PNG charts (matplotlib: the perf extra) here",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    jpeg_models = args.jpeg_models.split(",")
    models_root = load_test_models(["mobilenet_v2", "detector", "detector_uint8", *jpeg_models])
    results: dict = {}
    for key in args.scenarios.split(","):
        name, run = SCENARIOS[key.strip()]
        print(f"running scenario {key.strip()}: {name}", file=sys.stderr, flush=True)
        results[name] = run(args, models_root)
    print_table(results)
    document = {"bench": "fast_paths", "args": vars(args), "results": results}
    print(json.dumps(document, default=str))
    if args.out_dir:
        write_results(document, args.out_dir)
    return 0


CHARTS = {
    "classification": ("latency", "Scenario 1: MobileNetV2, one 224x224 JPEG per request"),
    "detector": ("latency", "Scenario 2: detector, 10 JPEGs of 512x512, 55 MB of outputs"),
    "throughput": ("throughput", "Scenario 3: JPEG bytes -> model, batching off and on"),
}


def write_results(document: dict, out_dir: Path) -> None:
    """``fast_paths.json`` and one PNG per scenario that has a chart, in ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "fast_paths.json").write_text(json.dumps(document, indent=1, default=str) + "\n")
    try:
        import charts  # test/perf, beside this script; needs matplotlib
    except ImportError as error:
        print(f"no charts ({error}): pip install -e '.[perf]'", file=sys.stderr)
        return
    for scenario, figures in document["results"].items():
        if scenario not in CHARTS:
            continue
        kind, title = CHARTS[scenario]
        path = out_dir / f"fast_paths_{scenario}.png"
        if kind == "latency":
            charts.latency_chart(figures, title, path)
        else:
            charts.throughput_chart(figures, title, path)
        print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
