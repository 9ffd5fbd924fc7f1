"""What TF Serving's metrics cost the Python model server per request (prints figures).

In one run: the bookkeeping of one gRPC Predict (``METRICS.request`` + ``METRICS.runtime``,
a counter and two histograms) timed in-process, and the p50 of gRPC Predict on
half_plus_three against a real ``sagemaker-tfs model-server`` (which records the same
metrics), so the share of the request the metrics take is measured on the same machine
state. The model server always records them, as TF Serving does; the endpoint only exports.

Usage: ``.venv/bin/python test/perf/bench_model_server_metrics.py [--requests 2000]``
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT / "test"))
sys.path.insert(0, str(REPO_ROOT / "test" / "integration" / "model_server"))

from grpc_helpers import float_tensor, predict_request, prediction_stub  # noqa: E402
from model_server_process import launch_model_server, stop_server, wait_until_ready  # noqa: E402
from sagemaker_tfs.model_server.monitoring import ServingMetrics  # noqa: E402

MODEL = REPO_ROOT / "test" / "resources" / "models" / "half_plus_three"


def bookkeeping_micros(count: int) -> float:
    metrics = ServingMetrics()
    started = time.perf_counter()
    for _ in range(count):
        with metrics.request("GRPC", "Predict") as record:
            record.model_name = "half_plus_three"
            with metrics.runtime("half_plus_three", "Predict"):
                pass
    return (time.perf_counter() - started) / count * 1e6


def grpc_p50_ms(count: int) -> float:
    with tempfile.TemporaryDirectory() as work:
        handle = launch_model_server(
            ("--model_name=half_plus_three", f"--model_base_path={MODEL}"),
            Path(work) / "server.log",
        )
        try:
            wait_until_ready(handle)
            stub = prediction_stub(handle.grpc_target)
            request = predict_request("half_plus_three", {"x": float_tensor([1.0, 2.0])})
            for _ in range(100):
                stub.Predict(request, timeout=30)
            times = []
            for _ in range(count):
                started = time.perf_counter()
                stub.Predict(request, timeout=30)
                times.append(time.perf_counter() - started)
        finally:
            stop_server(handle)
    return statistics.median(times) * 1e3


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    args = parser.parse_args()
    p50 = grpc_p50_ms(args.requests)
    cost = statistics.median(bookkeeping_micros(args.requests) for _ in range(5))
    print(f"gRPC Predict half_plus_three p50: {p50:.3f} ms ({args.requests} requests)")
    print(f"metrics bookkeeping per request: {cost:.1f} us = {cost / 10 / p50:.2f}% of the p50")
    return 0


if __name__ == "__main__":
    sys.exit(main())
