"""One invocation's request, read once at the edge: everything the service uses of its line and
headers, typed. Nothing after ``app.py`` reads the falcon request again.

Each header is parsed by its one function in ``wire/http_headers.py``; the target model is
resolved here too (``routing.route``), so a bad name, version or method is a 400 before any
work is done.
"""

from __future__ import annotations

from dataclasses import dataclass

import falcon

from sagemaker_tfs.service.routing import Route, check_model_name, route
from sagemaker_tfs.wire.errors import HttpError
from sagemaker_tfs.wire.http_headers import (
    ARRIVAL_HEADER,
    CUSTOM_ATTRIBUTES_HEADER,
    SESSION_HEADER,
    TARGET_MODEL_HEADER,
    CustomAttributes,
    MediaType,
    accept_list,
    arrival_time,
    custom_attributes,
    media_type,
    session_id,
    trim,
)

DEFAULT_MEDIA_TYPE = "application/json"


@dataclass(frozen=True)
class ParsedRequest:
    """``content_type``: application/json when the request names none. ``accept``: the types
    listed, in order (empty: none, the answer's type is the service's choice);
    ``accept_header``: the header as sent, trimmed, for the handler's ``Context``;
    ``arrival``: when nginx received it (epoch seconds), None when nginx did not say;
    ``session_id``: the ``X-Amzn-SageMaker-Session-Id`` header, None when absent."""

    method: str
    path: str
    content_type: MediaType
    accept: tuple[MediaType, ...]
    accept_header: str
    custom_attributes: CustomAttributes
    target: Route
    content_length: int
    arrival: float | None = None
    session_id: str | None = None

    @property
    def first_accept(self) -> str:
        """The first listed media type ('' when none is)."""
        return self.accept[0].name if self.accept else ""


def model_named_by(req: falcon.Request, path_name: str | None) -> str | None:
    """The model a multi-model request names: its path's, else the Target-Model header's."""
    if path_name is not None:
        return path_name
    header = req.get_header(TARGET_MODEL_HEADER)
    return trim(header) if header else None


def parse_request(
    req: falcon.Request, body_length: int, default_model: str | None, named_model: str | None
) -> ParsedRequest:
    """``default_model``: single-model mode's model for a request that names none;
    ``named_model``: multi-model mode's (``model_named_by``), which the request must give."""
    attributes = custom_attributes(req.get_header(CUSTOM_ATTRIBUTES_HEADER))
    if named_model is not None:
        target = route(attributes, check_model_name(named_model))._replace(model_name=named_model)
    elif default_model is None:
        raise HttpError(
            400, f"Multi-model endpoint: set {TARGET_MODEL_HEADER} or use /models/NAME/invoke"
        )
    else:
        target = route(attributes, default_model)
    content_type = media_type(req.get_header("Content-Type"))
    if not content_type.name:
        content_type = MediaType(DEFAULT_MEDIA_TYPE)
    accept_header = trim(req.get_header("Accept") or "")
    return ParsedRequest(
        method=req.method,
        path=req.path,
        content_type=content_type,
        accept=accept_list(accept_header),
        accept_header=accept_header,
        custom_attributes=attributes,
        target=target,
        content_length=req.content_length if req.content_length is not None else body_length,
        arrival=arrival_time(req.get_header(ARRIVAL_HEADER)),
        session_id=session_id(req.get_header(SESSION_HEADER)),
    )
