"""The Python service: a falcon WSGI app run by gunicorn (``app:create_app()``).

It serves what nginx hands over: ``/invocations`` when ``code/inference.py`` exists or the
content type is not one njs converts, and ``/models/NAME/invoke`` on multi-model endpoints.
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import logging
import os
import socket
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from typing import Any, cast

import falcon

from sagemaker_tfs import client
from sagemaker_tfs.service import errors
from sagemaker_tfs.service.codecs import native_threads
from sagemaker_tfs.service.codecs.answers import StreamedBody, WrittenBody
from sagemaker_tfs.service.codecs.image_inputs import ImageOptions
from sagemaker_tfs.service.edge import sessions
from sagemaker_tfs.service.edge.body_budget import BodyBudget, GivenBackWhenClosed
from sagemaker_tfs.service.edge.sessions import Sessions
from sagemaker_tfs.service.handlers.invoke import Invoker, Limits, Reply, SessionState, seconds_left
from sagemaker_tfs.service.handlers.multi_model import (
    ControlClient,
    ModelDirectory,
    RegisteredModel,
)
from sagemaker_tfs.service.handlers.streaming import HandlerStream
from sagemaker_tfs.service.handlers.user_code import (
    UserCode,
    add_installed_packages,
    ensure_requirements,
    load_user_code,
)
from sagemaker_tfs.service.logs import configure_logging
from sagemaker_tfs.service.metrics import (
    InvocationRecord,
    ServiceMetrics,
    recorded,
    service_metrics,
)
from sagemaker_tfs.service.request import (
    ParsedRequest,
    RequestBody,
    model_named_by,
    parse_request,
)
from sagemaker_tfs.service.routing.connections import Channels, RestClient, init_gevent_if_patched
from sagemaker_tfs.service.routing.model_servers import InstancePicker, InstanceRotation
from sagemaker_tfs.stack_config import STACK_CONFIG_ENV, StackConfig
from sagemaker_tfs.wire.http_headers import (
    ARRIVAL_HEADER,
    CLOSED_SESSION_HEADER,
    NEW_SESSION_HEADER,
    SESSION_HEADER,
    arrival_time,
)
from sagemaker_tfs.wire.metrics import ROUTE_SESSION, SHED_EXPIRED

logger = logging.getLogger(__name__)


BODY_PIECE_BYTES = 1 << 20


def read_body(req: falcon.Request) -> bytes:
    """The whole body, in one allocation of its Content-Length (nginx always sends one).

    gunicorn reads a whole body into a growing buffer: an eighth more than the body, and a copy
    whenever the allocator cannot grow it in place. Here each piece goes straight into a buffer
    of the final size: a ``BytesIO`` over ``bytes`` that it alone holds is written in place,
    and ``getvalue()`` then hands on that very ``bytes``, no copy.
    """
    length = req.content_length
    if not length:
        return req.bounded_stream.read()
    buffer = io.BytesIO(bytes(length))
    with buffer.getbuffer() as view:
        filled = 0
        while filled < length:
            piece = req.bounded_stream.read(min(BODY_PIECE_BYTES, length - filled))
            if not piece:
                raise errors.HttpError(
                    400, f"The request body ended after {filled} of its {length} bytes"
                )
            view[filled : filled + len(piece)] = piece
            filled += len(piece)
    return buffer.getvalue()


SEND_PIECE_BYTES = 1 << 20
# The send buffer of a connection that carries an answer larger than SEND_PIECE_BYTES.
# Under gevent, sendall waits in the hub each time the buffer is full until nginx has read
# some: with the kernel's default 208 KB that is ~260 waits for a 55 MB answer (the larger
# buffer saved 3-8 ms of ~120, docs/performance.md). The kernel caps it at net.core.wmem_max.
LARGE_ANSWER_SEND_BUFFER_BYTES = 4 << 20


# Tells nginx not to buffer the answer (it honours the header and hides it from the client).
NO_PROXY_BUFFERING = ("X-Accel-Buffering", "no")


def _answer(req: falcon.Request, resp: falcon.Response, reply: Reply) -> None:
    _send(resp, reply)
    if resp.stream is not None and not isinstance(reply.body, HandlerStream):
        enlarge_send_buffer(req.env.get("gunicorn.socket"))


def enlarge_send_buffer(connection: socket.socket | None) -> None:
    """Best effort: the answer is sent either way."""
    if connection is not None:
        with contextlib.suppress(OSError):
            connection.setsockopt(
                socket.SOL_SOCKET, socket.SO_SNDBUF, LARGE_ANSWER_SEND_BUFFER_BYTES
            )


def _send(resp: falcon.Response, reply: Reply) -> None:
    resp.status = reply.status
    resp.content_type = reply.content_type
    for name, value in reply.headers:
        resp.set_header(name, value)
    if isinstance(reply.body, bytes):
        resp.data = reply.body
        return
    if isinstance(reply.body, StreamedBody):
        _send_streamed(resp, reply.body)
        return
    if isinstance(reply.body, WrittenBody):  # no Content-Length: sent chunked as it is written
        resp.stream = _pieces(reply.body.chunks)
        return
    if isinstance(reply.body, HandlerStream):
        # no Content-Length: gunicorn sends each chunk as an HTTP/1.1 chunk as it comes
        resp.set_header(*NO_PROXY_BUFFERING)
        resp.stream = reply.body.chunks()
        return
    length = sum(len(chunk) for chunk in reply.body)
    if length <= SEND_PIECE_BYTES:
        resp.data = b"".join(reply.body)
        return
    resp.content_length = length
    resp.stream = _pieces(reply.body)


def _send_streamed(resp: falcon.Response, body: StreamedBody) -> None:
    """An answer passed on while it arrives; a small one is gathered first."""
    if body.length <= SEND_PIECE_BYTES:
        try:
            resp.data = b"".join(body.chunks)
        except Exception as error:  # noqa: BLE001 - the model server's answer broke off
            logger.warning("model server answer broke off: %s", error)
            raise errors.HttpError(502, f"The model server's answer broke off: {error}") from None
        return
    resp.content_length = body.length
    resp.stream = _cut_short_on_failure(_pieces(body.chunks))


def _cut_short_on_failure(chunks: Iterator[bytes]) -> Iterator[bytes]:
    """The chunks; if the answer breaks off midway (the model server failed, the status was
    sent long ago), one line is logged and the connection is reset, so that nginx and the
    client see a truncated answer at once rather than wait for the missing bytes."""
    try:
        yield from chunks
    except Exception as error:  # noqa: BLE001 - any failure here can only cut the answer
        logger.warning("answer cut short: the model server's answer broke off: %s", error)
        raise ConnectionResetError(errno.ECONNRESET, "answer cut short") from None


def _pieces(chunks: Iterable[bytes | memoryview]) -> Iterator[bytes]:
    """The chunks as ``bytes`` of at most 1 MiB (WSGI servers take bytes; copying a large
    answer piece by piece reuses the same memory instead of faulting in one more copy). A
    view of a whole ``bytes`` (a message as received from the model server) is that ``bytes``,
    not a copy."""
    for chunk in chunks:
        if isinstance(chunk, memoryview):
            chunk = _whole_bytes(chunk) or chunk
        if isinstance(chunk, bytes) and len(chunk) <= SEND_PIECE_BYTES:
            yield chunk
            continue
        view = memoryview(chunk)
        for start in range(0, len(view), SEND_PIECE_BYTES):
            yield bytes(view[start : start + SEND_PIECE_BYTES])


def _whole_bytes(view: memoryview) -> bytes | None:
    """The ``bytes`` object ``view`` shows all of, if it is one."""
    whole = view.obj
    if isinstance(whole, bytes) and view.nbytes == len(whole) and view.c_contiguous:
        return whole
    return None


class Service(ABC):
    """Everything a worker keeps between requests (made once per worker, for one mode)."""

    def __init__(self, config: StackConfig, channels: Channels, rest: RestClient) -> None:
        self.config = config
        self.channels = channels
        self.metrics = service_metrics()
        self.invoker = Invoker(
            rest,
            ImageOptions(config.service.image_scale, config.service.image_offset),
            Limits(
                config.limits.max_text_body_mb,
                config.model_servers.timeout,
                config.invocation_timeout,
            ),
        )
        # handlers' sagemaker_tfs.client calls get the same deadline as the service's own
        client.set_default_timeout(config.model_servers.timeout)
        self.sessions = worker_sessions(config, self.metrics)
        self.body_budget = BodyBudget(
            (config.limits.max_body_mb_in_flight << 20) // config.service.workers,
            self.metrics.large_bodies_waiting.set if self.metrics is not None else None,
        )

    @abstractmethod
    def parse(self, req: falcon.Request, path_name: str | None, body_length: int) -> ParsedRequest:
        """The request as this mode reads it; ``path_name``: the model named in the path."""

    def answer(self, request: ParsedRequest, body: RequestBody, record: InvocationRecord) -> Reply:
        """Serve one invocation; with sessions on, open or close one, or serve in one."""
        if self.sessions is None:
            if request.session_id is not None:
                raise errors.HttpError(400, sessions.SESSIONS_OFF)
            return self.invoke(request, body, record)
        record.route = ROUTE_SESSION  # until a handler or the default handling takes it
        return serve_in_sessions(
            self.sessions, request, body, lambda state: self.invoke(request, body, record, state)
        )

    @abstractmethod
    def invoke(self, request: ParsedRequest, body: RequestBody, record: InvocationRecord,
               state: SessionState | None = None) -> Reply:  # fmt: skip
        """Serve one invocation (in the stateful session ``state``, if any)."""

    @abstractmethod
    def describe(self) -> str:
        """What this worker serves, for the start-up log line."""


def serve_in_sessions(
    held: Sessions,
    request: ParsedRequest,
    body: RequestBody,
    invoke: Callable[[SessionState | None], Reply],
) -> Reply:
    """Open or close a session (the handlers are not called), or ``invoke`` in the session
    the request names, or in none."""
    kind = sessions.control_request(body.data)
    session_id = sessions.requested_session(request.session_id)
    if kind == sessions.NEW_SESSION:
        session = held.open()
        header = f"{session.id}; Expires={session.expires()}"
        answer = {"session_id": session.id, "expires": session.expires()}
        return _session_reply(answer, (NEW_SESSION_HEADER, header))
    if kind == sessions.CLOSE:
        if session_id is None:
            raise errors.HttpError(
                400, f"A CLOSE request names the session to close in {SESSION_HEADER}"
            )
        held.close(session_id)
        return _session_reply({"session_id": session_id, "closed": True},
                              (CLOSED_SESSION_HEADER, session_id))  # fmt: skip
    if session_id is None:
        return invoke(None)
    session = held.find(session_id)
    return invoke(SessionState(session.id, session.store))


def _session_reply(answer: dict[str, Any], header: tuple[str, str]) -> Reply:
    return Reply(200, json.dumps(answer).encode(), falcon.MEDIA_JSON, (header,))


class SingleModelService(Service):
    """One model directory (one or several models), served by one or more model server
    instances in turn; the request names its model in the custom attributes, if at all."""

    def __init__(self, config: StackConfig, channels: Channels, rest: RestClient,
                 user_code: UserCode | None, picker: InstancePicker) -> None:  # fmt: skip
        super().__init__(config, channels, rest)
        self.user_code = user_code
        self.picker = picker

    def parse(self, req: falcon.Request, path_name: str | None, body_length: int) -> ParsedRequest:
        """The Target-Model header means nothing here and is not read."""
        return parse_request(req, body_length, self.config.default_model, None)

    def invoke(self, request: ParsedRequest, body: RequestBody, record: InvocationRecord,
               state: SessionState | None = None) -> Reply:  # fmt: skip
        candidates = InstanceRotation(self.picker, self.channels)
        return self.invoker.invoke(request, body, self.user_code, candidates, record, state)

    def describe(self) -> str:
        ports = [(i.grpc_port, i.rest_port) for i in self.config.instances]
        code = self.user_code.path if self.user_code else None
        return f"multi_model=False user_code={code} instances={ports}"


class MultiModelService(Service):
    """Multi-model endpoint: models loaded and unloaded at run time, served by the shared
    model servers (``config.instances``, in turn, as single-model requests are) or each by a
    model server of its own; the request names its model in the path or the Target-Model
    header."""

    def __init__(self, config: StackConfig, channels: Channels, rest: RestClient,
                 directory: ModelDirectory) -> None:  # fmt: skip
        super().__init__(config, channels, rest)
        self.directory = directory
        self.picker = InstancePicker(config.instances) if config.instances else None

    def parse(self, req: falcon.Request, path_name: str | None, body_length: int) -> ParsedRequest:
        return parse_request(req, body_length, None, model_named_by(req, path_name))

    def invoke(self, request: ParsedRequest, body: RequestBody, record: InvocationRecord,
               state: SessionState | None = None) -> Reply:  # fmt: skip
        """After a server-side failure, or a shared model server's 404 (it dropped the model),
        the registry's 404 if the model was unloaded meanwhile."""
        name = request.target.model_name
        model = RegisteredModel(self.directory, self.channels, name)
        shared = self.picker is not None
        candidates = InstanceRotation(self.picker, self.channels) if self.picker else model
        user_code = self.directory.user_code(model.location)
        try:
            reply = self.invoker.invoke(request, body, user_code, candidates, record, state)
        except errors.HttpError as error:
            unloaded_meanwhile = error.status >= 500 or (shared and error.status == 404)
            if not unloaded_meanwhile or isinstance(
                error, (errors.ModelServerUnavailable, errors.Overloaded)
            ):
                raise
            self._raise_if_unloaded(name)
            raise
        if shared and reply.status == 404:
            self._raise_if_unloaded(name)
        return reply

    def _raise_if_unloaded(self, name: str) -> None:
        self.directory.forget(name)
        self.directory.lookup(name)  # raises 404 if it was unloaded

    def describe(self) -> str:
        ports = [(i.grpc_port, i.rest_port) for i in self.config.instances]
        return f"multi_model=True shared_instances={ports or None}"


