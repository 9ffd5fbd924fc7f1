"""How long a killed gunicorn master's old worker stays, and what the kills cost a stream of
requests, between versions of the code: one stack per version (``--variant LABEL=DIR``, as
in ab_stacks.py), each serving half_plus_three with the reliability suite's ``inference.py``
(its handler calls the model server over REST or gRPC: every request goes through gunicorn).

Round after round, the stacks in turn (the order reversed every other round), ``--clients``
threads send predictions through the handler on kept-alive connections, without retries;
the gunicorn master is SIGKILLed, and the round ends once the stack serves again and the old
worker has gone (the supervisor SIGTERMs it once the new master's worker is ready). Prints,
per variant, the seconds from that SIGTERM until the old worker was gone, kill by kill, and
the requests sent and lost (any answer that is not a correct 200).

Usage::

    git archive BASE container | tar -x -C /tmp/base
    .venv/bin/python test/perf/bench_gunicorn_master_kills.py \\
        --variant before=/tmp/base/container --variant after=container --kills 10 --clients 8
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "reliability"))

from ab_stacks import variants  # noqa: E402
from bench_fast_paths import stack_for  # noqa: E402, F401  (puts whole_stack on the path)
from reliability_support import INFERENCE_SCRIPT  # noqa: E402
from test_gunicorn_master_kill import _told_at  # noqa: E402
from traffic import (  # noqa: E402
    SCRIPT_PATHS,
    RequestStream,
    gunicorn_master_pid,
    kill,
    wait_until_serving,
)
from whole_stack import Stack, launch, wait_for  # noqa: E402

MODELS = HERE.parent / "resources" / "models"


@contextlib.contextmanager
def scripted_stack(directory: str) -> Iterator[Stack]:
    root = Path(tempfile.mkdtemp(prefix="bench-master-kills-"))
    try:
        shutil.copytree(MODELS / "half_plus_three", root / "model" / "half_plus_three")
        (root / "model" / "code").mkdir()
        (root / "model" / "code" / "inference.py").write_text(INFERENCE_SCRIPT)
        (root / "work").mkdir()
        stack = launch(root / "model", root / "work", {"PYTHONPATH": directory})
        try:
            stack.wait_for_ping()
            yield stack
        finally:
            stack.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def one_kill(stack: Stack, clients: int, figures: dict) -> None:
    assert wait_for(lambda: stack.orphans("gunicorn") == [], 60), "an old worker is still there"
    with RequestStream(stack, SCRIPT_PATHS, clients) as stream:
        time.sleep(0.7)
        pid = gunicorn_master_pid(stack)
        killed_at = kill(pid)
        started = time.monotonic()
        assert wait_for(lambda: stack.child_pids("gunicorn") not in ([], [pid]), 60, 0.005)
        assert wait_until_serving(stack, SCRIPT_PATHS, 120) is not None, stack.log_tail()
        assert wait_for(lambda: stack.orphans("gunicorn") == [], 60, interval=0.005)
        back = time.monotonic() - started
        assert wait_for(lambda: _told_at(stack, pid) is not None, 10), stack.log_tail()
        figures["left_after_sigterm_s"].append(round(killed_at + back - _told_at(stack, pid), 2))
        time.sleep(0.5)
    figures["requests"] += stream.result.requests
    figures["lost"] += stream.result.lost
    figures["failures"] += stream.result.failures[:3]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--variant", action="append", required=True, help="LABEL=DIR")
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--clients", type=int, default=8)
    args = parser.parse_args()
    chosen = variants(args.variant)
    figures = {
        label: {"left_after_sigterm_s": [], "requests": 0, "lost": 0, "failures": []}
        for label in chosen
    }
    with contextlib.ExitStack() as stacks:
        running = {label: stacks.enter_context(scripted_stack(d)) for label, d in chosen.items()}
        for round_ in range(args.kills):
            order = list(chosen) if round_ % 2 == 0 else list(reversed(chosen))
            for label in order:
                one_kill(running[label], args.clients, figures[label])
    for label in chosen:
        print(json.dumps({"variant": label, **figures[label]}), flush=True)


if __name__ == "__main__":
    main()
