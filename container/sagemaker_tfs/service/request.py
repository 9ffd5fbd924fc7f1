"""One invocation's request, read once at the edge: everything the service uses of its line and
headers, typed. Nothing after ``app.py`` reads the falcon request again.

Each header is parsed by its one function in ``wire/http_headers.py``; the target model is
resolved here too (``targets.model_target``), so a bad name, version or method is a 400 before any
work is done.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import falcon

from sagemaker_tfs.service.codecs.content_types import JSON
from sagemaker_tfs.service.codecs.registry import AnswerType, answer_type
from sagemaker_tfs.service.targets import ModelTarget, check_model_name, model_target
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
    strip_optional_whitespace,
)


class RequestBody:
    """The request's body, held by the frames between the edge and what reads it, so that a
    reader that is done with it can let it go while the request is still served: the text
    path, once the inputs' arrays are read (the body is then ~0.6-1x them: issue 53)."""

    __slots__ = ("_data", "length")

    def __init__(self, data: bytes) -> None:
        self._data: bytes | None = data
        self.length = len(data)

    @property
    def data(self) -> bytes:
        if self._data is None:
            raise RuntimeError("the request body was already let go of")
        return self._data

    def let_go(self) -> None:
        """Drop the body: no one may read it afterwards."""
        self._data = None


@dataclass(frozen=True)
class ParsedRequest:
    """``content_type``: application/json when the request names none. ``accept``: the types
    listed, in order (empty: none); ``answer``: the answer's media type they decide, for each
    way of answering (``registry.answer_type``); ``arrival``: when nginx received it
    (epoch seconds), None when nginx did not say; ``session_id``: the
    ``X-Amzn-SageMaker-Session-Id`` header, None when absent."""

    content_type: MediaType
    accept: tuple[MediaType, ...]
    answer: AnswerType
    custom_attributes: CustomAttributes
    target: ModelTarget
    content_length: int
    arrival: float | None = None
    session_id: str | None = None


def model_named_by(req: falcon.Request, path_name: str | None) -> str | None:
    """The model a multi-model request names: its path's, else the Target-Model header's."""
    if path_name is not None:
        return path_name
    header = req.get_header(TARGET_MODEL_HEADER)
    return strip_optional_whitespace(header) if header else None


def parse_request(
    req: falcon.Request, body_length: int, default_model: str | None, named_model: str | None
) -> ParsedRequest:
    """``default_model``: single-model mode's model for a request that names none;
    ``named_model``: multi-model mode's (``model_named_by``), which the request must give."""

    def target_of(attributes: CustomAttributes) -> ModelTarget:
        if named_model is not None:
            return model_target(attributes, check_model_name(named_model))._replace(
                model_name=named_model
            )
        if default_model is None:
            raise HttpError(
                400, f"Multi-model endpoint: set {TARGET_MODEL_HEADER} or use /models/NAME/invoke"
            )
        return model_target(attributes, default_model)

    length = req.content_length if req.content_length is not None else body_length
    return parse_headers(req.get_header, length, target_of)


def parse_headers(
    header: Callable[[str], str | None],
    content_length: int,
    target_of: Callable[[CustomAttributes], ModelTarget],
) -> ParsedRequest:
    """Every header read once (``header``: its value by name), the target model resolved
    from the custom attributes by ``target_of``; an invocation's, or a stream's handshake's."""
    attributes = custom_attributes(header(CUSTOM_ATTRIBUTES_HEADER))
    target = target_of(attributes)
    content_type = media_type(header("Content-Type"))
    accept_header = strip_optional_whitespace(header("Accept") or "")
    accept = accept_list(accept_header)
    return ParsedRequest(
        content_type=content_type if content_type.name else MediaType(JSON),
        accept=accept,
        answer=answer_type(accept, accept_header),
        custom_attributes=attributes,
        target=target,
        content_length=content_length,
        arrival=arrival_time(header(ARRIVAL_HEADER)),
        session_id=session_id(header(SESSION_HEADER)),
    )