class Ping:
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = {}


def _serve(service: Service, req: falcon.Request, resp: falcon.Response,
           path_name: str | None) -> None:  # fmt: skip
    """The edge: the request read once (body, then line and headers), served, answered."""
    with recorded(service.metrics, resp) as record, _body_share(service, req, resp):
        body = RequestBody(read_body(req))
        request = service.parse(req, path_name, body.length)
        record.target(request.target)
        _answer(req, resp, service.answer(request, body, record))


@contextlib.contextmanager
def _body_share(service: Service, req: falcon.Request, resp: falcon.Response) -> Iterator[None]:
    """A large body's share of the worker's budget (``body_budget.py``), taken before the
    body is read (waiting, if need be, until the request's deadline) and given back once the
    answer is sent: at the end of the block, or when the server closes a streamed answer."""
    budget, size = service.body_budget, req.content_length or 0
    if not budget.counts(size):
        yield
        return
    timeout = service.config.invocation_timeout
    if not budget.take(size, seconds_left(arrival_time(req.get_header(ARRIVAL_HEADER)), timeout)):
        raise errors.Overloaded(
            SHED_EXPIRED,
            f"The endpoint is overloaded: the request waited past the invocation timeout "
            f"({timeout:g} s) behind other large bodies (SAGEMAKER_TFS_MAX_BODY_MB_IN_FLIGHT); "
            "retry later",
        )
    handed_over = False
    try:
        yield
        if resp.stream is not None:  # always an iterator of bytes here (``_send``)
            chunks = cast(Iterable[bytes], resp.stream)
            resp.stream = GivenBackWhenClosed(chunks, lambda: budget.give_back(size))
            handed_over = True
    finally:
        if not handed_over:
            budget.give_back(size)


