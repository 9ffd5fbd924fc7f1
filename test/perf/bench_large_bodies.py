"""Memory of the stack's processes for bodies of asynchronous inference's size (issue 26).

Starts ``sagemaker-tfs serve`` on this machine with the bundled ``half_plus_three`` (y = 0.5x
+ 3 on a float vector, so an answer is as large as its request) and sends, one at a time:

- ``application/x-npy`` bodies of 100 MB and 1 GB (answered as ``.npy``): nginx buffers them in
  a file, the service reads them and sends them over the streamed gRPC Predict;
- ``application/x-npz`` bodies of 100 MB and 1000 MB (an ``.npy`` as the one member, stored as
  ``np.savez`` stores it; answered as ``.npz``);
- a 100 MB CSV and a 100 MB JSON body (answered as JSON): over the njs limit, so the service
  reads them into the input's array and sends it over gRPC (``service/routing/text_predict.py``;
  before issue 36 it converted them to JSON text and posted that to the model server's REST
  API, which parsed it again);
- with ``--transform-mb``, a CSV file of that size through ``sagemaker-tfs transform
  --endpoint`` (SplitType Line, MultiRecord, MaxPayloadInMB 100: one request of the whole
  file), the driver's own peak RSS printed too (it runs in a child process that reports it).

Before each request every process's peak RSS is reset (``/proc/PID/clear_refs``); after it,
the RSS before, the peak (``VmHWM``) and both ratios to the body (``x body``: the peak's;
``growth``: the peak less the RSS before) are printed for each. Goal: the Python service's
peak at most 2.5x the body for the binary type. The client's own memory is not counted.

With ``--shapes`` (issue 53), instead: the generated corpus of ``text_shapes.py`` (one value a
line, many columns, integers, negative zeros, JSON instances, named inputs as rows and as
columns, JSON lines, ``signature_name``, strings, b64; ``half_plus_three``, the two-input model
or ``dtype_echo``: strings, b64, CSV strings, JSON lines of strings; classify and regress on TF
Serving's half_plus_two) at each of ``--sizes`` MB, on this tree and, with ``--base-tree DIR``,
on that checkout's ``container`` too, the two in turn for each body (the order swapped each
time): per body, the seconds, seconds per MB, the route the model server saw (gRPC or REST),
issue 53's bound on a process's growth (``bound``: 1 + the bytes of the input and output
tensors over the body, ``Shape.tensors``) and the growth of every process of the stack over
the body. With ``--fresh-worker``, each body goes to a new gunicorn worker (``fresh_worker``),
after a warm-up body of ~1 MB of its shape: a worker that kept the heap of an earlier, larger
body grows less than it uses. With
``--timeline``, the service's RSS over each request too (sampled every 5 ms).

Usage: ``.venv/bin/python test/perf/bench_large_bodies.py [--npy-mb 100,1024] [--npz-mb 100,1000]
[--text-mb 100] [--transform-mb 100]``, or ``... --shapes all --sizes 10,100
[--base-tree /path/to/old/checkout]`` (root, or the stack's owner, may reset peak RSS; Linux
4.0 or later).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import requests

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT / "test"))  # local_ports, shared by the test helpers
sys.path.insert(0, str(REPO_ROOT / "test" / "integration" / "stack"))
from process_memory import (  # noqa: E402
    Peaks,
    measured_peaks,
    reset_peaks,
    stack_processes,
    status_kb,
)
from rest_parity import answered_by  # noqa: E402
from text_shapes import SHAPES, Shape  # noqa: E402
from whole_stack import Stack, running_stack, wait_for  # noqa: E402

MODELS = REPO_ROOT / "test" / "resources" / "models"
MB = 1 << 20
# Bodies as large as the benchmark sends are converted and may run for minutes here.
STACK_ENV = {"SAGEMAKER_TFS_MAX_TEXT_BODY_MB": "1024", "SAGEMAKER_MODEL_SERVER_TIMEOUT": "1200"}


@dataclass(frozen=True)
class Case:
    name: str
    content_type: str
    accept: str
    body: Callable[[], bytes | bytearray]
    check: Callable[[bytes], None]


def npy_count(mb: int) -> int:
    """The float32 values of an .npy of ``mb`` MB, its 128-byte header included."""
    return (mb * MB - 128) // 4


def npy_body(mb: int) -> bytearray:
    """An .npy of float32 (0..4092, repeating) in one buffer: the client holds no second copy."""
    count = npy_count(mb)
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        header, {"descr": "<f4", "fortran_order": False, "shape": (count,)}
    )
    body = bytearray(header.getbuffer())
    offset = len(body)
    body.extend(bytes(count * 4))
    assert offset == 128, offset
    values = np.frombuffer(body, np.float32, count, offset)
    values[:] = np.arange(count) % 4093
    return body


def check_npy_array(y: np.ndarray, mb: int) -> None:
    assert y.shape == (npy_count(mb),), y.shape
    index = np.arange(0, len(y), 9973)
    np.testing.assert_array_equal(y[index], (index % 4093).astype(np.float32) * 0.5 + 3)


def check_npy(mb: int) -> Callable[[bytes], None]:
    def check(answer: bytes) -> None:
        check_npy_array(np.load(io.BytesIO(answer)), mb)

    return check


def npz_body(mb: int) -> bytes:
    """That .npy as the one member ``x.npy`` of an .npz, stored as ``np.savez`` stores it."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("x.npy", npy_body(mb))
    return buffer.getvalue()


