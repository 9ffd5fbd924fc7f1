"""The fixed cost of one Python gRPC call between two processes, the model aside.

A grpcio server in a child process (a thread pool, as the model server's) answers 4 KB to
every request; this process calls it over a unix socket, one call at a time, with a pause
between calls as a model's run would leave (the cores go idle) or none::

    .venv/bin/python test/perf/bench_grpc_echo.py --sizes 100,602200 --pauses 0,0.01

Prints the median and mean round trip per request size and pause. ``--client gevent`` calls
as the service does under gunicorn's gevent worker: in a process gevent has patched, with
``grpc.experimental.gevent.init_gevent()``, waiting for a future's result.
"""

from __future__ import annotations

import sys

GEVENT_CLIENT = "--gevent-client"  # this script run as the patched client (see main)
if GEVENT_CLIENT in sys.argv:  # gevent patches before anything imports threading or grpc
    from gevent import monkey

    monkey.patch_all()

import argparse  # noqa: E402
import concurrent.futures  # noqa: E402
import multiprocessing  # noqa: E402
import os  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import grpc  # noqa: E402

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


def round_trips(call, body: bytes, pause: float, count: int) -> list[float]:  # type: ignore[no-untyped-def]
    for _ in range(20):
        call(body)
    latencies = []
    for _ in range(count):
        started = time.perf_counter()
        call(body)
        latencies.append(1000 * (time.perf_counter() - started))
        time.sleep(pause)
    return latencies


def measure(socket_path: str, args: argparse.Namespace) -> None:
    multicallable = grpc.insecure_channel(f"unix:{socket_path}").unary_unary(METHOD)
    call = multicallable
    if args.gevent_client:
        from grpc.experimental import gevent as grpc_gevent

        grpc_gevent.init_gevent()
        call = lambda body: multicallable.future(body).result()  # noqa: E731 - as client.py
        native_sleep = monkey.get_original("time", "sleep")
        time.sleep = native_sleep  # the pause leaves the cores idle, as a model's run does
    print(f"{'request bytes':>13s} {'pause s':>8s} {'p50 ms':>7s} {'mean ms':>8s}")
    for size in (int(size) for size in args.sizes.split(",")):
        body = os.urandom(size)
        for pause in (float(pause) for pause in args.pauses.split(",")):
            latencies = round_trips(call, body, pause, args.calls)
            print(
                f"{size:13d} {pause:8.3f} {statistics.median(latencies):7.3f} "
                f"{statistics.mean(latencies):8.3f}",
                flush=True,
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="100,602200", help="request bytes, comma-separated")
    parser.add_argument("--pauses", default="0,0.01", help="seconds between calls")
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--client", choices=("plain", "gevent"), default="plain")
    parser.add_argument(GEVENT_CLIENT, metavar="SOCKET", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.gevent_client:
        measure(args.gevent_client, args)
        return
    socket_path = os.path.join(tempfile.mkdtemp(prefix="grpc-echo-"), "echo.sock")
    ready = multiprocessing.Event()
    server = multiprocessing.Process(target=serve, args=(socket_path, ready), daemon=True)
    server.start()
    ready.wait(30)
    try:
        if args.client == "gevent":
            subprocess.run([sys.executable, *sys.argv, GEVENT_CLIENT, socket_path], check=True)
        else:
            measure(socket_path, args)
    finally:
        server.terminate()


if __name__ == "__main__":
    main()
