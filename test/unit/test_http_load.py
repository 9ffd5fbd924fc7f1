"""The benchmarks' load client (test/perf/http_load.py) against a real socket server: every
answer framed right (Content-Length, chunked, pieces of any size), kept-alive connections
reused, an early close and a silent server counted as such. Its figures are only as good as
this."""

from __future__ import annotations

import socket
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "perf"))
from http_load import LoadClient, dechunked, http_request  # noqa: E402

JSON_OK = b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 9\r\n\r\n{"a": 10}'
CHUNKED_SHED = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
    b'Transfer-Encoding: chunked\r\n\r\n9\r\n{"error":\r\n0e\r\n "overloaded"}\r\n0\r\n\r\n'
)
CLOSING_TEXT = b"HTTP/1.1 400 Bad\r\nConnection: close\r\nContent-Length: 3\r\n\r\nbad"


@contextmanager
def serving(answer: Callable[[int], bytes | None], piece: int = 1 << 16) -> Iterator[tuple]:
    """A server answering each request (read up to its body's end) with ``answer(n)`` for the
    connection's n-th request, written ``piece`` bytes at a time; None: close without one.
    Yields (port, connections accepted)."""
    listener = socket.create_server(("127.0.0.1", 0))
    accepted = []

    def one_connection(conn: socket.socket) -> None:
        with conn:
            data, count = b"", 0
            while True:
                while b"\r\n\r\n" not in data:
                    more = conn.recv(65536)
                    if not more:
                        return
                    data += more
                head, _, data = data.partition(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
                while len(data) < length:
                    data += conn.recv(65536)
                data = data[length:]
                count += 1
                reply = answer(count)
                if reply is None:
                    return
                for at in range(0, len(reply), piece):
                    conn.sendall(reply[at : at + piece])
                    if piece < len(reply):
                        time.sleep(0.001)

    def accept_forever() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            accepted.append(conn)
            threading.Thread(target=one_connection, args=(conn,), daemon=True).start()

    threading.Thread(target=accept_forever, daemon=True).start()
    try:
        yield listener.getsockname()[1], accepted
    finally:
        listener.close()


def statuses(results: list[tuple]) -> Counter:
    return Counter((status, is_json, shed) for status, _, is_json, shed, _ in results)


@pytest.mark.parametrize("piece", [1, 7, 1 << 16])
def test_answers_in_any_pieces_are_framed_and_judged(piece: int) -> None:
    replies = [JSON_OK, CHUNKED_SHED]
    with serving(lambda n: replies[n % 2], piece) as (port, accepted):
        client = LoadClient(port, http_request(port, b"{}"), timeout=5)
        results = client.closed_loop(clients=2, seconds=0.3)
    found = statuses(results)
    assert set(found) == {(200, True, False), (503, True, True)}
    assert abs(found[(200, True, False)] - found[(503, True, True)]) <= 2
    assert len(accepted) == 2  # each of the two clients kept its connection


def test_the_open_loop_keeps_its_schedule_and_reuses_connections() -> None:
    with serving(lambda n: JSON_OK) as (port, accepted):
        client = LoadClient(port, http_request(port, b"[1]"), timeout=5)
        started = time.monotonic()
        results = client.open_loop(rate=200, seconds=0.5, start_at=time.time(), offset=0)
        took = time.monotonic() - started
    assert statuses(results) == {(200, True, False): 100}
    assert 0.45 < took < 1.5
    # Answers are quick, so a few connections carry them all; a busy machine (a CI run's other
    # processes) can stall the server long enough for the client to open more (16 seen),
    # but a client that never reused one would open all 100.
    assert len(accepted) < 50


def test_a_closed_connection_and_a_silent_server_are_counted_apart() -> None:
    with serving(lambda n: CLOSING_TEXT if n == 1 else None) as (port, _):
        client = LoadClient(port, http_request(port, b"{}"), timeout=5)
        results = client.open_loop(rate=20, seconds=0.1, start_at=time.time(), offset=0)
    assert statuses(results) == {(400, False, False): 2}  # "Connection: close": a new one each

    with serving(lambda n: None) as (port, _):
        results = LoadClient(port, http_request(port, b"{}"), 5).closed_loop(1, 0.05)
    assert {status for status, *_ in results} == {-1}

    silent = socket.create_server(("127.0.0.1", 0))
    with silent:
        port = silent.getsockname()[1]
        results = LoadClient(port, http_request(port, b"{}"), timeout=0.3).closed_loop(1, 0.1)
    assert statuses(results) == {(0, False, False): 1}


def test_a_chunked_body_is_complete_only_with_its_last_chunk() -> None:
    body_at = CHUNKED_SHED.index(b"\r\n\r\n") + 4
    assert dechunked(CHUNKED_SHED, body_at) == (b'{"error": "overloaded"}', len(CHUNKED_SHED))
    for cut in range(body_at, len(CHUNKED_SHED)):
        assert dechunked(CHUNKED_SHED[:cut], body_at) is None