def check_npz(mb: int) -> Callable[[bytes], None]:
    def check(answer: bytes) -> None:
        with np.load(io.BytesIO(answer)) as archive:
            (name,) = archive.files
            check_npy_array(archive[name], mb)

    return check


def csv_body(mb: int) -> bytes:
    row = b"0.123456789\n"
    return row * (mb * MB // len(row))


def json_body(mb: int) -> bytes:
    value = b"0.123456789,"
    count = mb * MB // len(value)
    return b'{"instances": [' + value * (count - 1) + b"0.123456789]}"


def check_predictions(answer: bytes) -> None:
    predictions = json.loads(answer)["predictions"]
    expected = float(np.float32(0.123456789) * np.float32(0.5) + np.float32(3))
    assert abs(predictions[0] - expected) < 1e-6 and predictions[-1] == predictions[0]


def cases(npy_sizes: list[int], npz_sizes: list[int], text_mb: int) -> list[Case]:
    found = [
        Case(f"x-npy {mb} MB", "application/x-npy", "application/x-npy",
             lambda mb=mb: npy_body(mb), check_npy(mb))  # fmt: skip
        for mb in npy_sizes
    ]
    found += [
        Case(f"x-npz {mb} MB", "application/x-npz", "application/x-npz",
             lambda mb=mb: npz_body(mb), check_npz(mb))  # fmt: skip
        for mb in npz_sizes
    ]
    if text_mb:
        found += [
            Case(f"CSV {text_mb} MB", "text/csv", "application/json",
                 lambda: csv_body(text_mb), check_predictions),  # fmt: skip
            Case(f"JSON {text_mb} MB", "application/json", "application/json",
                 lambda: json_body(text_mb), check_predictions),  # fmt: skip
        ]
    return found


def run_case(stack: Stack, case: Case) -> None:
    body = case.body()
    processes = stack_processes(stack)
    before = {pid: status_kb(pid, "VmRSS") * 1024 for pid in processes}
    reset_peaks(list(processes))
    started = time.monotonic()
    response = requests.post(
        stack.url + "/invocations",
        data=body,
        headers={"Content-Type": case.content_type, "Accept": case.accept},
        timeout=3600,
    )
    seconds = time.monotonic() - started
    assert response.status_code == 200, response.text[:500]
    case.check(response.content)
    size = len(body)
    del body, response
    print(f"\n{case.name}: {size / MB:.0f} MB, 200 in {seconds:.1f}s")
    print_peaks(processes, before, size)


# The driver in a child process that prints its own peak RSS (KiB) when the job is done: its
# VmHWM, not getrusage's ru_maxrss, which Linux carries over from the parent at exec.
DRIVER = (
    "import re, sys\n"
    "from sagemaker_tfs.cli import main\n"
    "code = main(sys.argv[1:])\n"
    "status = open('/proc/self/status').read()\n"
    "print('driver peak KiB', re.search(r'VmHWM:\\s+(\\d+)', status).group(1))\n"
    "sys.exit(code)\n"
)


def run_transform(stack: Stack, mb: int, root: Path) -> None:
    """``sagemaker-tfs transform --endpoint`` on one CSV file of ``mb`` MB, one request."""
    source = root / "transform-input" / "data.csv"
    source.parent.mkdir()
    source.write_bytes(csv_body(mb))
    size = source.stat().st_size
    processes = stack_processes(stack)
    before = {pid: status_kb(pid, "VmRSS") * 1024 for pid in processes}
    reset_peaks(list(processes))
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-c", DRIVER, "transform", "--endpoint", stack.url,
         "--input", str(source), "--output", str(root / "transform-output"),
         "--content-type", "text/csv", "--accept", "application/json", "--split-type", "Line",
         "--batch-strategy", "MultiRecord", "--max-payload-mb", "100", "--progress", "none"],
        capture_output=True, text=True, timeout=3600,
    )  # fmt: skip
    seconds = time.monotonic() - started
    assert result.returncode == 0, result.stderr[-2000:]
    check_predictions((root / "transform-output" / "data.csv.out").read_bytes())
    driver = int(result.stdout.split("driver peak KiB")[1].split()[0]) * 1024
    print(f"\ntransform, CSV {size / MB:.0f} MB in one request: done in {seconds:.1f}s")
    print_peaks(processes, before, size)
    print(f"  {'sagemaker-tfs transform (driver)':32} {'':>11} {driver / MB:6.0f} MB "
          f"{driver / size:7.2f}")  # fmt: skip


