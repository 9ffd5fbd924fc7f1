"""The stack's cold start with the Python model server, two code trees alternated in one run
(issue 55: the zygote imports TensorFlow first and forks the first model server, where the
first model server used to import beside the zygote's later import).

Each round starts a stack (``half_plus_three``, no ``inference.py``) with each tree's package
(``PYTHONPATH`` on its ``container`` folder) and prints: the seconds from the launch until
the stack serves (``/ping`` 200 and a correct prediction by JSON and by ``.npy``), then, once
it has settled (the zygote waiting, and its spare forked where there is one),
the PSS of the processes that hold TensorFlow (model servers, zygote, spare or standby).

Usage (a copy of the code before, e.g. ``git archive 036f480 | tar -x -C /tmp/before``):
``.venv/bin/python test/perf/bench_zygote_start.py /tmp/before/container container
[--rounds 3] [--env SAGEMAKER_TFS_INSTANCE_COUNT=2]``
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import requests

TEST_DIR = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TEST_DIR))
sys.path.insert(0, str(TEST_DIR / "integration" / "stack"))
sys.path.insert(0, str(TEST_DIR / "reliability"))

from traffic import PLAIN_PATHS, serves  # noqa: E402
from whole_stack import StackError, cmdline, descendant_pids, launch  # noqa: E402

SETTLE_SECONDS = 120.0
SPARE_SECONDS = 5.0
START_TIMEOUT_SECONDS = 240.0


def tensorflow_pss_mb(root: int) -> tuple[float, int]:
    """PSS (MB) and count of the processes holding TensorFlow under ``root``."""
    total, count = 0, 0
    for pid in descendant_pids(root):
        line = cmdline(pid)
        if "--rest_api_port" not in line and "standby" not in line:
            continue
        try:
            rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
        except OSError:
            continue
        found = re.search(r"^Pss:\s+(\d+)", rollup, re.M)
        if found:
            total, count = total + int(found.group(1)), count + 1
    return total / 1024, count


def one_start(tree: str, models: Path, env: dict[str, str]) -> tuple[float, float, int]:
    """Seconds to the first serve, then the settled stack's TensorFlow PSS and process count."""
    work = Path(tempfile.mkdtemp(prefix="bench-zygote-"))
    started = time.monotonic()
    stack = launch(models, work, {"PYTHONPATH": tree, **env})
    try:
        with requests.Session() as session:
            while not serves(stack, PLAIN_PATHS, session):
                if (
                    stack.process.poll() is not None
                    or time.monotonic() - started > START_TIMEOUT_SECONDS
                ):
                    raise StackError("no serve:\n" + stack.log_tail())
                time.sleep(0.01)
        first_serve = time.monotonic() - started
        settle_deadline = time.monotonic() + SETTLE_SECONDS  # not Stack.settled: no spare before
        while not stack.standby_waits() and time.monotonic() < settle_deadline:
            time.sleep(0.1)
        spare_deadline = time.monotonic() + SPARE_SECONDS  # the code before forks none
        while "forked its spare" not in stack.log_text() and time.monotonic() < spare_deadline:
            time.sleep(0.1)
        time.sleep(1.0)
        pss, count = tensorflow_pss_mb(stack.process.pid)
        return first_serve, pss, count
    finally:
        try:
            stack.stop()
        except StackError:
            stack.kill_session()
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", help="the container folder of the code before")
    parser.add_argument("after", help="the container folder of this code")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--env", action="append", default=[], help="NAME=VALUE for the stack")
    args = parser.parse_args()
    env = dict(item.split("=", 1) for item in args.env)
    models = Path(tempfile.mkdtemp(prefix="bench-zygote-models-"))
    shutil.copytree(
        TEST_DIR / "resources" / "models" / "half_plus_three", models / "half_plus_three"
    )
    trees = {"before": str(Path(args.before).resolve()), "after": str(Path(args.after).resolve())}
    starts: dict[str, list[float]] = {name: [] for name in trees}
    for round_ in range(1, args.rounds + 1):
        for name, tree in trees.items():
            first_serve, pss, count = one_start(tree, models, env)
            starts[name].append(first_serve)
            print(f"round {round_} {name}: first serve {first_serve:.2f} s; TensorFlow's "
                  f"{count} processes {pss:.0f} MB PSS", flush=True)  # fmt: skip
    for name, values in starts.items():
        print(f"{name}: first serve median {statistics.median(values):.2f} s "
              f"({', '.join(f'{v:.2f}' for v in values)})")  # fmt: skip


if __name__ == "__main__":
    main()
