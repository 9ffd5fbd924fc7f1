"""The Python model server's REST API alone, in process, on large JSON bodies (issue 53).

Loads ``dtype_echo`` (a string x -> y = x) from the test models' cache, then for each shape
of ``--shapes`` (``strings``, ``b64``: ``text_shapes.py``'s bodies) at ``--mb`` MB answers one
warm-up body, resets the process's peak RSS (``/proc/self/clear_refs``) and answers the
body through ``RestApi.handle``: prints the seconds and the peak RSS growth over the body.
Run it once per tree to compare (``PYTHONPATH=<tree>/container``), alternating, one process
per body (``--shapes`` of one name): a process keeps the heap of its earlier bodies.

Usage: ``PYTHONPATH=container .venv/bin/python test/perf/bench_rest_bodies.py --shapes strings``
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
from pathlib import Path
from typing import Any

import tensorflow as tf
from sagemaker_tfs.model_server.rest.api import RestApi
from sagemaker_tfs.model_server.serving.saved_model_servable import SavedModelServable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from text_shapes import SHAPES  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[2]
MODEL = "dtype_echo"


class Manager:
    def __init__(self, servable: SavedModelServable) -> None:
        self.servable = servable

    def get_servable(self, name: str, version: int | None, label: str | None) -> Any:
        return self.servable


def status_bytes(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(field)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shapes", default="strings,b64")
    parser.add_argument("--mb", type=float, default=10)
    args = parser.parse_args()
    cache = Path(
        os.environ.get("SAGEMAKER_TFS_TEST_MODELS") or REPO_ROOT / "test" / ".models-cache"
    )
    servable = SavedModelServable.load(
        MODEL, 1, str(cache / MODEL / "1"), tf.compat.v1.ConfigProto()
    )
    api = RestApi(Manager(servable))  # type: ignore[arg-type]
    path = f"/v1/models/{MODEL}:predict"
    shapes = {shape.name: shape for shape in SHAPES if shape.model == MODEL}
    for name in args.shapes.split(","):
        body = shapes[name].body(int(args.mb * (1 << 20)))
        api.handle("POST", path, shapes[name].body(1 << 20))  # warm-up: ~1 MB
        gc.collect()
        Path("/proc/self/clear_refs").write_text("5")
        before = status_bytes("VmRSS")
        started = time.perf_counter()
        status, answer = api.handle("POST", path, body)
        seconds = time.perf_counter() - started
        growth = (status_bytes("VmHWM") - before) / len(body)
        assert status == 200, bytes(answer[:300])
        print(f"{name:8} {len(body) / (1 << 20):5.1f} MB {seconds:6.2f} s  peak RSS growth "
              f"{growth:5.2f}x the body", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