def print_peaks(processes: dict[int, str], before: dict[int, int], size: int) -> None:
    print(f"  {'process':32} {'RSS before':>11} {'peak RSS':>9} {'x body':>7} {'growth':>7}")
    for pid, name in sorted(processes.items(), key=lambda item: item[1]):
        peak = status_kb(pid, "VmHWM") * 1024
        growth = max(0, peak - before[pid])
        print(f"  {name:32} {before[pid] / MB:8.0f} MB {peak / MB:6.0f} MB {peak / size:7.2f} "
              f"{growth / size:7.2f}")  # fmt: skip


# ------------------------------------------------------------------ --shapes (issue 53)

SHOWN = (  # the processes a --shapes line shows, as process_memory names them
    ("gunicorn worker (the service)", "service"),
    ("model server", "model server"),
    ("nginx worker", "nginx"),
    ("gunicorn master", "gunicorn"),
    ("serve (supervisor)", "supervisor"),
    ("standby model server", "standby"),
)
PEAKS = ("service", "model server")


def model_dir(model: str) -> Path:
    """The model under a directory of its own (a single-model stack serves what it finds):
    half_plus_three's resources, or a test model of the cache."""
    if model == "half_plus_three":
        return MODELS
    cache = Path(
        os.environ.get("SAGEMAKER_TFS_TEST_MODELS") or REPO_ROOT / "test" / ".models-cache"
    )
    if not (cache / model).is_dir():
        raise SystemExit(f"no {cache / model}: test/models/make_test_models.py --only {model}")
    root = Path(tempfile.mkdtemp(prefix=f"bench_{model}"))
    shutil.copytree(cache / model, root / model)
    return root


