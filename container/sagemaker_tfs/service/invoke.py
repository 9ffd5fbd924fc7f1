"""One invocation: user handlers, else the JSON/CSV conversions, else the binary fast path."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import grpc
import requests

from sagemaker_tfs import client
from sagemaker_tfs.config import DEFAULT_MAX_TEXT_BODY_MB
from sagemaker_tfs.service import conversion, fast_path
from sagemaker_tfs.service.answers import StreamedBody
from sagemaker_tfs.service.context import DEFAULT_MEDIA_TYPE, Context
from sagemaker_tfs.service.errors import ModelServerUnavailable
from sagemaker_tfs.service.handlers import UserCode
from sagemaker_tfs.wire.errors import HttpError

logger = logging.getLogger(__name__)

JSON_ACCEPTS = ("", "*/*", DEFAULT_MEDIA_TYPE) + conversion.JSON_LINES_TYPES
# Exceptions whose cause is the request rather than the handler or the server: what parsing
# a bad body raises (too deep a nesting is a RecursionError; an integer of 4300+ digits is a
# ValueError with this text).
REQUEST_ERRORS = (json.JSONDecodeError, UnicodeDecodeError, RecursionError)
_INT_DIGITS_LIMIT = "integer string conversion"
UNAVAILABLE = grpc.StatusCode.UNAVAILABLE


@dataclass(frozen=True)
class Limits:
    """What the built-in handling allows one request (``StackConfig``'s values)."""

    text_body_mb: int = DEFAULT_MAX_TEXT_BODY_MB  # JSON and CSV converted here
    model_server_timeout: float = client.DEFAULT_TIMEOUT_SECONDS  # the Predict deadline


class Reply(NamedTuple):
    """An answer; ``body`` may be chunks to send in turn (the fast path's NumPy answers)."""

    status: int
    body: bytes | Sequence[bytes | memoryview] | StreamedBody
    content_type: str


def first_accept(accept_header: str) -> str:
    return accept_header.split(",")[0].split(";")[0].strip().lower()


def _as_bytes(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8")
    return json.dumps(value).encode("utf-8")


def _handler_result(result: Any, context: Context) -> Reply:
    """``(body, content_type)``; a bare body is answered with the Accept type."""
    if isinstance(result, tuple) and len(result) == 2:
        body, content_type = result
        return Reply(200, _as_bytes(body), str(content_type or context.accept_header))
    return Reply(200, _as_bytes(result), context.accept_header)


def _handler_error(error: Exception) -> HttpError:
    caused_by_request = isinstance(error, REQUEST_ERRORS) or (
        isinstance(error, ValueError) and _INT_DIGITS_LIMIT in str(error)
    )
    message = str(error) or type(error).__name__
    return HttpError(400 if caused_by_request else 500, message)


def post_to_model_server(session: requests.Session, uri: str, body: Any) -> requests.Response:
    try:
        return session.post(
            uri, data=body, headers={"Content-Type": DEFAULT_MEDIA_TYPE}, timeout=None
        )
    except requests.ConnectionError as error:
        raise ModelServerUnavailable(f"The model server is not available: {error}") from None


def call_user_code(
    user_code: UserCode, body: bytes, context: Context, session: requests.Session
) -> Reply:
    """Run the user's handler(s); their exceptions become JSON errors with the same text."""
    try:
        if user_code.handler is not None:
            return _handler_result(user_code.handler(io.BytesIO(body), context), context)
        assert user_code.input_handler and user_code.output_handler
        request_body = user_code.input_handler(io.BytesIO(body), context)
        response = post_to_model_server(session, context.rest_uri, _as_bytes(request_body))
        return _handler_result(user_code.output_handler(response, context), context)
    except HttpError:
        raise
    except Exception as error:
        if model_server_unreachable(error):  # retried on another instance: no warning yet
            raise ModelServerUnavailable(str(error) or type(error).__name__) from error
        logger.warning("handler %s raised %s: %s", user_code.path, type(error).__name__, error)
        raise _handler_error(error) from error


def model_server_unreachable(error: BaseException) -> bool:
    """The error (or one it was raised from) says the model server could not be reached:
    ``requests`` could not connect or lost the connection, or gRPC answered UNAVAILABLE."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, requests.ConnectionError):
            return True
        code = getattr(current, "code", None)
        if isinstance(current, grpc.RpcError) and callable(code) and code() == UNAVAILABLE:
            return True
        current = current.__cause__ or current.__context__
    return False


def _convert_and_predict(
    body: bytes, context: Context, session: requests.Session, accept_header: str | None
) -> Reply:
    request_body = conversion.convert(context.request_content_type, body)
    response = post_to_model_server(session, context.rest_uri, request_body.encode("utf-8"))
    one_line_type = conversion.one_line_json_type(accept_header)
    if one_line_type is not None:
        return Reply(response.status_code, response.content.replace(b"\n", b""), one_line_type)
    return Reply(response.status_code, response.content, DEFAULT_MEDIA_TYPE)


def default_handling(
    body: bytes,
    context: Context,
    session: requests.Session,
    accept_header: str | None = None,
    limits: Limits = Limits(),
) -> Reply:
    """No user code: convert JSON/CSV here, hand everything else to the fast path.

    ``accept_header`` is the request's own Accept (``context.accept_header`` says
    application/json for none at all, where the model server's JSON is answered unchanged).
    """
    convertible = context.request_content_type in conversion.CONVERTIBLE_TYPES
    if convertible and len(body) > limits.text_body_mb << 20:
        raise conversion.text_too_large(limits.text_body_mb)
    if convertible and first_accept(context.accept_header) in JSON_ACCEPTS:
        return _convert_and_predict(body, context, session, accept_header)
    chunks, content_type = fast_path.invoke(body, context, limits.model_server_timeout)
    return Reply(200, chunks, content_type)


def invoke(
    user_code: UserCode | None,
    body: bytes,
    context: Context,
    session: requests.Session,
    accept_header: str | None = None,
    limits: Limits = Limits(),
) -> Reply:
    if user_code is not None:
        return call_user_code(user_code, body, context, session)
    return default_handling(body, context, session, accept_header, limits)
