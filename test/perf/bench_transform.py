"""Benchmark of ``sagemaker-tfs transform`` against a plain concurrent client.

Two workloads, each against one whole stack (``SAGEMAKER_BATCH=true``) started here:

- ``json``: N JSON lines (``{"instances": [x]}``) through ``half_plus_three``, SplitType
  Line, SingleRecord (one request per line), AssembleWith Line;
- ``jpeg``: M JPEG files through ``jpeg_mobilenet_v2`` (DT_STRING input), SplitType None,
  ``application/x-image`` (the notebook's job).

For each, the same request bodies are sent by a plain client (a thread pool of the same
size over one pooled ``requests.Session``, answers kept in memory) and by the driver (the
real command in a subprocess, ``--endpoint``), interleaved: client, transform, client,
transform, ... (``--rounds``). Records/s of each run and the ratio of the means (transform /
client) are printed. The driver's peak RSS (``VmHWM``) is measured at a quarter of the
input and at the full input: a flat figure means it streams.

Usage: ``.venv/bin/python test/perf/bench_transform.py [--lines 10000] [--images 2000]``
(the test models come from ``$SAGEMAKER_TFS_TEST_MODELS`` or ``test/.models-cache``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests
from requests.adapters import HTTPAdapter

TEST_DIR = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TEST_DIR / "integration" / "stack"))
sys.path.insert(0, str(TEST_DIR / "integration" / "transform"))
sys.path.insert(0, str(TEST_DIR))
from conftest import TestModels  # noqa: E402
from transform_jobs import job_flags, random_jpeg  # noqa: E402
from whole_stack import RunningStack, running_stack  # noqa: E402

# Runs the command and reports its peak RSS (VmHWM: ru_maxrss would include this forked
# benchmark's own, TensorFlow-sized, peak, which Linux keeps across exec).
DRIVER = (
    "import re, sys\n"
    "from sagemaker_tfs.cli import main\n"
    "code = main(sys.argv[1:])\n"
    "status = open('/proc/self/status').read()\n"
    "print('maxrss_kib=' + re.search(r'VmHWM:\\s+(\\d+)', status).group(1), file=sys.stderr)\n"
    "sys.exit(code)\n"
)


def plain_client(url: str, bodies: list[bytes], content_type: str, workers: int) -> float:
    """Records/s of a thread pool posting every body once (answers kept in memory)."""
    session = requests.Session()
    session.mount("http://", HTTPAdapter(pool_maxsize=workers))
    headers = {"Content-Type": content_type, "Accept": "application/json"}

    def post(body: bytes) -> bytes:
        response = session.post(url + "/invocations", data=body, headers=headers, timeout=600)
        assert response.status_code == 200, response.text
        return response.content

    start = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        answers = list(pool.map(post, bodies))
    elapsed = time.perf_counter() - start
    assert len(answers) == len(bodies)
    return len(bodies) / elapsed


def driver(
    url: str, input_dir: Path, output: Path, records: int, options: list[str]
) -> tuple[float, int]:
    """(records/s from the job's own summary, peak RSS in KiB) of one transform run."""
    flags = job_flags(endpoint=url, input=input_dir, output=output, progress="log")
    command = [sys.executable, "-c", DRIVER, "transform", *flags, *options]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise SystemExit(f"transform failed:\n{result.stderr[-3000:]}")
    done = re.search(r"job done: .* (\d+) records in .*, ([\d.]+)s, ", result.stderr)
    rss = re.search(r"maxrss_kib=(\d+)", result.stderr)
    assert done and rss, result.stderr[-2000:]
    assert int(done.group(1)) == records, done.group(0)
    return records / float(done.group(2)), int(rss.group(1))


def compare(
    rounds: int,
    name: str,
    url: str,
    bodies: list[bytes],
    content_type: str,
    workers: int,
    root: Path,
    options: list[str],
) -> None:
    """Interleaved runs over ``root/full`` (every body) and one over ``root/small`` (a quarter)."""
    small, full, small_count = root / "small", root / "full", len(bodies) // 4
    client_rates, driver_rates = [], []
    for round_ in range(rounds):
        client_rates.append(plain_client(url, bodies, content_type, workers))
        rate, full_rss = driver(url, full, root / f"out-{round_}", len(bodies), options)
        driver_rates.append(rate)
    _, small_rss = driver(url, small, root / "out-small", small_count, options)
    client, transform = sum(client_rates) / rounds, sum(driver_rates) / rounds
    print(
        f"{name}: client "
        + " / ".join(f"{r:.1f}" for r in client_rates)
        + " records/s; transform "
        + " / ".join(f"{r:.1f}" for r in driver_rates)
        + f" records/s; ratio transform/client {transform / client:.3f}"
    )
    print(
        f"{name}: driver peak RSS {small_rss / 1024:.0f} MiB at {small_count} records, "
        f"{full_rss / 1024:.0f} MiB at {len(bodies)} records (x{full_rss / small_rss:.2f})"
    )
    sys.stdout.flush()


def json_workload(models: TestModels, root: Path, lines: int, workers: int, rounds: int) -> None:
    records = [json.dumps({"instances": [float(i % 1000)]}) for i in range(lines)]
    for name, count in (("small", lines // 4), ("full", lines)):
        (root / name).mkdir()
        (root / name / "data.jsonl").write_text("\n".join(records[:count]) + "\n")
    options = job_flags(
        content_type="application/json",
        split_type="Line",
        batch_strategy="SingleRecord",
        assemble_with="Line",
        max_concurrent_transforms=workers,
    )
    bodies = [r.encode() + b"\n" for r in records]
    with batch_stack(models, "half_plus_three", root, workers) as stack:
        compare(rounds, "json", stack.url, bodies, "application/json", workers, root, options)


def jpeg_workload(models: TestModels, root: Path, images: int, workers: int, rounds: int) -> None:
    bodies = [random_jpeg(i, 160 + i % 96) for i in range(images)]
    for name, count in (("small", images // 4), ("full", images)):
        (root / name).mkdir()
        for index in range(count):
            (root / name / f"{index:05d}.jpg").write_bytes(bodies[index])
    options = job_flags(content_type="application/x-image", max_concurrent_transforms=workers)
    with batch_stack(models, "jpeg_mobilenet_v2", root, workers) as stack:
        compare(rounds, "jpeg", stack.url, bodies, "application/x-image", workers, root, options)


@contextlib.contextmanager
def batch_stack(models: TestModels, model: str, root: Path, workers: int) -> Iterator[RunningStack]:
    """A whole stack serving ``model`` as SageMaker starts one for a Batch Transform job with
    ``workers`` concurrent transforms (``root/model`` and ``root/work`` its directories)."""
    model_dir = root / "model"
    model_dir.mkdir()
    (model_dir / model).symlink_to(models(model))
    (root / "work").mkdir()
    env = {"SAGEMAKER_BATCH": "true", "SAGEMAKER_MAX_CONCURRENT_TRANSFORMS": str(workers)}
    with running_stack(model_dir, root / "work", env) as stack:
        stack.wait_until_settled()  # the standby's TensorFlow import is not measured
        yield stack


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lines", type=int, default=10_000)
    parser.add_argument("--images", type=int, default=2_000)
    parser.add_argument("--json-concurrency", type=int, default=8)
    parser.add_argument("--jpeg-concurrency", type=int, default=64)  # the notebook's
    parser.add_argument("--only", choices=("json", "jpeg"))
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    cache = os.environ.get("SAGEMAKER_TFS_TEST_MODELS", str(TEST_DIR / ".models-cache"))
    models = TestModels(Path(cache))
    with tempfile.TemporaryDirectory(prefix="bench_transform") as temp:
        if args.only in (None, "json"):
            (Path(temp) / "json").mkdir()
            json_workload(
                models, Path(temp) / "json", args.lines, args.json_concurrency, args.rounds
            )
        if args.only in (None, "jpeg"):
            (Path(temp) / "jpeg").mkdir()
            jpeg_workload(
                models, Path(temp) / "jpeg", args.images, args.jpeg_concurrency, args.rounds
            )


if __name__ == "__main__":
    main()
