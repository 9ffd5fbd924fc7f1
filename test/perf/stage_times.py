"""Where one built-in request's time goes, stage by stage, across the stack's processes.

Usage: ``.venv/bin/python test/perf/stage_times.py --requests 220``

The client, the service (gunicorn worker) and the model server each write CLOCK_MONOTONIC
timestamps (``time.perf_counter``), which one machine's processes share, so the stages
between processes (nginx, gRPC) are differences of two processes' clocks. The stack's marks
come from ``stage_marks/sitecustomize.py`` (on the stack's PYTHONPATH here only), which wraps
named functions of the product as they are imported: nothing in the product changes.
Requests are sent one at a time to one stack (scenario 1 of bench_fast_paths.py: one 224x224
JPEG, MobileNetV2). Prints each stage's median and mean in ms.
"""

from __future__ import annotations

import argparse
import http.client
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_fast_paths import (
    CUSTOM_ATTRIBUTES,
    load_test_models,
    photo_like_jpeg,
    stack_for,
)  # noqa: E402

# (stage, where it starts, where it ends) as "process.mark": "client" marks are this script's,
# "service" (gunicorn worker) and "model_server" marks those of stage_marks/sitecustomize.py.
STAGE_MARKS = Path(__file__).resolve().parent / "stage_marks"
STAGES = (
    ("client -> falcon handler (nginx)", "client.sent", "service.handler_start"),
    ("falcon handler -> fast path", "service.handler_start", "service.fast_path_start"),
    ("JPEG decoding, signature lookup", "service.fast_path_start", "service.decoded"),
    ("Predict request encoded", "service.decoded", "service.request_encoded"),
    ("gRPC call -> model server's handler", "service.request_encoded", "model_server.server_entry"),
    ("model server: request decoded", "model_server.server_entry", "model_server.session_start"),
    ("model server: TensorFlow session", "model_server.session_start", "model_server.session_end"),
    ("model server: answer encoded", "model_server.session_end", "model_server.server_exit"),
    ("-> answer received by the service", "model_server.server_exit", "service.answer_received"),
    ("answer decoded", "service.answer_received", "service.answer_decoded"),
    ("answer encoded (Accept)", "service.answer_decoded", "service.answer_encoded"),
    ("handed to gunicorn", "service.answer_encoded", "service.answer_handed_to_gunicorn"),
    ("gunicorn -> client (nginx)", "service.answer_handed_to_gunicorn", "client.received"),
    ("TOTAL at the client", "client.sent", "client.received"),
)


def at(row: dict[str, dict[str, float]], where: str) -> float:
    process, mark = where.split(".")
    return row[process][mark]


def read_log(path: Path) -> list[dict[str, float]]:
    rows = []
    for line in path.read_text().splitlines():
        rows.append({k: float(v) for k, v in (pair.split("=") for pair in line.split())})
    return rows


def send_requests(port: int, accept: str, count: int) -> list[dict[str, float]]:
    image = photo_like_jpeg(224, seed=1)
    headers = {"Content-Type": "image/jpeg", "Accept": accept,
               CUSTOM_ATTRIBUTES: "tfs-model-name=mobilenet_v2"}  # fmt: skip
    connection = http.client.HTTPConnection("127.0.0.1", port)
    rows = []
    for _ in range(count):
        sent = time.perf_counter()
        connection.request("POST", "/invocations", body=image, headers=headers)
        response = connection.getresponse()
        body = response.read()
        rows.append({"sent": sent, "received": time.perf_counter()})
        if response.status != 200:
            raise RuntimeError(f"{response.status}: {body[:300]!r}")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=220)
    parser.add_argument("--skip", type=int, default=20, help="first requests left out")
    parser.add_argument("--accept", default="application/x-npy")
    parser.add_argument("--env", action="append", default=[], help="NAME=VALUE for the stack")
    args = parser.parse_args()
    models_root = load_test_models(["mobilenet_v2"])
    logs = Path(tempfile.mkdtemp(prefix="stage-times-"))
    logs.chmod(0o777)  # the service may run as another user
    python_path = os.pathsep.join(filter(None, [str(STAGE_MARKS), os.environ.get("PYTHONPATH")]))
    env = dict(pair.split("=", 1) for pair in args.env) | {
        "STAGE_TIMES_DIR": str(logs),
        "PYTHONPATH": python_path,
    }
    with stack_for(models_root, ["mobilenet_v2"], env=env) as stack:
        client = send_requests(stack.port, args.accept, args.requests)
    by_process = {
        "client": client,
        "service": read_log(logs / "service.log"),
        "model_server": read_log(logs / "model_server.log"),
    }
    if not len(by_process["service"]) == len(by_process["model_server"]) == len(client):
        raise SystemExit("not one line per request in each log: see stage_marks/sitecustomize.py")
    rows = [
        {process: marks[i] for process, marks in by_process.items()}
        for i in range(args.skip, len(client))
    ]
    print(f"{'stage':45s} {'p50 ms':>8s} {'mean ms':>8s}")
    for name, start, end in STAGES:
        spans = [1000 * (at(row, end) - at(row, start)) for row in rows]
        print(f"{name:45s} {statistics.median(spans):8.3f} {statistics.mean(spans):8.3f}")


if __name__ == "__main__":
    main()
