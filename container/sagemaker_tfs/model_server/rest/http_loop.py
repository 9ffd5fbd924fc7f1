"""The REST server's event loop: every connection's reads and writes on one thread.

Why one loop: with a thread per connection (``http.server``), 64 connections were 64 threads
taking the GIL in turns; at 64 connections of small JSON the model server answered half the
requests it did at 8, with a p99 of 166-258 ms (docs/performance.md). Here one thread waits on
all sockets at once (``selectors``), reads requests as bytes arrive (``request_reader``), and
writes answers without ever blocking, so a client that sends or reads slowly holds up no one.

Where a request runs is the application's choice (``App.runs_inline``): a quick one (a small
prediction measured under a millisecond) right on the loop, in arrival order, with no thread
hand-off at all; the rest in a pool of ``workers`` threads (``--rest_api_num_threads``), so a
slow model, a large body or the batcher (which needs requests from several connections at
once) never stops the loop. Each connection has at most one request in flight, answered in
order, and is not read again until its answer has left (a client that pipelines requests or
does not read its answers cannot make the server buffer without bound).

The loop also keeps the deadline of every request in the pool (``timeout_seconds``, the same
for all, so arrival order is deadline order): one still waiting for a thread when it passes is
answered ``App.waited_too_long()`` and never runs; one running is answered
``App.ran_too_long()`` (if the application has an answer for it) while its run goes on, and its
connection closes once that answer has left. A request whose client closed its connection while
it waited for a thread, or for the batcher, is not run (``http_replies.client_waits``).
"""

from __future__ import annotations

import collections
import contextlib
import errno
import itertools
import logging
import queue
import selectors
import socket
import threading
import time
from collections.abc import Callable

from sagemaker_tfs.model_server.rest import http_replies
from sagemaker_tfs.model_server.rest.http_replies import App, HttpReply, closes, encode
from sagemaker_tfs.model_server.rest.request_reader import Request, RequestReader, SilentClose
from sagemaker_tfs.model_server.serving.servable import CALLER_WAITS
from sagemaker_tfs.wire.http_messages import HeadError

logger = logging.getLogger(__name__)
READ, WRITE = selectors.EVENT_READ, selectors.EVENT_WRITE
RECV_BYTES = 256 * 1024
_SEND_BUFFERS = 64  # buffers per sendmsg
_ACCEPT_PAUSE_SECONDS = 0.1  # out of file descriptors: accept again after this
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"


class _Connection:
    __slots__ = ("sock", "address", "reader", "out", "job", "closing", "closed", "events")

    def __init__(self, sock: socket.socket, address: object) -> None:
        self.sock = sock
        self.address = address
        self.reader = RequestReader()
        self.out: collections.deque[memoryview] = collections.deque()
        self.job: _Job | None = None
        self.closing = False  # close once ``out`` is empty
        self.closed = False
        self.events = READ


class _Job:
    """A request in the pool; ``state`` changes under the loop's lock."""

    __slots__ = ("conn", "request", "arrived", "state", "buffers", "close")
    QUEUED, RUNNING, DONE, ANSWERED = range(4)  # ANSWERED: by the loop, at the deadline

    def __init__(self, conn: _Connection, request: Request, arrived: float) -> None:
        self.conn = conn
        self.request = request
        self.arrived = arrived
        self.state = _Job.QUEUED
        self.buffers: list[bytes | bytearray] = []
        self.close = False


