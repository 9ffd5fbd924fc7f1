"""Connections to the model servers, made once per worker: gRPC channels and a REST client."""

from __future__ import annotations

import collections
import contextlib
import io
import logging
import socket
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import NamedTuple, cast

import requests
import requests.structures
import requests.utils

from sagemaker_tfs.client import ModelServerChannel
from sagemaker_tfs.wire.http_messages import (
    MAX_LINE_BYTES,
    content_length,
    http_version,
    is_chunked,
    read_chunked_body,
    read_header_fields,
)

logger = logging.getLogger(__name__)


def init_gevent_if_patched() -> bool:
    """gRPC under gevent needs ``init_gevent`` once the socket module is monkey-patched."""
    try:
        from gevent import monkey
    except ImportError:
        return False
    if not monkey.is_module_patched("socket"):
        return False
    import grpc.experimental.gevent as grpc_gevent

    grpc_gevent.init_gevent()
    logger.info("gRPC set up for gevent")
    return True


class Channels:
    """One gRPC channel per model server, created on first use and kept until the model server
    goes away (``drop``: a multi-model unload); the worker's only channels. Each is a
    ``client.ModelServerChannel``, which keeps what the client learns about its model server
    (method callables, the streamed Predict, signatures), so that goes with it.

    A channel goes to the model server's UNIX socket when ``socket_path_of(grpc_port)`` names
    one (the supervisor starts every model server with ``--grpc_socket_path``), else to its
    TCP port on localhost. The socket skips the TCP stack: a 55 MB answer arrives 10-15%
    sooner (docs/performance.md).
    """

    def __init__(self, socket_path_of: Callable[[int], str | None] = lambda _port: None) -> None:
        self._channels: dict[int, ModelServerChannel] = {}
        self._lock = threading.Lock()
        self._socket_path_of = socket_path_of

    def get(self, grpc_port: int) -> ModelServerChannel:
        with self._lock:
            channel = self._channels.get(grpc_port)
            if channel is None:
                channel = self._channels[grpc_port] = ModelServerChannel(self.target(grpc_port))
            return channel

    def __len__(self) -> int:
        return len(self._channels)

    def target(self, grpc_port: int) -> str:
        """The gRPC target of the model server listening on ``grpc_port``."""
        socket_path = self._socket_path_of(grpc_port)
        return f"unix:{socket_path}" if socket_path else f"127.0.0.1:{grpc_port}"

    def drop(self, grpc_port: int) -> None:
        """Close the channel of a model server that went away (multi-model unload)."""
        with self._lock:
            channel = self._channels.pop(grpc_port, None)
        if channel is not None:
            channel.close()


class RestConnectionError(ConnectionError):
    """A model server's REST port could not be reached, or the connection broke before its
    answer was read whole."""


class _NoAnswer(Exception):
    """Not one byte of an answer came back (the connection was closed or reset first)."""


