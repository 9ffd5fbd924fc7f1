"""The service's reading of a JSON body (``text_codecs.read_body``) against the REST path's
(``text_rest.convert``, then the model server's JSON reader and Predict's request reader), in
process, on the shapes issue 53's one-implementation part moved onto the arrays path: inputs
of mixed dtypes (rows and columns), uint64, and a null at the end of a float body (refused).

Each round runs every (shape, way) once, in a new random order: seconds of a plain run, then
the peak of Python's allocations (``tracemalloc``) over the body in a second run.

Usage::

    .venv/bin/python test/perf/bench_text_read.py --mb 10 --rounds 3
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import time
import tracemalloc
from collections.abc import Callable

import numpy as np
from sagemaker_tfs.model_server.errors import ServingError
from sagemaker_tfs.model_server.rest.json_reader import parse_json_object
from sagemaker_tfs.model_server.rest.predict_json import parse_predict_request
from sagemaker_tfs.model_server.serving.signatures import GraphTensor, ServableSignature
from sagemaker_tfs.service.codecs.text.text_rest import convert
from sagemaker_tfs.service.codecs.text_codecs import ForPredict, read_body
from sagemaker_tfs.wire import tensors
from sagemaker_tfs.wire.errors import HttpError
from sagemaker_tfs.wire.signatures import Signature, TensorSpec

JSON = "application/json"
F32, I64, U64 = (tensors.tf_dtype(np.dtype(d)) for d in (np.float32, np.int64, np.uint64))


def shapes(mb: int) -> dict[str, tuple[bytes, dict[str, int]]]:
    rng = np.random.default_rng(7)
    count = mb * (1 << 20) // 16
    floats = ", ".join(f"{value:.3f}" for value in rng.uniform(-1, 1, count))
    ints = ", ".join(str(value) for value in rng.integers(-999, 999, count))
    rows = ", ".join(
        f'{{"a": {a:.3f}, "b": {b}}}'
        for a, b in zip(
            rng.uniform(-1, 1, count // 2), rng.integers(-999, 999, count // 2), strict=True
        )
    )
    big = ", ".join(str(value) for value in rng.integers(0, 2**63, count, dtype=np.uint64) * 2)
    mixed = {"a": F32, "b": I64}
    return {
        "mixed columns": (f'{{"inputs": {{"a": [{floats}], "b": [{ints}]}}}}'.encode(), mixed),
        "mixed rows": (f'{{"instances": [{rows}]}}'.encode(), mixed),
        "uint64": (f'{{"instances": [{big}]}}'.encode(), {"x": U64}),
        "null at the end": (f'{{"instances": [{floats}, null]}}'.encode(), {"x": F32}),
    }  # fmt: skip


def family(body: bytes, dtypes: dict[str, int]) -> object:
    specs = {name: TensorSpec(name, dtype, None) for name, dtype in dtypes.items()}
    signature = Signature("serving_default", "", specs, {})
    return read_body(JSON, body, ForPredict({"serving_default": signature}))


def rest_path(body: bytes, dtypes: dict[str, int]) -> object:
    inputs = {name: GraphTensor(f"{name}:0", dtype, None) for name, dtype in dtypes.items()}
    signature = ServableSignature("serving_default", "tensorflow/serving/predict", inputs, {})
    try:
        return parse_predict_request(parse_json_object(convert(JSON, body).encode()), signature)
    except (HttpError, ServingError) as error:
        return str(error)


def measure(way: Callable[[bytes, dict[str, int]], object], body: bytes,
            dtypes: dict[str, int]) -> tuple[float, float]:  # fmt: skip
    gc.collect()
    started = time.perf_counter()
    way(body, dtypes)
    seconds = time.perf_counter() - started
    gc.collect()
    tracemalloc.start()
    way(body, dtypes)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return seconds, peak / len(body)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    bodies = shapes(args.mb)
    ways = {"family": family, "REST path": rest_path}
    results: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for _ in range(args.rounds):
        runs = [(shape, way) for shape in bodies for way in ways]
        random.shuffle(runs)
        for shape, way in runs:
            body, dtypes = bodies[shape]
            results.setdefault((shape, way), []).append(measure(ways[way], body, dtypes))
    for (shape, way), runs in sorted(results.items()):
        seconds = statistics.median(run[0] for run in runs)
        peak = max(run[1] for run in runs)
        size = len(bodies[shape][0]) / (1 << 20)
        print(f"{shape:16} {way:9} {size:5.1f} MB  {seconds:6.2f} s (median of {len(runs)})  "
              f"peak allocations {peak:4.1f}x the body")  # fmt: skip


if __name__ == "__main__":
    main()
