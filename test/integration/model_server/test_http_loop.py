"""``http_loop`` over real sockets, with a scripted application (no model: these tests are
about the loop, and a model cannot be told to block, or to answer 8 MB, on demand).

What the loop promises: a client that sends slowly, or does not read its answers, holds up no
one; such a client cannot make the server read (and keep) requests it has not answered; a run
in the pool never stops the loop; inline runs happen on the loop's thread, in order.
"""

from __future__ import annotations

import os
import pathlib
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest
import requests
from local_ports import free_port
from sagemaker_tfs.model_server.rest.http_loop import HttpLoop
from sagemaker_tfs.model_server.rest.http_replies import HttpReply
from sagemaker_tfs.model_server.rest.request_reader import Request

BIG = b"x" * (8 << 20)


class ScriptedApp:
    """``/big``: 8 MB; ``/block``: waits for ``release`` (in the pool); anything else: its
    path. Paths starting with ``/inline`` run on the loop."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.calls: list[tuple[str, str]] = []  # (path, thread name)

    def respond(self, request: Request) -> HttpReply:
        self.calls.append((request.path, threading.current_thread().name))
        if request.path == "/big":
            return HttpReply(200, BIG, "application/octet-stream")
        if request.path == "/block":
            self.release.wait(30)
        return HttpReply(200, request.path.encode())

    def runs_inline(self, request: Request) -> bool:
        return request.path.startswith("/inline")

    def ran(self, request: Request, reply: HttpReply, seconds: float) -> None:
        pass

    def error_reply(self, status: int, message: str) -> HttpReply:
        return HttpReply(status, b'{"error": "%s"}' % message.encode())

    def waited_too_long(self) -> HttpReply:
        return HttpReply(503, b'{"error": "waited"}')

    def ran_too_long(self, request: Request) -> HttpReply | None:
        return (
            HttpReply(504, b'{"error": "late"}', close=True) if request.method == "POST" else None
        )


@pytest.fixture
def app() -> Iterator[ScriptedApp]:
    scripted = ScriptedApp()
    yield scripted
    scripted.release.set()


def serve(app: ScriptedApp, workers: int = 2, timeout: float | None = None) -> HttpLoop:
    loop = HttpLoop(free_port(), app, workers, timeout)
    loop.start()
    return loop


def get(loop: HttpLoop, path: str, timeout: float = 5) -> requests.Response:
    return requests.get(f"http://127.0.0.1:{loop.address[1]}{path}", timeout=timeout)


def test_a_client_that_does_not_read_holds_up_no_one_and_is_not_read_ahead(
    app: ScriptedApp,
) -> None:
    """20 pipelined requests for 8 MB each, never read: the first answer fills the socket's
    buffers and waits; the other 19 stay unread in the kernel, so only one was run."""
    loop = serve(app)
    try:
        with socket.create_connection(loop.address, timeout=5) as hog:
            hog.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            hog.sendall(b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n" * 20)
            time.sleep(0.5)
            started = time.monotonic()
            assert get(loop, "/inline-other").content == b"/inline-other"
            assert get(loop, "/pooled-other").content == b"/pooled-other"
            assert time.monotonic() - started < 2
            assert [path for path, _ in app.calls].count("/big") == 1
    finally:
        loop.shutdown()


def test_a_client_that_sends_a_byte_at_a_time_holds_up_no_one(app: ScriptedApp) -> None:
    loop = serve(app)
    try:
        with socket.create_connection(loop.address, timeout=5) as slow:
            request = b"GET /inline-slow HTTP/1.1\r\nHost: x\r\n\r\n"
            for byte in request[:-1]:
                slow.sendall(bytes([byte]))
                assert get(loop, "/inline-fast").status_code == 200
            slow.sendall(request[-1:])
            assert slow.recv(4096).endswith(b"\r\n\r\n/inline-slow")
    finally:
        loop.shutdown()


def test_inline_runs_are_on_the_loop_and_pooled_ones_leave_it_free(app: ScriptedApp) -> None:
    loop = serve(app, workers=1)
    try:
        blocked = threading.Thread(target=lambda: get(loop, "/block", timeout=30))
        blocked.start()
        while not app.calls:
            time.sleep(0.01)
        assert get(loop, "/inline-while-blocked").status_code == 200
        app.release.set()
        blocked.join(10)
        threads = dict(app.calls)
        assert threads["/inline-while-blocked"] == "rest-loop"
        assert threads["/block"].startswith("rest-worker-")
    finally:
        loop.shutdown()


def test_deadlines_answer_waiting_and_running_requests(app: ScriptedApp) -> None:
    """One worker, held by a POST: the POST gets 504 at its deadline and its connection
    closes; a request queued behind it gets 503 at its own, on a connection that stays open
    and serves the next request once the worker is free."""
    loop = serve(app, workers=1, timeout=0.3)
    try:
        late: dict[str, requests.Response] = {}
        url = f"http://127.0.0.1:{loop.address[1]}"
        holder = threading.Thread(
            target=lambda: late.update(answer=requests.post(url + "/block", timeout=10))
        )
        holder.start()
        while not app.calls:
            time.sleep(0.01)
        with requests.Session() as session:
            started = time.monotonic()
            waited = session.get(url + "/queued", timeout=10)
            assert waited.status_code == 503
            assert 0.25 < time.monotonic() - started < 2
            holder.join(10)
            assert late["answer"].status_code == 504
            assert late["answer"].headers["Connection"] == "close"
            app.release.set()
            assert session.get(url + "/after", timeout=10).content == b"/after"
        assert "/queued" not in dict(app.calls)  # answered at its deadline, never run
    finally:
        loop.shutdown()


def test_an_answer_too_large_for_the_socket_leaves_whole(app: ScriptedApp) -> None:
    loop = serve(app)
    try:
        with requests.Session() as session:
            url = f"http://127.0.0.1:{loop.address[1]}"
            assert session.get(url + "/big", timeout=10).content == BIG
            assert session.get(url + "/inline-next", timeout=10).content == b"/inline-next"
    finally:
        loop.shutdown()


OUT_OF_FILES_SERVER = """
import resource, sys, time
resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
sys.path[:0] = sys.argv[2:]
import logging
logging.basicConfig(level=logging.WARNING)
from test_http_loop import ScriptedApp
from sagemaker_tfs.model_server.rest.http_loop import HttpLoop
loop = HttpLoop(int(sys.argv[1]), ScriptedApp(), 2, None)
loop.start()
print("ready", flush=True)
time.sleep(60)
"""


def test_out_of_file_descriptors_pauses_accepting_and_serves_again() -> None:
    """A server at its file limit (RLIMIT_NOFILE 64 here, 100 clients) logs it, stops
    accepting for a moment instead of spinning on the listener, and serves once clients go."""
    port = free_port()
    here = pathlib.Path(__file__).parent
    paths = [str(here), str(here.parents[1]), str(here.parents[2] / "container")]
    server = subprocess.Popen(
        [sys.executable, "-c", OUT_OF_FILES_SERVER, str(port), *paths],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(paths)},
    )
    clients: list[socket.socket] = []
    try:
        assert server.stdout is not None and server.stdout.readline() == b"ready\n"
        for _ in range(100):
            clients.append(socket.create_connection(("127.0.0.1", port), timeout=5))
        time.sleep(1)
        cpu_before = _cpu_seconds(server.pid)
        time.sleep(1)
        assert _cpu_seconds(server.pid) - cpu_before < 0.5, "the loop spun on its listener"
        for client in clients:
            client.close()
        clients.clear()
        answer = requests.get(f"http://127.0.0.1:{port}/inline-after", timeout=5)
        assert answer.content == b"/inline-after"
    finally:
        for client in clients:
            client.close()
        server.kill()
        _, errors = server.communicate(timeout=10)
    assert b"cannot accept a connection" in errors


def _cpu_seconds(pid: int) -> float:
    """utime + stime of a process, from /proc (Linux)."""
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
