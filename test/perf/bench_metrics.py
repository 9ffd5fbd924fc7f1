"""What the metrics cost (issue 27): the hot paths with ``SAGEMAKER_TFS_METRICS`` on and off,
and the time of one scrape of a multi-model endpoint with many models loaded.

1. Small JSON (``half_plus_three``, ``{"instances": [1.0, 2.0, 5.0]}``, converted in njs) and
2. one 224x224 JPEG for MobileNetV2 (the service's fast path, ``.npy`` answer): two stacks,
   metrics on and off, side by side, the requests interleaved (``bench_fast_paths.interleaved``:
   each round takes the stacks in a new random order). Goal: p50 at most 2% more with metrics.
3. A multi-model endpoint with ``--models`` models loaded (one shared model server, the
   multi-model default), each invoked once: ``--scrapes`` scrapes of ``/metrics``, each
   followed by a request to the model server's own metrics endpoint (the text the scrape
   passes through, made by the model server), and the time to relabel that text. Goal: a
   scrape under 50 ms.

Usage: ``.venv/bin/python test/perf/bench_metrics.py [--requests 400] [--image-requests 150]
[--models 50] [--scrapes 40] [--scenarios 1,2,3] [--aa]``. Prints one line of JSON per
scenario; ``--aa`` adds a second stack without metrics, to show the noise of the figures.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_fast_paths import (  # noqa: E402
    REPO_ROOT,
    Poster,
    cpu_by_role,
    interleaved,
    latency_summary,
    load_test_models,
    photo_like_jpeg,
    stack_for,
)
from sagemaker_tfs.stack_config import StackConfig  # noqa: E402
from sagemaker_tfs.supervisor.metrics.model_servers import (  # noqa: E402
    Families,
    MonitoredServer,
    fetch,
)
from sagemaker_tfs.supervisor.model_servers.command_lines import (
    MONITORING_PATH,
)  # noqa: E402
from whole_stack import RunningStack, running_stack  # noqa: E402

SMALL_JSON = b'{"instances": [1.0, 2.0, 5.0]}'
METRICS_OFF = {"SAGEMAKER_TFS_METRICS": "false"}


def on_off(models_root: Path, model: str, content_type: str, accept: str, body: bytes,
           count: int, same_twice: bool, cpu_count: int) -> dict:  # fmt: skip
    """The same requests to a stack with metrics and one without, interleaved; with
    ``same_twice`` a second stack without metrics too, whose difference to the first is
    the noise of the measurement (an A/A comparison)."""
    stacks_env = {"on": {}, "off": METRICS_OFF}
    if same_twice:
        stacks_env["off_again"] = METRICS_OFF
    with contextlib.ExitStack() as stacks:
        calls, running = {}, {}
        for label, env in stacks_env.items():
            stack = running[label] = stacks.enter_context(stack_for(models_root, [model], env=env))
            calls[label] = functools.partial(Poster(stack, content_type, accept, model), body)
        figures = interleaved(calls, count, warmup=20)
        cpu = cpu_per_request({label: (running[label], calls[label]) for label in ("on", "off")},
                              cpu_count)  # fmt: skip
        for label, used in cpu.items():
            figures[label]["cpu_us_per_request"] = used
    for label in stacks_env:
        figures[label].pop("samples_ms", None)
    figures["p50_added_percent"] = added_percent(figures, "on", "off")
    if same_twice:
        figures["p50_noise_percent"] = added_percent(figures, "off_again", "off")
    on, off = figures["on"]["cpu_us_per_request"], figures["off"]["cpu_us_per_request"]
    figures["cpu_us_added_per_request"] = {role: round(on[role] - off[role]) for role in on}
    return figures


def cpu_per_request(
    stacks: dict[str, tuple[RunningStack, Callable[[], object]]], count: int, rounds: int = 10
) -> dict[str, dict[str, int]]:
    """CPU microseconds per request of each stack's roles, over ``count`` requests each, sent
    one after the other in alternating rounds (the machine's load changes over a run); the
    benchmark's own client is left out."""
    used = {label: {} for label in stacks}
    for _ in range(rounds):
        for label, (stack, call) in stacks.items():
            before = cpu_by_role(stack)
            for _ in range(count // rounds):
                call()
            after = cpu_by_role(stack)
            for role in after:
                used[label][role] = used[label].get(role, 0.0) + after[role] - before[role]
    return {
        label: {role: round(1e6 * seconds / count) for role, seconds in roles.items()
                if role != "benchmark clients"}
        for label, roles in used.items()
    }  # fmt: skip


def added_percent(figures: dict, numerator: str, denominator: str) -> float:
    return round(100 * (figures[numerator]["p50_ms"] / figures[denominator]["p50_ms"] - 1), 2)


def scrape_with_models(models_root: Path, count: int, scrapes: int) -> dict:
    """``count`` models loaded on one multi-model endpoint, each invoked once, then scraped."""
    temp = Path(tempfile.mkdtemp(prefix="bench-metrics-"))
    try:
        models = temp / "models"
        models.mkdir()
        for index in range(count):  # copies: a load's path must resolve inside the root
            shutil.copytree(models_root / "half_plus_three", models / f"m{index:03d}")
        (temp / "work").mkdir()
        with running_stack(models, temp / "work", multi_model=True) as stack:
            session = requests.Session()
            for index in range(count):
                name = f"m{index:03d}"
                body = {"model_name": name, "url": name}
                loaded = session.post(f"{stack.url}/models", json=body, timeout=300)
                assert loaded.status_code == 200, loaded.text
                answer = session.post(
                    f"{stack.url}/models/{name}/invoke",
                    data=SMALL_JSON,
                    headers={"Content-Type": "application/json"},
                    timeout=60,
                )
                assert answer.status_code == 200, answer.text
            # The whole scrape, and the model server's own endpoint alone (what the
            # supervisor passes through), interleaved; then relabelling that text.
            instance = StackConfig.load(temp / "work" / "stack.json").instances[0]
            server = MonitoredServer("model-server[0]", instance.rest_port)
            latencies: dict[str, list[float]] = {"scrape": [], "model_server_endpoint": []}
            text = passed = ""
            for _ in range(scrapes):
                started = time.perf_counter()
                response = session.get(f"{stack.url}/metrics", timeout=60)
                latencies["scrape"].append(time.perf_counter() - started)
                assert response.status_code == 200
                text = response.text
                started = time.perf_counter()
                passed = fetch(server, MONITORING_PATH)
                latencies["model_server_endpoint"].append(time.perf_counter() - started)
            started = time.perf_counter()
            Families().add(passed, server.name)
            figures = {label: latency_summary(values) for label, values in latencies.items()}
            figures["relabel_ms"] = round((time.perf_counter() - started) * 1e3, 2)
            figures["scrape"]["max_ms"] = round(max(latencies["scrape"]) * 1e3, 2)
            figures["bytes"], figures["lines"] = len(text), text.count("\n")
            figures["model_server_lines"] = passed.count("\n")
            figures["models"] = count
            return figures
    finally:
        shutil.rmtree(temp, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scenarios", default="1,2,3")
    parser.add_argument("--requests", type=int, default=400, help="scenario 1 rounds")
    parser.add_argument("--image-requests", type=int, default=150, help="scenario 2 rounds")
    parser.add_argument("--models", type=int, default=50, help="scenario 3 models loaded")
    parser.add_argument("--scrapes", type=int, default=40, help="scenario 3 scrapes")
    parser.add_argument("--aa", action="store_true", help="a second stack without metrics too")
    parser.add_argument("--cpu-requests", type=int, default=3000, help="scenario 1 CPU phase")
    args = parser.parse_args()
    chosen = args.scenarios.split(",")
    models_root = load_test_models(["mobilenet_v2"])
    bundled = REPO_ROOT / "test" / "resources" / "models"
    if "1" in chosen:
        figures = on_off(bundled, "half_plus_three", "application/json", "application/json",
                         SMALL_JSON, args.requests, args.aa, args.cpu_requests)  # fmt: skip
        print(json.dumps({"scenario": "small JSON (njs)", **figures}), flush=True)
    if "2" in chosen:
        image = photo_like_jpeg(224, seed=1)
        figures = on_off(models_root, "mobilenet_v2", "image/jpeg", "application/x-npy", image,
                         args.image_requests, args.aa, args.cpu_requests // 4)  # fmt: skip
        print(json.dumps({"scenario": "image (fast path)", **figures}), flush=True)
    if "3" in chosen:
        figures = scrape_with_models(bundled, args.models, args.scrapes)
        print(json.dumps({"scenario": "scrape", **figures}), flush=True)


if __name__ == "__main__":
    main()
