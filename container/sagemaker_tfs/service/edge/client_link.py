"""Whether a request's client still waits for its answer, seen from gunicorn's end of nginx's
connection (``Failover``'s ``still_wanted``), and a watch of that connection while a call
waits on a model server (``ClientLink.watching``).

nginx closes its connection to the service as soon as the client closes its own
(``proxy_ignore_client_abort`` is off, its default) and sends nothing else on it while the
request runs, so the socket reads at its end exactly when no one waits any more. A peek that
does not wait tells it, with no greenlet switch: 3.5 µs (the ``BlockingIOError`` of an open
connection most of it; timeit on a socketpair, load 4.5), twice a fast-path request.

In gunicorn's gevent worker, a call in flight is watched too: the event loop is told to
wake on the connection becoming readable (a libev io watcher, no greenlet), and when it
does and the peek finds it at its end, ``CallCut`` is raised into the waiting greenlet,
which closes its REST connection or cancels its gRPC call on the way out.
"""

from __future__ import annotations

import _socket
import socket
from typing import Any

import gevent

from sagemaker_tfs.service.routing.model_servers import CallCut, ClientLink, always_wanted

_PEEK = socket.MSG_PEEK | socket.MSG_DONTWAIT
_READ = 1  # libev's EV_READ


def still_wanted_by(environ: dict[str, Any]) -> ClientLink:
    """A check of the request's connection (``gunicorn.socket``); without one, always True.
    gevent's socket wraps the OS one (``_sock``), whose recv returns at once where gevent's
    would wait for data (gevent patches ``socket.socket``, not ``_socket.socket``); a socket
    with a timeout would wait too, and is not looked at. Only gevent's is watched while a
    call waits (a worker of another kind has no event loop to do it)."""
    connection = environ.get("gunicorn.socket")
    raw = getattr(connection, "_sock", connection)
    if not isinstance(raw, _socket.socket) or raw.gettimeout() not in (None, 0.0):
        return always_wanted
    watched = raw is not connection  # gevent's socket
    return _WatchedLink(raw) if watched else _Link(raw)


class _Link(ClientLink):
    """nginx's connection of one request, looked at before each call."""

    def __init__(self, connection: _socket.socket) -> None:
        self._socket = connection

    def __call__(self) -> bool:
        return _open(self._socket)


class _WatchedLink(_Link):
    """nginx's connection of one request in a gevent worker: watched while a call waits."""

    def watching(self) -> _Watch:
        return _Watch(self._socket)


class _Watch:
    """While the call it guards runs, the event loop watches the connection; readable and at
    its end, ``CallCut`` is raised into the guarded greenlet where it waits. The raise is a
    callback of the loop that checks the guard is still on: the greenlet may have left it
    in the same turn of the loop. Readable with data (not a close), the watch ends."""

    __slots__ = ("_socket", "_watcher", "_greenlet", "_on")

    def __init__(self, connection: _socket.socket) -> None:
        self._socket = connection
        self._watcher = gevent.get_hub().loop.io(connection.fileno(), _READ)
        self._on = False

    def __enter__(self) -> _Watch:
        self._greenlet = gevent.getcurrent()
        self._on = True
        self._watcher.start(self._readable)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._on = False
        self._watcher.stop()
        self._watcher.close()

    def _readable(self) -> None:
        self._watcher.stop()
        if self._on and not _open(self._socket):
            gevent.get_hub().loop.run_callback(self._cut)

    def _cut(self) -> None:
        if self._on:
            self._greenlet.throw(CallCut())


def _open(connection: _socket.socket) -> bool:
    """The connection is neither at its end nor broken."""
    try:
        return connection.recv(1, _PEEK) != b""
    except BlockingIOError:
        return True  # nothing to read: open
    except OSError:
        return False  # reset, or closed here
