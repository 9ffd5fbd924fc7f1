"""Benchmark of the request path in front of the model server: njs vs the Python service.

Starts nginx + njs and the Python service (gunicorn) twice, in front of the recording
stand-in for the model server's REST API (``test/integration/stack/front_end.py``), so the
figures measure the front end only, not TensorFlow:

- ``njs``: JSON ``/invocations`` converted by njs and sent straight to the model server;
- ``python``: the same request through a pass-through ``input_handler``/``output_handler``
  (the Python service posts to ``context.rest_uri``).

Sequential keep-alive requests; prints requests/s of each and their ratio (njs / python).

Usage: ``.venv/bin/python test/perf/bench_request_path.py [--requests 1500]``
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # local_ports
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration" / "stack"))
from front_end import EXAMPLE_MODELS, start_front_end  # noqa: E402

BODY = '{"instances": [1.0, 2.0, 5.0]}'
HEADERS = {"Content-Type": "application/json"}
PASS_THROUGH = (
    "def input_handler(data, context):\n"
    "    return data.read()\n\n\n"
    "def output_handler(response, context):\n"
    "    return response.content, 'application/json'\n"
)


def requests_per_second(url: str, count: int) -> float:
    session = requests.Session()
    for _ in range(50):
        assert session.post(url, data=BODY, headers=HEADERS).status_code == 200
    start = time.perf_counter()
    for _ in range(count):
        session.post(url, data=BODY, headers=HEADERS)
    return count / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=1500)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench_request_path"))
    models = root / "models"
    shutil.copytree(EXAMPLE_MODELS, models)
    (models / "code").mkdir()
    (models / "code" / "inference.py").write_text(PASS_THROUGH)
    (root / "njs").mkdir()
    (root / "python").mkdir()
    njs = start_front_end(root / "njs")
    python = start_front_end(root / "python", model_dir=models)
    try:
        njs_rate = requests_per_second(njs.url + "/invocations", args.requests)
        python_rate = requests_per_second(python.url + "/invocations", args.requests)
    finally:
        njs.stop()
        python.stop()
        shutil.rmtree(root, ignore_errors=True)
    print(f"njs path:    {njs_rate:8.0f} requests/s")
    print(f"python path: {python_rate:8.0f} requests/s")
    print(f"ratio njs/python: {njs_rate / python_rate:.2f}")


if __name__ == "__main__":
    main()