@contextmanager
def stacks_of(model: str, base_tree: Path | None, root: Path) -> Iterator[dict[str, Stack]]:
    """A stack of this tree ("after") and, with ``base_tree``, one of that tree ("before")."""
    trees = {"after": None} if base_tree is None else {"before": base_tree, "after": None}
    with ExitStack() as stacks:
        found = {}
        for label, tree in trees.items():
            env = dict(STACK_ENV)
            if tree is not None:
                env["PYTHONPATH"] = str(tree / "container")
            work = root / f"{model}-{label}"
            work.mkdir()
            found[label] = stacks.enter_context(running_stack(model_dir(model), work, env))
        for stack in found.values():
            stack.wait_until_settled()
        yield found


def run_shapes(shapes: list[Shape], sizes: list[int], base_tree: Path | None,
               fresh: bool = False, timeline: bool = False) -> None:  # fmt: skip
    print(f"{'shape':22} {'MB':>5} {'tree':6} {'s':>6} {'s/MB':>6} {'route':5} {'bound':>5}  "
          "growth x body")  # fmt: skip
    swap = False
    with tempfile.TemporaryDirectory(prefix="bench_shapes") as root:
        for model in dict.fromkeys(shape.model for shape in shapes):
            with stacks_of(model, base_tree, Path(root)) as stacks:
                for mb in sizes:
                    for shape in (s for s in shapes if s.model == model):
                        body = shape.body(mb * MB)
                        order = list(stacks.items())
                        for label, stack in reversed(order) if swap else order:
                            if fresh:
                                fresh_worker(stack, shape)
                            run_shape(stack, shape, body, label, timeline)
                        swap = not swap


WORKER = "gunicorn worker (the service)"
WARM_UP_BYTES = MB  # text_shapes makes at least one block (~1 MB): over the njs limit


def fresh_worker(stack: Stack, shape: Shape) -> None:
    """The stack's gunicorn worker replaced by a new one (TTIN, then TTOU: gunicorn stops its
    oldest worker), then a warm-up body of the shape: a new worker's first read and gRPC call
    fault in code and buffers (~20 MB) that do not grow with the body."""
    processes = stack_processes(stack)
    master = next(pid for pid, name in processes.items() if name == "gunicorn master")
    old = {pid for pid, name in processes.items() if name == WORKER}

    def workers() -> set[int]:
        return {pid for pid, name in stack_processes(stack).items() if name == WORKER}

    os.kill(master, signal.SIGTTIN)
    if not wait_for(lambda: bool(workers() - old), 60):
        raise SystemExit("gunicorn started no new worker")
    os.kill(master, signal.SIGTTOU)
    if not wait_for(lambda: not workers() & old, 60):
        raise SystemExit("gunicorn did not stop its old worker")
    response = requests.post(stack.url + "/invocations", data=shape.body(WARM_UP_BYTES),
                             headers={"Content-Type": shape.content_type, **shape.headers},
                             timeout=600)  # fmt: skip
    assert response.status_code == 200, response.text[:500]


def run_shape(stack: Stack, shape: Shape, body: bytes, label: str,
              timeline: bool = False) -> None:  # fmt: skip
    grpc_before = answered_by(stack, "GRPC")
    worker = next(pid for pid, name in stack_processes(stack).items() if name == WORKER)
    with measured_peaks(stack) as peaks, rss_samples(worker) as samples:
        started = time.monotonic()
        response = requests.post(stack.url + "/invocations", data=body, timeout=3600,
                                 headers={"Content-Type": shape.content_type,
                                          **shape.headers})  # fmt: skip
        seconds = time.monotonic() - started
    assert response.status_code == 200, response.text[:500]
    route = "gRPC" if answered_by(stack, "GRPC") > grpc_before else "REST"
    size = len(body)
    bound = 1 + shape.tensors(body) / size  # issue 53's: the body plus its tensors' bytes
    print(f"{shape.name:22} {size / MB:5.0f} {label:6} {seconds:6.1f} {seconds * MB / size:6.3f} "
          f"{route:5} {bound:5.2f}  {growths(peaks, size)}", flush=True)  # fmt: skip
    if timeline:
        print(f"  service RSS above its start, x body, at each 5% of the request: "
              f"{timeline_text(samples, size)}", flush=True)  # fmt: skip


