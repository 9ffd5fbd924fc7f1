"""The fixed cost of one Python gRPC call between two processes, the model aside.

A grpcio server in a child process (a thread pool, as the model server's) answers 4 KB to
every request; this process calls it over a unix socket, one call at a time, with a pause
between calls as a model's run would leave (the cores go idle) or none::

    .venv/bin/python test/perf/bench_grpc_echo.py --sizes 100,602200 --pauses 0,0.01

Prints the median and mean round trip per request size and pause.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import multiprocessing
import os
import statistics
import tempfile
import time

import grpc

METHOD = "/bench.Echo/Call"
ANSWER = b"x" * 4096


def serve(socket_path: str, ready: multiprocessing.synchronize.Event) -> None:
    handler = grpc.unary_unary_rpc_method_handler(lambda request, context: ANSWER)
    server = grpc.server(
        concurrent.futures.ThreadPoolExecutor(max_workers=8),
        options=[("grpc.max_receive_message_length", 1 << 30)],
    )
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler("bench.Echo", {"Call": handler}),)
    )
    server.add_insecure_port(f"unix:{socket_path}")
    server.start()
    ready.set()
    server.wait_for_termination()


def round_trips(
    call: grpc.UnaryUnaryMultiCallable, body: bytes, pause: float, count: int
) -> list[float]:
    for _ in range(20):
        call(body)
    latencies = []
    for _ in range(count):
        started = time.perf_counter()
        call(body)
        latencies.append(1000 * (time.perf_counter() - started))
        time.sleep(pause)
    return latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="100,602200", help="request bytes, comma-separated")
    parser.add_argument("--pauses", default="0,0.01", help="seconds between calls")
    parser.add_argument("--calls", type=int, default=400)
    args = parser.parse_args()
    socket_path = os.path.join(tempfile.mkdtemp(prefix="grpc-echo-"), "echo.sock")
    ready = multiprocessing.Event()
    server = multiprocessing.Process(target=serve, args=(socket_path, ready), daemon=True)
    server.start()
    ready.wait(30)
    try:
        call = grpc.insecure_channel(f"unix:{socket_path}").unary_unary(METHOD)
        print(f"{'request bytes':>13s} {'pause s':>8s} {'p50 ms':>7s} {'mean ms':>8s}")
        for size in (int(size) for size in args.sizes.split(",")):
            body = os.urandom(size)
            for pause in (float(pause) for pause in args.pauses.split(",")):
                latencies = round_trips(call, body, pause, args.calls)
                print(
                    f"{size:13d} {pause:8.3f} {statistics.median(latencies):7.3f} "
                    f"{statistics.mean(latencies):8.3f}"
                )
    finally:
        server.terminate()


if __name__ == "__main__":
    main()
