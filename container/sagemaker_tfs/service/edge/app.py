"""The Python service: a falcon WSGI app run by gunicorn (``app:create_app()``).

It serves what nginx hands over: ``/invocations`` when ``code/inference.py`` exists or the
content type is not one njs converts, and ``/models/NAME/invoke`` on multi-model endpoints.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from typing import Any, cast

import falcon

from sagemaker_tfs import client
from sagemaker_tfs.service import errors
from sagemaker_tfs.service.codecs.image_inputs import ImageOptions, usable_cores
from sagemaker_tfs.service.edge import sessions
from sagemaker_tfs.service.edge.body_budget import BodyBudget, GivenBackWhenClosed
from sagemaker_tfs.service.edge.client_link import still_wanted_by
from sagemaker_tfs.service.edge.http_bodies import read_body, send_answer
from sagemaker_tfs.service.edge.sessions import Sessions
from sagemaker_tfs.service.handlers.invoke import Invoker, Limits, Reply, SessionState, seconds_left
from sagemaker_tfs.service.handlers.multi_model import (
    ControlClient,
    ModelDirectory,
    RegisteredModel,
)
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
from sagemaker_tfs.service.routing.model_servers import (
    InstancePicker,
    InstanceRotation,
    always_wanted,
)
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

    def answer(self, request: ParsedRequest, body: RequestBody, record: InvocationRecord,
               still_wanted: Callable[[], bool] = always_wanted) -> Reply:  # fmt: skip
        """Serve one invocation; with sessions on, open or close one, or serve in one.
        ``still_wanted``: whether the client still waits (``client_link``)."""
        if self.sessions is None:
            if request.session_id is not None:
                raise errors.HttpError(400, sessions.SESSIONS_OFF)
            return self.invoke(request, body, record, None, still_wanted)
        record.route = ROUTE_SESSION  # until a handler or the default handling takes it
        return serve_in_sessions(
            self.sessions, request, body,
            lambda state: self.invoke(request, body, record, state, still_wanted),
        )  # fmt: skip

    @abstractmethod
    def invoke(self, request: ParsedRequest, body: RequestBody, record: InvocationRecord,
               state: SessionState | None = None,
               still_wanted: Callable[[], bool] = always_wanted) -> Reply:  # fmt: skip
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
               state: SessionState | None = None,
               still_wanted: Callable[[], bool] = always_wanted) -> Reply:  # fmt: skip
        candidates = InstanceRotation(self.picker, self.channels)
        return self.invoker.run(request, body, self.user_code, candidates, record, state,
                                still_wanted)  # fmt: skip

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
               state: SessionState | None = None,
               still_wanted: Callable[[], bool] = always_wanted) -> Reply:  # fmt: skip
        """After a server-side failure, or a shared model server's 404 (it dropped the model),
        the registry's 404 if the model was unloaded meanwhile."""
        name = request.target.model_name
        model = RegisteredModel(self.directory, self.channels, name)
        shared = self.picker is not None
        candidates = InstanceRotation(self.picker, self.channels) if self.picker else model
        user_code = self.directory.user_code(model.location)
        try:
            reply = self.invoker.run(request, body, user_code, candidates, record, state,
                                     still_wanted)  # fmt: skip
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
        send_answer(req, resp, service.answer(request, body, record, still_wanted_by(req.env)))


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
        if resp.stream is not None:  # always an iterator of bytes here (``http_bodies``)
            chunks = cast(Iterable[bytes], resp.stream)
            resp.stream = GivenBackWhenClosed(chunks, lambda: budget.give_back(size))
            handed_over = True
    finally:
        if not handed_over:
            budget.give_back(size)


class Invocations:
    """``/invocations``, and ``/models/{name}/invoke`` (``name``: the model in the path)."""

    def __init__(self, service: Service) -> None:
        self._service = service

    def on_post(self, req: falcon.Request, resp: falcon.Response, name: str | None = None) -> None:
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
        app.add_route("/models/{name}/invoke", Invocations(service))
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
        usable_cores(),
        _describe_sessions(service.sessions),
    )
    return build_app(service)