class Invocations:
    def __init__(self, service: Service) -> None:
        self._service = service

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        _serve(self._service, req, resp, None)


class ModelInvoke:
    def __init__(self, service: Service) -> None:
        self._service = service

    def on_post(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        _serve(self._service, req, resp, name)


def not_found(req: falcon.Request, resp: falcon.Response, **groups: Any) -> None:
    errors.json_error(resp, 404, f"Not Found: {req.path}")


def worker_sessions(config: StackConfig, metrics: ServiceMetrics | None) -> Sessions | None:
    """This worker's stateful sessions when they are on (``sessions.worker_slot()`` names the
    worker in their ids), swept of expired ones in the background."""
    if not config.sessions.enabled:
        return None
    on_change = metrics.sessions_open.set if metrics is not None else None
    held = Sessions(
        sessions.worker_slot(),
        config.sessions.ttl_seconds,
        config.sessions.max_sessions,
        on_change=on_change,
    )
    sessions.sweep_periodically(
        held, min(sessions.SWEEP_INTERVAL_SECONDS, config.sessions.ttl_seconds)
    )
    return held


def make_service(config: StackConfig) -> Service:
    """The service of the endpoint's mode, chosen once per worker."""
    channels = Channels(config.work.grpc_socket_path)
    if config.multi_model.enabled:
        add_installed_packages(config.work.root)  # the shared requirements.txt's
        directory = ModelDirectory(
            ControlClient(config.work.control_socket),
            channels,
            config.model_dir,
            config.multi_model.universal_code_dir,
        )
        return MultiModelService(config, channels, RestClient(), directory)
    ensure_requirements(config.code_dir, config.work.root)
    user_code = load_user_code(config.code_dir, config.work.root)
    for instance in config.instances:  # channels are made once per worker, up front
        channels.get(instance.grpc_port)
    picker = InstancePicker(config.instances)
    return SingleModelService(config, channels, RestClient(), user_code, picker)


def _describe_sessions(held: Sessions | None) -> str:
    if held is None:
        return "off"
    return f"worker_slot={held.slot} ttl={held.ttl_seconds}s max={held.limit}"


def build_app(service: Service) -> falcon.App:
    app = falcon.App()
    errors.install(app)
    app.add_route("/ping", Ping())
    app.add_route("/invocations", Invocations(service))
    if isinstance(service, MultiModelService):
        app.add_route("/models/{name}/invoke", ModelInvoke(service))
    app.add_sink(not_found)
    return app


def create_app(config: StackConfig | None = None) -> falcon.App:
    """gunicorn's entry point; ``config`` defaults to ``$SAGEMAKER_TFS_STACK_CONFIG``."""
    if config is None:
        config = StackConfig.load(os.environ[STACK_CONFIG_ENV])
    configure_logging(config.service.log_level)
    gevent = init_gevent_if_patched()
    service = make_service(config)
    logger.info(
        "service ready: %s gevent=%s image_decoding_cores=%d sessions=%s",
        service.describe(),
        gevent,
        native_threads.usable_cores(),
        _describe_sessions(service.sessions),
    )
    return build_app(service)
