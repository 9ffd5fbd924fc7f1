"""One scenario of ``bench_peers.py`` on this tree's stack, another checkout's stack and KServe,
the three running side by side and asked in alternation (issue 53's speed goal on a shared,
noisy machine: each round asks each server once with one request, then with ``--connections``
requests at once, the order reversed every round; a drift of the load falls on all three).
Prints requests a second per server: median, min and max over the rounds; and whether the
two stacks' answers are byte-identical.

Usage::

    .venv/bin/python test/perf/ab_peer_json.py --base-tree /tmp/base --rounds 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE / "peers")]

import bench_peers  # noqa: E402
from bench_fast_paths import photo_like_jpeg  # noqa: E402
from peer_requests import CALLS, Call, Payloads  # noqa: E402

THIS_TREE = HERE.parents[1]


def start(name: str, tree: Path | None, models_root: Path, temp: Path) -> bench_peers.Server:
    """KServe from its venv, or a stack of ``tree`` (by PYTHONPATH) serving half_plus_three."""
    if tree is None:
        return bench_peers.start_peer("kserve", models_root, temp / "kserve.log")
    os.environ["PYTHONPATH"] = str(tree / "container")
    model_dir = temp / f"model-{name}"
    model_dir.mkdir()
    (model_dir / "half_plus_three").symlink_to(models_root / "half_plus_three")
    return bench_peers.start_stack(model_dir, temp / f"work-{name}")


def answer(server: bench_peers.Server, call: Call, timeout: float = 120.0) -> bytes:
    response = requests.post(server.url + call.path, data=call.body, headers=call.headers,
                             timeout=timeout)  # fmt: skip
    response.raise_for_status()
    return response.content


def wait_for_answer(server: bench_peers.Server, call: Call, timeout: float = 240.0) -> bytes:
    deadline = time.monotonic() + timeout
    while True:
        try:
            return answer(server, call)
        except requests.RequestException:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)


def rate(server: bench_peers.Server, call: Call, connections: int) -> float:
    """Requests a second of ``connections`` requests sent at once."""
    started = time.perf_counter()
    with ThreadPoolExecutor(connections) as pool:
        list(pool.map(lambda _: answer(server, call), range(connections)))
    return connections / (time.perf_counter() - started)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-tree", type=Path, required=True)
    parser.add_argument("--scenario", default="json10mb")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--connections", type=int, default=8)
    args = parser.parse_args()
    models_root = bench_peers.load_test_models(["half_plus_three"])
    payloads = Payloads(photo_like_jpeg(224, seed=1))
    trees = {"base": args.base_tree, "this": THIS_TREE, "kserve": None}
    calls: dict[str, Call] = {}
    for name in trees:
        call = CALLS["kserve" if name == "kserve" else "stack"](payloads, args.scenario)
        if call is None:
            parser.error(f"{name} has no {args.scenario} call")
        calls[name] = call
    servers: dict[str, bench_peers.Server] = {}
    with tempfile.TemporaryDirectory(prefix="ab-peer-json-") as temp:
        try:
            for name, tree in trees.items():
                servers[name] = start(name, tree, models_root, Path(temp))
                first = wait_for_answer(servers[name], calls[name])
                if name == "this":
                    same = first == answer(servers["base"], calls["base"])
                    print(f"answers of the two stacks byte-identical: {same}", flush=True)
            rates: dict[tuple[int, str], list[float]] = {}
            for round_ in range(args.rounds):
                for connections in (1, args.connections):
                    for name in list(trees)[:: 1 if round_ % 2 == 0 else -1]:
                        figure = rate(servers[name], calls[name], connections)
                        rates.setdefault((connections, name), []).append(figure)
            for (connections, name), figures in sorted(rates.items()):
                print(f"{args.scenario} c={connections} {name:6s} req/s median "
                      f"{statistics.median(figures):.2f} min {min(figures):.2f} "
                      f"max {max(figures):.2f}")  # fmt: skip
            print(f"load average {os.getloadavg()}")
        finally:
            for server in servers.values():
                server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
