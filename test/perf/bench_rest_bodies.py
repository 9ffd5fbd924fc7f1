"""The Python model server's REST API alone, in process, on large JSON bodies (issue 53).

Loads ``dtype_echo`` (a string x -> y = x), ``saved_model_half_plus_three`` and
``saved_model_half_plus_two_cpu`` from the test models' cache, then for each shape of
``--shapes`` (``strings``, ``b64``, ``csv_strings``, ``json_lines_strings``: ``text_shapes.py``'s
bodies to ``dtype_echo``, the last two as the service's REST request for them; ``examples``: a
``regress`` body of three-feature examples to half_plus_three's regress signature;
``examples_nan``: the same ending in ``{"x": NaN}``, which the general way reads;
``classify``, ``regress``: ``text_shapes.py``'s to half_plus_two) at ``--mb`` MB answers one
warm-up body, resets the process's
peak RSS (``/proc/self/clear_refs``) and answers the body through ``RestApi.handle``: prints
the seconds and the peak RSS growth over the body.
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

import tensorflow as tf
from sagemaker_tfs.model_server.rest.api import RestApi
from sagemaker_tfs.model_server.serving.saved_model_servable import SavedModelServable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from text_shapes import HALF_PLUS_TWO, SHAPES, Shape, numbers, repeated  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[2]
MODEL = "dtype_echo"
REGRESS_MODEL = "saved_model_half_plus_three"
REGRESS_HEAD = b'{"signature_name": "tensorflow/serving/regress", "examples": ['
SERVICE_CONVERTED = {"csv_strings": "text/csv", "json_lines_strings": "application/jsonlines"}


class Manager:
    def __init__(self, servables: dict[str, SavedModelServable]) -> None:
        self.servables = servables

    def get_servable(self, name: str, version: int | None, label: str | None) -> Any:
        return self.servables[name]


def examples_body(size: int) -> bytes:
    values = numbers(20_000, 4)
    rows = ", ".join(f'{{"x": {x}, "w": "word", "n": [1, 2, 3]}}' for x in values)
    return repeated(REGRESS_HEAD, rows.encode() + b", ", b'{"x": 1.0}', b"]}", size)


def examples_nan_body(size: int) -> bytes:
    """``examples`` whose last example is ``{"x": NaN}``: a body the windows leave to the
    general way (the whole document)."""
    body = examples_body(size)
    return body[: body.rindex(b'{"x": 1.0}')] + b'{"x": NaN}]}'


def rest_body(shape: Shape) -> Callable[[int], bytes]:
    """The shape's body as the model server gets it: CSV and JSON lines as the service's
    REST request for them."""
    kind = SERVICE_CONVERTED.get(shape.name)
    if kind is None:
        return shape.body

    def converted(size: int) -> bytes:
        from sagemaker_tfs.service.codecs import text_codecs

        read = text_codecs.read_body(kind, shape.body(size), text_codecs.ForPredict(None))
        assert isinstance(read, text_codecs.RestRequest)
        return read.joined()

    return converted


def load(cache: Path, name: str) -> SavedModelServable:
    version = sorted(path.name for path in (cache / name).iterdir() if path.name.isdigit())[-1]
    config = tf.compat.v1.ConfigProto()
    return SavedModelServable.load(name, int(version), str(cache / name / version), config)


def status_bytes(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(field)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shapes", default="strings,b64")
    parser.add_argument("--mb", type=float, default=10)
    parser.add_argument("--repeat", type=int, default=1, help="calls timed (their mean)")
    args = parser.parse_args()
    cache = Path(
        os.environ.get("SAGEMAKER_TFS_TEST_MODELS") or REPO_ROOT / "test" / ".models-cache"
    )
    servables = {name: load(cache, name) for name in (MODEL, REGRESS_MODEL, HALF_PLUS_TWO)}
    api = RestApi(Manager(servables))  # type: ignore[arg-type]
    shapes = {shape.name: shape for shape in SHAPES}
    bodies = {name: rest_body(shape) for name, shape in shapes.items()}
    bodies["examples"] = examples_body
    bodies["examples_nan"] = examples_nan_body
    for name in args.shapes.split(","):
        examples = name.startswith("examples")
        model, verb = (REGRESS_MODEL, "regress") if examples else (MODEL, "predict")
        if name in ("classify", "regress"):
            model, verb = HALF_PLUS_TWO, name
        path = f"/v1/models/{model}:{verb}"
        body = bodies[name](int(args.mb * (1 << 20)))
        api.handle("POST", path, bodies[name](1 << 20))  # warm-up: ~1 MB
        gc.collect()
        Path("/proc/self/clear_refs").write_text("5")
        before = status_bytes("VmRSS")
        started, cpu_started = time.perf_counter(), time.process_time()
        for _ in range(args.repeat):
            status, answer = api.handle("POST", path, body)
        seconds = (time.perf_counter() - started) / args.repeat
        cpu = (time.process_time() - cpu_started) / args.repeat  # less moved by other load
        growth = (status_bytes("VmHWM") - before) / len(body)
        assert status == 200, bytes(answer[:300])
        print(f"{name:8} {len(body) / (1 << 20):5.1f} MB {seconds:6.2f} s {cpu:6.2f} cpu s  "
              f"peak RSS growth {growth:5.2f}x the body", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