class HttpLoop:
    """Serves ``app`` on ``0.0.0.0:port``: ``start()`` runs the loop and the pool's threads."""

    def __init__(self, port: int, app: App, workers: int, timeout_seconds: float | None) -> None:
        self._app = app
        self._timeout = timeout_seconds
        self._listener = socket.create_server(("0.0.0.0", port), backlog=1024)
        self._listener.setblocking(False)
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._listener, READ, self._listener)
        self._wake_reader, self._wake_writer = socket.socketpair()
        self._wake_reader.setblocking(False)
        self._selector.register(self._wake_reader, READ, self._wake_reader)
        self._lock = threading.Lock()
        self._woken = False
        self._completed: collections.deque[_Job] = collections.deque()
        self._watched: collections.deque[_Job] = collections.deque()
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._connections: set[_Connection] = set()
        self._accept_paused_until = 0.0
        self._stopping = False
        self._threads = [threading.Thread(target=self._run, name="rest-loop", daemon=True)]
        self._threads += [
            threading.Thread(target=self._work, name=f"rest-worker-{n}", daemon=True)
            for n in range(max(1, workers))
        ]

    @property
    def address(self) -> tuple[str, int]:
        return self._listener.getsockname()[:2]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def shutdown(self) -> None:
        """Stop the loop and the pool, and close every socket."""
        self._stopping = True
        self._wake()
        for _ in self._threads[1:]:
            self._jobs.put(None)
        self._threads[0].join(5)  # the pool's threads may be in a run: they end after it
        for conn in list(self._connections):
            self._close(conn)
        self._selector.close()
        for sock in (self._listener, self._wake_reader, self._wake_writer):
            sock.close()

    # the loop's thread

    def _run(self) -> None:
        while not self._stopping:
            for key, mask in self._selector.select(self._select_timeout()):
                if key.data is self._listener:
                    self._accept()
                elif key.data is self._wake_reader:
                    self._take_completed()
                else:
                    self._guarded(key.data, self._on_ready, key.data, mask)
            self._expire_deadlines(time.monotonic())
            if self._accept_paused_until and time.monotonic() >= self._accept_paused_until:
                self._accept_paused_until = 0.0
                self._selector.register(self._listener, READ, self._listener)

    def _guarded(self, conn: _Connection, step: Callable[..., None], *args: object) -> None:
        """A bug met while serving one connection closes that connection, not the loop."""
        try:
            step(*args)
        except Exception:
            logger.exception("REST connection from %s failed", conn.address)
            self._close(conn)

    def _accept(self) -> None:
        while True:
            try:
                sock, address = self._listener.accept()
            except BlockingIOError:
                return
            except OSError as error:  # out of file descriptors: stop accepting for a moment
                if error.errno not in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    raise
                logger.warning("REST API cannot accept a connection: %s", error)
                self._selector.unregister(self._listener)
                self._accept_paused_until = time.monotonic() + _ACCEPT_PAUSE_SECONDS
                return
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = _Connection(sock, address)
            self._connections.add(conn)
            self._selector.register(sock, READ, conn)

    def _on_ready(self, conn: _Connection, mask: int) -> None:
        if mask & WRITE and not self._flush(conn):
            return
        if mask & READ and not conn.closed:
            self._receive(conn)
        if not conn.closed:
            self._serve(conn)

    def _receive(self, conn: _Connection) -> None:
        try:
            data = conn.sock.recv(RECV_BYTES)
        except BlockingIOError:
            return
        except OSError as error:
            self._went_away(conn, error)
            return
        if not data:
            self._close(conn)
            return
        conn.reader.feed(data)

    def _serve(self, conn: _Connection) -> None:
        """Answer the connection's whole requests, one at a time, while its answers leave at
        once; then wait for what it needs next (bytes to read, room to write, its job)."""
        while not conn.closed and conn.job is None and not conn.out and not conn.closing:
            try:
                request = conn.reader.next_request()
            except SilentClose:
                self._close(conn)
                return
            except HeadError as error:
                self._answer(conn, self._app.error_reply(error.status, str(error)), "GET", False)
                break
            if conn.reader.wants_continue:
                conn.reader.wants_continue = False
                self._send(conn, [CONTINUE], close=False)
            if request is None:
                break
            if self._app.runs_inline(request):
                reply = self._respond(request)
                self._answer(conn, reply, request.method, request.keep_alive)
            else:
                self._submit(conn, request)
        if not conn.closed:
            self._want(conn, self._events_of(conn))

    def _events_of(self, conn: _Connection) -> int:
        if conn.out:
            return WRITE
        return 0 if conn.job is not None or conn.closing else READ

    def _submit(self, conn: _Connection, request: Request) -> None:
        job = _Job(conn, request, time.monotonic())
        conn.job = job
        if self._timeout is not None:
            self._watched.append(job)
        self._jobs.put(job)

    def _answer(self, conn: _Connection, reply: HttpReply, method: str, keep_alive: bool) -> None:
        self._send(conn, encode(reply, method, keep_alive), closes(reply, keep_alive))

    def _send(self, conn: _Connection, buffers: list[bytes | bytearray], close: bool) -> None:
        """Queue bytes and write what the socket takes now; ``close``: the connection closes
        once they have left."""
        conn.closing = conn.closing or close
        conn.out.extend(memoryview(buffer) for buffer in buffers if buffer)
        self._flush(conn)

    def _flush(self, conn: _Connection) -> bool:
        """Write without blocking; False when the connection is closed."""
        while conn.out:
            try:
                sent = conn.sock.sendmsg(list(itertools.islice(conn.out, _SEND_BUFFERS)))
            except BlockingIOError:
                return True
            except OSError as error:
                self._went_away(conn, error)
                return False
            while sent:
                first = conn.out[0]
                if sent >= len(first):
                    sent -= len(first)
                    conn.out.popleft()
                else:
                    conn.out[0] = first[sent:]
                    sent = 0
        if conn.closing:
            self._close(conn)
            return False
        return True

    def _want(self, conn: _Connection, events: int) -> None:
        if events == conn.events:
            return
        if not events:
            self._selector.unregister(conn.sock)
        elif not conn.events:
            self._selector.register(conn.sock, events, conn)
        else:
            self._selector.modify(conn.sock, events, conn)
        conn.events = events

    def _take_completed(self) -> None:
        """Answers of the pool's jobs (the workers woke the loop)."""
        try:
            while self._wake_reader.recv(4096):
                pass
        except BlockingIOError:
            pass
        with self._lock:
            self._woken = False
            completed, self._completed = self._completed, collections.deque()
        for job in completed:
            if not job.conn.closed:
                self._guarded(job.conn, self._answer_job, job)

    def _answer_job(self, job: _Job) -> None:
        conn = job.conn
        conn.job = None
        if job.buffers:
            self._send(conn, job.buffers, job.close)
        if not conn.closed:
            self._serve(conn)

    def _select_timeout(self) -> float | None:
        delay = self._next_deadline_delay()
        if self._accept_paused_until:
            paused = max(0.0, self._accept_paused_until - time.monotonic())
            delay = paused if delay is None else min(delay, paused)
        return delay

    def _next_deadline_delay(self) -> float | None:
        while self._watched and self._watched[0].state == _Job.DONE:
            self._watched.popleft()
        if not self._watched:
            return None
        assert self._timeout is not None
        return max(0.0, self._watched[0].arrived + self._timeout - time.monotonic())

    def _expire_deadlines(self, now: float) -> None:
        while self._watched and self._timeout is not None:
            job = self._watched[0]
            if job.state != _Job.DONE and now < job.arrived + self._timeout:
                return
            self._watched.popleft()
            with self._lock:
                state = job.state
                if state == _Job.QUEUED:
                    job.state = _Job.ANSWERED
                    reply: HttpReply | None = self._app.waited_too_long()
                elif state == _Job.RUNNING:
                    reply = self._app.ran_too_long(job.request)
                    if reply is not None:
                        job.state = _Job.ANSWERED
                else:
                    continue
            if reply is None or job.conn.closed:
                continue
            if state == _Job.QUEUED:
                job.conn.job = None
                self._answer(job.conn, reply, job.request.method, job.request.keep_alive)
                self._serve(job.conn)
            else:
                self._answer(job.conn, reply, job.request.method, keep_alive=False)
                if not job.conn.closed:
                    self._want(job.conn, self._events_of(job.conn))

    def _went_away(self, conn: _Connection, error: OSError) -> None:
        logger.debug("client %s went away: %s", conn.address, error)
        self._close(conn)

    def _close(self, conn: _Connection) -> None:
        if conn.closed:
            return
        conn.closed = True
        if conn.events:
            self._selector.unregister(conn.sock)
        conn.sock.close()
        conn.out.clear()
        self._connections.discard(conn)

    # the pool's threads

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            with self._lock:
                if job.state != _Job.QUEUED:
                    continue  # answered 503 at its deadline while it waited
                job.state = _Job.RUNNING
            waits = http_replies.client_waits(job.conn.sock)  # its client gone: not run
            buffers, close = self._run_job(job.request, waits) if waits() else ([], False)
            with self._lock:
                if job.state == _Job.RUNNING:
                    job.buffers, job.close = buffers, close
                job.state = _Job.DONE
                self._completed.append(job)
                wake, self._woken = not self._woken, True
            if wake:
                self._wake()

    def _run_job(self, request: Request, waits: Callable[[], bool]) -> tuple[list, bool]:
        """The answer's bytes, and whether the connection closes after them; a run started
        for it is dropped if its client goes first (``servable.CALLER_WAITS``)."""
        token = CALLER_WAITS.set(waits)
        try:
            return http_replies.encoded(self._app, self._respond(request), request)
        finally:
            CALLER_WAITS.reset(token)

    def _respond(self, request: Request) -> HttpReply:
        started = time.monotonic()
        try:
            reply = self._app.respond(request)
        except Exception:  # the application's own guard failed: still one JSON answer
            logger.exception("REST request %s %s failed", request.method, request.path)
            return self._app.error_reply(500, "INTERNAL: the request failed")
        try:
            self._app.ran(request, reply, time.monotonic() - started)
        except Exception:
            logger.exception(
                "REST request %s %s: its run time not kept", request.method, request.path
            )
        return reply

    def _wake(self) -> None:
        with contextlib.suppress(OSError):  # closed at shutdown, or full: the loop is awake
            self._wake_writer.send(b"w")
