"""Benchmark of the bidirectional stream (``/invocations-bidirectional-stream``) through the whole
stack: nginx, the stream server, an echo ``stream_handler`` (no model call, so the figures are
the stream path's own).

1. One connection: round trips one message at a time (p50/p95), then pipelined messages
   (sent from a thread while the answers are read): messages/s.
2. ``--connections`` connections at once, each pipelining ``--per-connection`` messages:
   messages/s over all, and the slowest connection's time.
3. Memory: the stream server's RSS with no stream open and with ``--connections`` open
   (the cost of one open stream).
4. The opening handshake (SageMaker's contract: the WebSocket accepted within 250 ms) while
   ``--busy-streams`` streams are open and exchanging messages: ``--handshakes`` connections
   opened one after another, each timed from the TCP connect to the 101 (p50/p95/max).

Prints a table, then one line of JSON with every figure.

Usage: ``.venv/bin/python test/perf/bench_stream.py [--messages 20000] [--connections 100]
[--handshakes 200] [--busy-streams 8]``
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # stream_clients, local_ports
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration" / "stack"))
from stream_clients import exchange, open_stream  # noqa: E402
from websockets.sync.client import ClientConnection  # noqa: E402
from whole_stack import Stack, stack_with_code  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[2]
MODEL = REPO_ROOT / "test" / "resources" / "models" / "half_plus_three"
ECHO = "def stream_handler(messages, context):\n    yield from messages\n"
STREAM_SERVER = "sagemaker_tfs.service.stream.stream_server"


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def round_trips(stack: Stack, count: int, size: int) -> dict[str, float]:
    payload = b"r" * size
    times = []
    with open_stream(stack.url) as connection:
        for _ in range(50):
            connection.send(payload)
            connection.recv(timeout=30)
        for _ in range(count):
            started = time.perf_counter()
            connection.send(payload)
            connection.recv(timeout=30)
            times.append((time.perf_counter() - started) * 1000)
    times.sort()
    return {
        "p50_ms": round(statistics.median(times), 3),
        "p95_ms": round(times[int(len(times) * 0.95) - 1], 3),
    }


def pipelined(stack: Stack, count: int, size: int) -> float:
    messages: list[bytes | str] = [b"p" * size] * count
    with open_stream(stack.url) as connection:
        started = time.perf_counter()
        answers = exchange(connection, messages)
        elapsed = time.perf_counter() - started
    assert answers == messages
    return count / elapsed


def concurrent(stack: Stack, connections: int, per_connection: int, size: int) -> dict:
    with contextlib.ExitStack() as opened:
        links = [opened.enter_context(open_stream(stack.url)) for _ in range(connections)]
        durations: list[float] = []
        failures: list[BaseException] = []

        def run(index: int) -> None:
            messages: list[bytes | str] = [
                index.to_bytes(4, "little") * (size // 4)
            ] * per_connection
            started = time.perf_counter()
            try:
                assert exchange(links[index], messages) == messages
            except BaseException as error:
                failures.append(error)
            durations.append(time.perf_counter() - started)

        threads = [threading.Thread(target=run, args=(i,)) for i in range(connections)]
        started = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.perf_counter() - started
    if failures:
        raise failures[0]
    return {
        "messages_per_s": round(connections * per_connection / elapsed),
        "slowest_connection_s": round(max(durations), 3),
    }


def memory(stack: Stack, connections: int) -> dict[str, float]:
    (pid,) = stack.child_pids(STREAM_SERVER)
    idle = rss_mb(pid)
    with contextlib.ExitStack() as opened:
        links = [opened.enter_context(open_stream(stack.url)) for _ in range(connections)]
        for link in links:
            assert exchange(link, ["m"]) == ["m"]
        busy = rss_mb(pid)
    return {
        "idle_mb": round(idle, 1),
        "open_mb": round(busy, 1),
        "per_stream_kb": round((busy - idle) * 1024 / connections, 1),
    }


def handshakes(stack: Stack, count: int, busy_streams: int, size: int) -> dict[str, float]:
    """Time to open a stream while ``busy_streams`` others keep exchanging messages."""
    stop = threading.Event()
    with contextlib.ExitStack() as opened:
        links = [opened.enter_context(open_stream(stack.url)) for _ in range(busy_streams)]

        def keep_busy(link: ClientConnection) -> None:
            while not stop.is_set():
                exchange(link, [b"b" * size] * 20)

        threads = [threading.Thread(target=keep_busy, args=(link,)) for link in links]
        for thread in threads:
            thread.start()
        times = []
        try:
            for _ in range(count):
                started = time.perf_counter()
                with open_stream(stack.url) as connection:
                    times.append((time.perf_counter() - started) * 1000)
                    assert exchange(connection, ["hello"]) == ["hello"]
        finally:
            stop.set()
            for thread in threads:
                thread.join()
    times.sort()
    return {
        "p50_ms": round(statistics.median(times), 2),
        "p95_ms": round(times[int(len(times) * 0.95) - 1], 2),
        "max_ms": round(times[-1], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=20_000, help="pipelined on one stream")
    parser.add_argument("--round-trips", type=int, default=2_000)
    parser.add_argument("--size", type=int, default=256, help="bytes per message")
    parser.add_argument("--connections", type=int, default=100)
    parser.add_argument("--per-connection", type=int, default=200)
    parser.add_argument("--handshakes", type=int, default=200, help="streams opened, timed")
    parser.add_argument("--busy-streams", type=int, default=8, help="open while they are")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench_stream"))
    code = root / "code-source"
    code.mkdir()
    (code / "inference.py").write_text(ECHO)
    try:
        (root / "stack").mkdir()
        with stack_with_code(root / "stack", MODEL, code) as stack:
            figures = {
                "round_trip": round_trips(stack, args.round_trips, args.size),
                "pipelined_messages_per_s": round(pipelined(stack, args.messages, args.size)),
                "concurrent": concurrent(stack, args.connections, args.per_connection, args.size),
                "memory": memory(stack, args.connections),
                "handshake": handshakes(stack, args.handshakes, args.busy_streams, args.size),
            }
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"one stream, round trip of {args.size} B:  p50 {figures['round_trip']['p50_ms']} ms, "
          f"p95 {figures['round_trip']['p95_ms']} ms")  # fmt: skip
    print(f"one stream, pipelined:        {figures['pipelined_messages_per_s']} messages/s")
    print(f"{args.connections} streams at once:        "
          f"{figures['concurrent']['messages_per_s']} messages/s, slowest stream "
          f"{figures['concurrent']['slowest_connection_s']} s")  # fmt: skip
    print(f"stream server RSS:            {figures['memory']['idle_mb']} MB idle, "
          f"{figures['memory']['open_mb']} MB with {args.connections} streams open "
          f"({figures['memory']['per_stream_kb']} KB per stream)")  # fmt: skip
    print(f"opening handshake, {args.busy_streams} busy streams open: "
          f"p50 {figures['handshake']['p50_ms']} ms, p95 {figures['handshake']['p95_ms']} ms, "
          f"max {figures['handshake']['max_ms']} ms")  # fmt: skip
    print(json.dumps({"args": vars(args), **figures}))


if __name__ == "__main__":
    main()
