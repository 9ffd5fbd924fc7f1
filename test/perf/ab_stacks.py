"""A/B of the fast paths between versions of the code: one stack per version, side by side.

Each ``--variant LABEL=DIR`` starts a stack whose processes import ``sagemaker_tfs`` from DIR
(a ``container/`` directory, e.g. of ``git worktree add`` or ``git archive`` of another
commit); the requests of scenarios 1 (MobileNetV2, one JPEG, ``x-npy`` answer) and 2
(detector, 10 JPEGs, 55 MB ``x-npz`` answer) go to every stack and to in-process inference
in turn, in a new random order each round (``bench_fast_paths.interleaved``), so that the
ratios compare versions under the same load. Prints one line of JSON per scenario.

Usage::

    git archive BASE | tar -x -C /tmp/base
    .venv/bin/python test/perf/ab_stacks.py --variant old=/tmp/base/container \\
        --variant new=container --requests 60 --stream-requests 30

The same code with other settings: ``--env LABEL:NAME=VALUE`` sets a variable in that
variant's stack only, e.g. ``--variant gevent=container --variant sync=container
--env sync:SAGEMAKER_GUNICORN_WORKER_CLASS=sync``.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_fast_paths import (  # noqa: E402
    SLOW_ANSWERS,
    Poster,
    decode_rgb,
    image_stream,
    in_process_servable,
    interleaved,
    load_test_models,
    photo_like_jpeg,
    ratio,
    stack_for,
)


def variants(specs: list[str]) -> dict[str, str]:
    """``LABEL=DIR`` -> {label: absolute DIR}, each holding the ``sagemaker_tfs`` package."""
    chosen = {}
    for spec in specs:
        label, _, directory = spec.partition("=")
        path = Path(directory).resolve()
        if not (path / "sagemaker_tfs").is_dir():
            raise SystemExit(f"--variant {spec}: no sagemaker_tfs package in {path}")
        chosen[label] = str(path)
    return chosen


def variant_envs(specs: list[str], labels: dict[str, str]) -> dict[str, dict[str, str]]:
    """``LABEL:NAME=VALUE`` -> {label: {NAME: VALUE}} for the variants' own settings."""
    envs: dict[str, dict[str, str]] = {label: {} for label in labels}
    for spec in specs:
        label, _, setting = spec.partition(":")
        name, sep, value = setting.partition("=")
        if label not in envs or not sep or not name:
            raise SystemExit(f"--env {spec}: expected LABEL:NAME=VALUE with a --variant LABEL")
        envs[label][name] = value
    return envs


def scenario(
    models_root: Path, chosen: dict[str, str], model: str, content_type: str, accept: str,
    body: bytes, in_process, count: int, env: dict[str, str],
    own_envs: dict[str, dict[str, str]],
) -> dict:  # fmt: skip
    """Every variant's stack and in-process inference, interleaved; ratios to in-process."""
    with contextlib.ExitStack() as stacks:
        calls = {"in_process": in_process}
        for label, directory in chosen.items():
            stack_env = {**env, **own_envs[label], "PYTHONPATH": directory}
            stack = stacks.enter_context(stack_for(models_root, [model], env=stack_env))
            calls[label] = functools.partial(Poster(stack, content_type, accept, model), body)
        figures = interleaved(calls, count, warmup=5)
    for label in chosen:
        figures[f"{label}_over_in_process_p50"] = ratio(figures, label, "in_process")
    for figure in figures.values():
        if isinstance(figure, dict):
            figure.pop("samples_ms", None)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--variant", action="append", required=True, help="LABEL=DIR")
    parser.add_argument("--env", action="append", default=[], help="LABEL:NAME=VALUE")
    parser.add_argument("--scenarios", default="1,2")
    parser.add_argument("--requests", type=int, default=60, help="scenario 1 rounds")
    parser.add_argument("--stream-requests", type=int, default=30, help="scenario 2 rounds")
    args = parser.parse_args()
    chosen = variants(args.variant)
    own_envs = variant_envs(args.env, chosen)
    models_root = load_test_models(["mobilenet_v2", "detector"])
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    if "1" in args.scenarios.split(","):
        image = photo_like_jpeg(224, seed=1)
        servable = in_process_servable(models_root, "mobilenet_v2")

        def classify() -> object:
            return servable.predict("serving_default", {"input_1": decode_rgb(image, 224)[None]})

        figures = scenario(models_root, chosen, "mobilenet_v2", "image/jpeg", "application/x-npy",
                           image, classify, args.requests, {}, own_envs)  # fmt: skip
        print(json.dumps({"scenario": 1, **figures}), flush=True)
        servable.close()
    if "2" in args.scenarios.split(","):
        images = [photo_like_jpeg(512, seed=10 + i) for i in range(10)]
        servable = in_process_servable(models_root, "detector")

        def detect() -> object:
            batch = np.stack([decode_rgb(data, 512) for data in images])
            return servable.predict("serving_default", {"images": batch})

        figures = scenario(models_root, chosen, "detector", "application/x-image-stream",
                           "application/x-npz", image_stream(images), detect,
                           args.stream_requests, SLOW_ANSWERS, own_envs)  # fmt: skip
        print(json.dumps({"scenario": 2, **figures}), flush=True)
        servable.close()


if __name__ == "__main__":
    main()
