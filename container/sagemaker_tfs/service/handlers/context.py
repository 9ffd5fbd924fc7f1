"""``Context``: what a user handler learns about its request (docs/contract.md, field order kept),
made from the parsed request and the model server chosen to serve it."""

from __future__ import annotations

from collections import namedtuple
from typing import Any

from sagemaker_tfs.service.request import ParsedRequest
from sagemaker_tfs.service.routing.model_servers import ModelServer
from sagemaker_tfs.service.targets import rest_uri

_ContextFields = namedtuple(
    "_ContextFields",
    [
        "model_name",
        "model_version",
        "method",
        "rest_uri",
        "grpc_port",
        "channel",
        "custom_attributes",
        "request_content_type",
        "accept_header",
        "content_length",
        "grpc_uri",
    ],
)


class Context(_ContextFields):
    """The eleven fields, in the contract's order (handlers may unpack them by position), and
    attributes beside them, so that unpacking stays as it was: ``session_id``, the id of
    the stateful session the request belongs to, and ``session``, that session's own dict,
    kept between its requests (both None outside a session); for a bidirectional stream,
    ``invocation_path``, the path it was opened on as SageMaker's ModelInvocationPath names it
    (``invocations-bidirectional-stream`` by default), and ``query_string``, the URL's query
    string as sent (SageMaker's ModelQueryString, '' without one); both None elsewhere."""

    session_id: str | None = None
    session: dict[str, Any] | None = None
    invocation_path: str | None = None
    query_string: str | None = None


def build_context(
    request: ParsedRequest,
    server: ModelServer,
    session_id: str | None = None,
    session: dict[str, Any] | None = None,
) -> Context:
    """The gRPC port is given as a string (as the reference container does) under both names."""
    port = str(server.grpc_port)
    context = Context(
        model_name=request.target.model_name,
        model_version=request.target.model_version,
        method=request.target.method,
        rest_uri=rest_uri(server.rest_port, request.target),
        grpc_port=port,
        channel=server.channel,
        custom_attributes=request.custom_attributes.header,
        request_content_type=request.content_type.name,
        accept_header=request.answer.handler,
        content_length=request.content_length,
        grpc_uri=port,
    )
    if session_id is not None:
        context.session_id = session_id
        context.session = session
    return context