class _Unwritten(Exception):
    """Writing the request raised ``error`` (its body was found bad while converted)."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


STREAM_ANSWER_BYTES = 1 << 20  # larger answers to ``send`` are passed on while they arrive
WriteRequest = Callable[[], Iterable[bytes]]  # a request's pieces, written anew for each post


class RestClient:
    """The service's own REST posts to the model servers (``input_handler``'s results, bodies
    converted to TF Serving's JSON): keep-alive connections kept per model server (up to
    ``pool_size`` idle ones each). ``post`` reads each answer whole and hands it over as the
    ``requests.Response`` that ``output_handler`` is given (the reference container posts with
    ``requests``); ``send`` writes a converted request while it sends it and passes a large
    answer on while it arrives, so that neither is ever whole in the service (issue 53).

    The HTTP is written here, for one kind of peer: a model server on this machine, which
    answers one request at a time per connection with a Content-Length or chunked body. urllib3
    cost ~0.3 ms a post (its pool and connection checks, and the ``email`` package's header
    parser: docs/performance.md), a third of a small request with handlers; a ``requests``
    Session another ~0.4 ms before it. A post on a kept connection that gets no answer at all
    (the model server closed it while idle, or restarted) is sent again on a new connection,
    its request written again; any other failure raises ``RestConnectionError`` and is failed
    over by the caller. What writing the request raises (a body found bad while converted)
    closes the connection and is raised as it is.
    """

    def __init__(self, pool_size: int = 32) -> None:
        self._idle: dict[tuple[str, int], collections.deque[_Connection]] = {}
        self._pool_size = pool_size

    def post(self, uri: str, body: bytes, content_type: str) -> requests.Response:
        """POST ``body`` to ``uri`` (``http://host:port/path``)."""
        answer = self.send(uri, lambda: (body,), len(body), content_type, stream_over=None)
        request = requests.PreparedRequest()
        request.method, request.url, request.body = "POST", uri, body
        request.headers = requests.structures.CaseInsensitiveDict({"Content-Type": content_type})
        return _as_requests_response(answer, request)

    def send(self, uri: str, write: WriteRequest, length: int | None,
             content_type: str, stream_over: int | None = STREAM_ANSWER_BYTES,
             ) -> RestAnswer:  # fmt: skip
        """POST the request that ``write()`` gives a piece at a time to ``uri``: with its
        ``length``, or chunked when that is None. A 2xx answer of more than ``stream_over``
        bytes (with a Content-Length) comes back as ``stream``, to read to its end (the
        connection is kept for another post only then); any other, whole."""
        host, port, target = _split_uri(uri)
        framing = "Transfer-Encoding: chunked" if length is None else f"Content-Length: {length}"
        head = (
            f"POST {target} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: {content_type}"
            f"\r\n{framing}\r\n\r\n"
        ).encode("latin-1")
        address = (host, port)
        connection, answer = self._exchange(address, head, write, length is None, stream_over)
        if answer.length is None:
            self._release(address, connection, answer.keep_alive)
            return answer
        stream = self._streamed(address, connection, answer.length, answer.keep_alive)
        return answer._replace(stream=stream)

    def _exchange(self, address: tuple[str, int], head: bytes, write: WriteRequest, chunked: bool,
                  stream_over: int | None) -> tuple[_Connection, RestAnswer]:  # fmt: skip
        idle = self._idle.get(address)
        if idle is None:
            idle = self._idle[address] = collections.deque()
        while True:
            try:
                connection, reused = idle.pop(), True
            except IndexError:
                connection, reused = _Connection.open(address), False
            try:
                connection.send(head, write(), chunked)
                return connection, connection.read_answer(stream_over)
            except _NoAnswer as error:
                connection.close()
                if reused:
                    continue  # closed while idle: once more, on the next connection
                raise RestConnectionError(f"{address[0]}:{address[1]}: {error}") from None
            except _Unwritten as failure:  # the model server gets no end of the request
                connection.close()
                raise failure.error from None
            except (OSError, ValueError) as error:
                connection.close()
                raise RestConnectionError(f"{address[0]}:{address[1]}: {error}") from None
            except BaseException:  # e.g. the greenlet is killed: the connection is mid-way
                connection.close()
                raise

    def _release(self, address: tuple[str, int], connection: _Connection, keep: bool) -> None:
        """A connection at the end of an answer: kept for the next post, or closed."""
        idle = self._idle[address]
        if keep and len(idle) < self._pool_size:
            idle.append(connection)
        else:
            connection.close()

    def _streamed(self, address: tuple[str, int], connection: _Connection, length: int,
                  keep: bool) -> Iterator[bytes]:  # fmt: skip
        """The answer's body a piece at a time; the connection kept only once it is read to
        its end (an answer left part read, or cut short, closes it)."""
        ended = False
        try:
            yield from connection.content_pieces(length)
            ended = True
        except (OSError, ValueError) as error:
            raise RestConnectionError(f"{address[0]}:{address[1]}: {error}") from None
        finally:
            if ended:
                self._release(address, connection, keep)
            else:
                connection.close()


def _split_uri(uri: str) -> tuple[str, int, str]:
    """``http://host:port/path`` -> (host, port, ``/path``)."""
    rest = uri.split("://", 1)[1]
    authority, slash, path = rest.partition("/")
    host, _, port_text = authority.rpartition(":")
    return host, int(port_text), slash + path


class RestAnswer(NamedTuple):
    """A model server's answer: its body whole (``content``), or (``length`` bytes) still to
    be read from ``stream``."""

    status: int
    reason: str
    fields: dict[str, str]
    content: bytes
    keep_alive: bool
    length: int | None = None
    stream: Iterator[bytes] = iter(())


class _Connection:
    """One keep-alive connection to a model server's REST port."""

    def __init__(self, sock: socket.socket) -> None:
        self._socket = sock
        reader = sock.makefile("rb", buffering=_READ_BUFFER_BYTES)
        self._reader = cast(io.BufferedReader, reader)  # what makefile gives when buffered

    @classmethod
    def open(cls, address: tuple[str, int]) -> _Connection:
        try:
            sock = socket.create_connection(address)
        except OSError as error:
            raise RestConnectionError(f"{address[0]}:{address[1]}: {error}") from None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return cls(sock)

    def send(self, head: bytes, pieces: Iterable[bytes], chunked: bool) -> None:
        """Send one request as its pieces are written, small ones joined (a small request
        is one ``send``); ``_NoAnswer`` if the connection fails. What writing a piece raises
        is raised as it is."""
        small: list[bytes] = []
        size = 0
        for part in _framed(head, pieces, chunked):
            if len(part) > _JOINED_BODY_BYTES:
                self._send_parts(small + [part])
                small, size = [], 0
                continue
            small.append(part)
            size += len(part)
            if size > _JOINED_BODY_BYTES:
                self._send_parts(small)
                small, size = [], 0
        self._send_parts(small)

    def _send_parts(self, parts: list[bytes]) -> None:
        """The parts in turn: the small ones before the last joined (not the last, if large:
        it is not copied to join it)."""
        try:
            if len(parts) > 1 and len(parts[-1]) > _JOINED_BODY_BYTES:
                self._socket.sendall(b"".join(parts[:-1]))
                self._socket.sendall(parts[-1])
            elif parts:
                self._socket.sendall(b"".join(parts) if len(parts) > 1 else parts[0])
        except OSError as error:
            raise _NoAnswer(str(error)) from None

    def read_answer(self, stream_over: int | None) -> RestAnswer:
        """Read an answer's head, and its body whole unless it is to be streamed (a 2xx
        answer with a Content-Length over ``stream_over``: ``length`` set, nothing read);
        ``_NoAnswer`` if not a byte came back."""
        try:
            status_line = self._reader.readline(MAX_LINE_BYTES + 1)
        except OSError as error:
            raise _NoAnswer(str(error)) from None
        if not status_line:
            raise _NoAnswer("the connection closed before an answer")
        version, _, rest = status_line.decode("iso-8859-1").rstrip("\r\n").partition(" ")
        status_text, _, reason = rest.partition(" ")
        if http_version(version) is None or not status_text.isdigit():
            raise ValueError(f"not an HTTP answer: {status_line[:100]!r}")
        status, fields = int(status_text), read_header_fields(self._reader)
        connection = fields.get("connection", "").lower()
        keep_alive = connection != "close" and (version != "HTTP/1.0" or connection == "keep-alive")
        length = None if is_chunked(fields) else content_length(fields)
        if stream_over is not None and 200 <= status < 300 and (length or 0) > stream_over:
            return RestAnswer(status, reason, fields, b"", keep_alive, length)
        content, complete = self._read_content(fields)
        return RestAnswer(status, reason, fields, content, keep_alive and complete)

    def _read_content(self, fields: dict[str, str]) -> tuple[bytes, bool]:
        """The body, and whether the connection is still at a message's end after it."""
        if is_chunked(fields):
            return read_chunked_body(self._reader), True
        length = content_length(fields)
        if length is None:
            return self._reader.read(), False  # to the connection's close
        content = self._reader.read(length)
        if len(content) < length:
            raise ConnectionError(f"the answer ended after {len(content)} of {length} bytes")
        return content, True

    def content_pieces(self, length: int) -> Iterator[bytes]:
        """A body of ``length`` bytes, a piece of at most ``_ANSWER_PIECE_BYTES`` at a time."""
        left = length
        while left:
            piece = self._reader.read(min(left, _ANSWER_PIECE_BYTES))
            if not piece:
                raise ConnectionError(f"the answer ended after {length - left} of {length} bytes")
            left -= len(piece)
            yield piece

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._reader.close()
        with contextlib.suppress(OSError):
            self._socket.close()


def _framed(head: bytes, pieces: Iterable[bytes], chunked: bool) -> Iterator[bytes]:
    """The request's bytes: its head, then its pieces (each framed as a chunk when
    ``chunked``, empty ones left out: an empty chunk ends the body), then the last chunk."""
    yield head
    for piece in _written(pieces):
        if chunked and piece:
            yield b"%x\r\n" % len(piece)
            yield piece
            yield b"\r\n"
        elif piece:
            yield piece
    if chunked:
        yield b"0\r\n\r\n"


def _written(pieces: Iterable[bytes]) -> Iterator[bytes]:
    """The pieces; what writing one raises, as ``_Unwritten`` (not a failed connection)."""
    try:
        yield from pieces
    except Exception as error:
        raise _Unwritten(error) from error


_READ_BUFFER_BYTES = 1 << 16
_JOINED_BODY_BYTES = 1 << 16
_ANSWER_PIECE_BYTES = 1 << 20


def _as_requests_response(
    answer: RestAnswer, request: requests.PreparedRequest
) -> requests.Response:
    """What ``requests`` would have made of the same answer (``HTTPAdapter.build_response``),
    the body already read (``raw`` is then an empty stream, as it was)."""
    response = requests.Response()
    response.status_code = answer.status
    response.headers = requests.structures.CaseInsensitiveDict(answer.fields)
    response.encoding = requests.utils.get_encoding_from_headers(response.headers)
    response.reason = answer.reason
    response.url = request.url or ""
    response.raw = io.BytesIO()
    response._content = answer.content
    response._content_consumed = True
    response.request = request
    return response