TIMELINE_SECONDS = 0.005
TIMELINE_POINTS = 20


@contextmanager
def rss_samples(pid: int) -> Iterator[list[int]]:
    """The RSS of ``pid`` (bytes) every ``TIMELINE_SECONDS`` over the ``with`` block, the
    first sample before it."""
    samples = [status_kb(pid, "VmRSS") * 1024]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(TIMELINE_SECONDS):
            samples.append(status_kb(pid, "VmRSS") * 1024)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        yield samples
    finally:
        done.set()
        sampler.join()


def timeline_text(samples: list[int], size: int) -> str:
    """The largest sample of each of ``TIMELINE_POINTS`` equal spans, above the first, over
    ``size``: where in the request the service's memory rises and falls."""
    start, rest = samples[0], samples[1:] or samples
    spans = np.array_split(np.array(rest), min(TIMELINE_POINTS, len(rest)))
    return " ".join(f"{(span.max() - start) / size:.2f}" for span in spans)


def growths(peaks: Peaks, size: int) -> str:
    """Each process's growth over the body and, for the service and the model server, its
    peak (a worker that kept the heap of an earlier request grows less than it uses)."""
    by_name: dict[str, tuple[float, float]] = {}
    for pid, name in peaks.names.items():
        growth, peak = peaks.growth(pid) / size, peaks.peak[pid] / size
        by_name[name] = max(by_name.get(name, (0.0, 0.0)), (growth, peak))
    parts = []
    for name, short in SHOWN:
        if name in by_name:
            growth, peak = by_name[name]
            parts.append(
                f"{short} {growth:.2f}" + (f" (peak {peak:.2f})" if short in PEAKS else "")
            )
    return "  ".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shapes", default="", help="text shapes (names or 'all'; issue 53)")
    parser.add_argument("--sizes", default="10,100", help="--shapes: body sizes, MB")
    parser.add_argument("--base-tree", type=Path, help="--shapes: a checkout to compare with")
    parser.add_argument(
        "--fresh-worker", action="store_true", help="--shapes: each body to a new worker"
    )
    parser.add_argument(
        "--timeline", action="store_true", help="--shapes: the service's RSS over each request"
    )
    parser.add_argument("--npy-mb", default="100,1024", help="x-npy body sizes, MB")
    parser.add_argument("--npz-mb", default="100,1000", help="x-npz body sizes, MB (empty: none)")
    parser.add_argument("--text-mb", type=int, default=100, help="CSV and JSON size (0: none)")
    parser.add_argument(
        "--transform-mb", type=int, default=0, help="CSV file through the transform driver"
    )
    args = parser.parse_args()
    if args.shapes:
        shapes = [s for s in SHAPES if args.shapes == "all" or s.name in args.shapes.split(",")]
        sizes = [int(size) for size in args.sizes.split(",") if size]
        run_shapes(shapes, sizes, args.base_tree, args.fresh_worker, args.timeline)
        return
    npy_sizes = [int(size) for size in args.npy_mb.split(",") if size]
    npz_sizes = [int(size) for size in args.npz_mb.split(",") if size]
    with (
        tempfile.TemporaryDirectory(prefix="bench_large_bodies") as root,
        running_stack(MODELS, Path(root), STACK_ENV) as stack,
    ):
        stack.wait_until_settled()
        for case in cases(npy_sizes, npz_sizes, args.text_mb):
            run_case(stack, case)
        if args.transform_mb:
            run_transform(stack, args.transform_mb, Path(root))


if __name__ == "__main__":
    main()
