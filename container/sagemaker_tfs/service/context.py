"""``Context``: what a user handler learns about its request (docs/contract.md, field order kept),
made from the parsed request and the model server chosen to serve it."""

from __future__ import annotations

from collections import namedtuple

from sagemaker_tfs.service.model_servers import ModelServer
from sagemaker_tfs.service.request import DEFAULT_MEDIA_TYPE, ParsedRequest
from sagemaker_tfs.service.routing import rest_uri

Context = namedtuple(
    "Context",
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


def build_context(request: ParsedRequest, server: ModelServer) -> Context:
    """The gRPC port is given as a string (as the reference container does) under both names;
    an Accept of ``*/*`` or none at all says application/json."""
    port = str(server.grpc_port)
    accept_header = request.accept_header
    if accept_header in ("", "*/*"):
        accept_header = DEFAULT_MEDIA_TYPE
    return Context(
        model_name=request.target.model_name,
        model_version=request.target.model_version,
        method=request.target.method,
        rest_uri=rest_uri(server.rest_port, request.target),
        grpc_port=port,
        channel=server.channel,
        custom_attributes=request.custom_attributes.header,
        request_content_type=request.content_type.name,
        accept_header=accept_header,
        content_length=request.content_length,
        grpc_uri=port,
    )
