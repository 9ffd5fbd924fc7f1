"""``Context``: what a user handler learns of its request (docs/contract.md, field order kept)."""

from __future__ import annotations

from collections import namedtuple
from typing import Any

from sagemaker_tfs.service.routing import Route, rest_uri

DEFAULT_MEDIA_TYPE = "application/json"

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


def media_type(header: str | None) -> str:
    """``application/json; charset=utf-8`` -> ``application/json``; default when absent."""
    value = (header or "").split(";")[0].strip().lower()
    return value or DEFAULT_MEDIA_TYPE


def build_context(
    target: Route,
    grpc_port: int,
    rest_port: int,
    channel: Any,
    custom_attributes: str | None,
    content_type: str | None,
    accept: str | None,
    content_length: int,
) -> Context:
    """The gRPC port is given as a string (as the reference container does) under both names."""
    port = str(grpc_port)
    accept_header = (accept or "").strip()
    if accept_header in ("", "*/*"):
        accept_header = DEFAULT_MEDIA_TYPE
    return Context(
        model_name=target.model_name,
        model_version=target.model_version,
        method=target.method,
        rest_uri=rest_uri(rest_port, target),
        grpc_port=port,
        channel=channel,
        custom_attributes=custom_attributes or "",
        request_content_type=media_type(content_type),
        accept_header=accept_header,
        content_length=content_length,
        grpc_uri=port,
    )
