"""Response streaming through the host stack (nginx, gunicorn with gevent, the service): how
soon each chunk reaches the client after the handler yields it, and the service's memory over
a large streamed answer (issue 38).

Starts ``sagemaker-tfs serve`` with the bundled ``half_plus_three`` and the streaming probe
handler (``test/resources/code/streaming_probe``), then, from a client in this process:

1. paced: ``--paced-lines`` lines ``--paced-interval`` apart (tokens of a generative model),
   each stamped with the time of its yield: the delay from yield to arrival (median, max),
   and whether the first line arrived before the last was yielded.
2. bulk: answers of each size in ``--sizes-mb`` in 1 MiB chunks, produced as fast as they are
   read: the delay from the first chunk's yield (stamped in it) to its arrival, the whole
   answer's time and rate. Goal: the first chunk within 50 ms of its yield at every size.
3. memory: the service's (the gunicorn worker's) peak RSS is reset before the largest answer
   (``/proc/PID/clear_refs``) and read after it (``VmHWM``): its growth over the RSS before.
   Goal: under 50 MB for a 1 GB answer.

Both clocks are this machine's. Prints a table, then one line of JSON with every figure. On a
shared machine the figures are indicative only.

Usage: ``.venv/bin/python test/perf/bench_streaming.py [--sizes-mb 0.001,1,100,1024]
[--paced-lines 50] [--paced-interval 0.02] [--rounds 3]``
(root, or the stack's owner, may reset peak RSS).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import requests

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT / "test"))  # local_ports, shared by the test helpers
sys.path.insert(0, str(REPO_ROOT / "test" / "integration" / "stack"))
from whole_stack import Stack, cmdline, descendant_pids, running_stack  # noqa: E402

MODEL = REPO_ROOT / "test" / "resources" / "models" / "half_plus_three"
PROBE = REPO_ROOT / "test" / "resources" / "code" / "streaming_probe"
MB = 1 << 20
CHUNK_BYTES = MB


def post(stack: Stack, request: dict) -> requests.Response:
    response = requests.post(f"{stack.url}/invocations", json=request, stream=True, timeout=600)
    response.raise_for_status()
    return response


def paced(stack: Stack, lines: int, interval: float) -> dict[str, float]:
    """Delays from yield to arrival of each line (ms), and the first arrival's lead over the
    last yield (ms; positive: the first line was there before the last was produced)."""
    delays, first_arrival, last_yield = [], 0.0, 0.0
    response = post(stack, {"mode": "paced", "n": lines, "interval": interval})
    for line in response.iter_lines(chunk_size=None):
        arrived = time.time()
        stamp = json.loads(line)["t"]
        first_arrival = first_arrival or arrived
        last_yield = stamp
        delays.append((arrived - stamp) * 1000)
    assert len(delays) == lines, delays
    return {
        "delay_median_ms": statistics.median(delays),
        "delay_max_ms": max(delays),
        "first_before_last_ms": (last_yield - first_arrival) * 1000,
    }


def bulk(stack: Stack, total: int) -> dict[str, float]:
    """The first chunk's delay after its yield (ms), the whole answer's seconds and MB/s."""
    started = time.monotonic()
    response = post(stack, {"mode": "size", "total": total, "chunk": CHUNK_BYTES})
    pieces = response.iter_content(chunk_size=None)
    first = next(pieces)
    first_delay = (time.time() - json.loads(first.split(b"\n")[0])["first_yield"]) * 1000
    received = len(first) + sum(len(piece) for piece in pieces)
    seconds = time.monotonic() - started
    assert received == total, (received, total)
    return {"first_delay_ms": first_delay, "seconds": seconds, "mb_per_s": total / MB / seconds}


def status_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def service_workers(stack: Stack) -> list[int]:
    """The gunicorn workers (gunicorn titles its processes)."""
    return [pid for pid in descendant_pids(stack.process.pid) if "gunicorn: worker" in cmdline(pid)]


def memory_over(stack: Stack, total: int) -> dict[str, float]:
    """The gunicorn worker's RSS before, and its peak's growth over it, for one answer."""
    workers = service_workers(stack)
    for pid in workers:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
    before = {pid: status_kb(pid, "VmRSS") for pid in workers}
    figures = bulk(stack, total)
    growth = max(status_kb(pid, "VmHWM") - before[pid] for pid in workers)
    figures.update(rss_before_mb=max(before.values()) / 1024, peak_growth_mb=growth / 1024)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes-mb", default="0.001,1,100,1024")
    parser.add_argument("--paced-lines", type=int, default=50)
    parser.add_argument("--paced-interval", type=float, default=0.02)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    sizes = [int(float(size) * MB) for size in args.sizes_mb.split(",")]
    figures: dict[str, object] = {}
    with tempfile.TemporaryDirectory(prefix="bench-streaming-") as tmp:
        root = Path(tmp)
        shutil.copytree(MODEL, root / "model" / MODEL.name)
        shutil.copytree(PROBE, root / "model" / "code")
        (root / "work").mkdir()
        with running_stack(root / "model", root / "work") as stack:
            bulk(stack, MB)  # warm-up
            paced_rounds = [paced(stack, args.paced_lines, args.paced_interval)
                            for _ in range(args.rounds)]  # fmt: skip
            figures["paced"] = {key: max(r[key] for r in paced_rounds) if "max" in key
                                else statistics.median(r[key] for r in paced_rounds)
                                for key in paced_rounds[0]}  # fmt: skip
            print(f"paced: {args.paced_lines} lines {args.paced_interval * 1000:.0f} ms apart, "
                  f"{args.rounds} rounds")  # fmt: skip
            for key, value in figures["paced"].items():  # type: ignore[attr-defined]
                print(f"  {key:24} {value:9.2f}")
            print(f"bulk: chunks of {CHUNK_BYTES // 1024} KiB ({args.rounds} rounds, median;"
                  " the largest once, with the service's memory)")  # fmt: skip
            print(f"  {'size':>10} {'first chunk delay ms':>21} {'seconds':>9} {'MB/s':>8}")
            for total in sizes:
                if total == max(sizes):
                    row = memory_over(stack, total)
                else:
                    rounds = [bulk(stack, total) for _ in range(args.rounds)]
                    row = {key: statistics.median(r[key] for r in rounds) for key in rounds[0]}
                figures[f"bulk_{total}"] = row
                print(f"  {total:>10} {row['first_delay_ms']:>21.2f} {row['seconds']:>9.3f} "
                      f"{row['mb_per_s']:>8.1f}")  # fmt: skip
            largest = figures[f"bulk_{max(sizes)}"]
            print(f"service (gunicorn worker) over the {max(sizes)}-byte answer: RSS before "
                  f"{largest['rss_before_mb']:.1f} MB, peak growth "  # type: ignore[index]
                  f"{largest['peak_growth_mb']:.1f} MB")  # type: ignore[index]  # fmt: skip
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
