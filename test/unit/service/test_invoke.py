"""What the service makes of handler results and handler exceptions (handler style only:
no model server is involved, the pair style is covered by the stack tests)."""

from __future__ import annotations

import json
from typing import Any

import pytest
import requests
from sagemaker_tfs.service.context import build_context
from sagemaker_tfs.service.handlers import UserCode
from sagemaker_tfs.service.invoke import Reply, call_user_code, first_accept, model_server_error
from sagemaker_tfs.service.routing import Route
from sagemaker_tfs.wire.errors import HttpError

CONTEXT = build_context(
    Route("m", None, "predict"), 9000, 8501, None, "", "text/csv", "text/csv", 3
)


def run(result_or_error: Any) -> Reply:
    def handler(data, context):  # type: ignore[no-untyped-def]
        assert data.read() == b"abc" and context is CONTEXT
        if isinstance(result_or_error, Exception):
            raise result_or_error
        return result_or_error

    return call_user_code(UserCode("x.py", handler=handler), b"abc", CONTEXT, requests.Session())


@pytest.mark.parametrize(
    ("result", "body", "content_type"),
    [
        ((b"\x00raw", "application/octet-stream"), b"\x00raw", "application/octet-stream"),
        (("text", "text/plain"), b"text", "text/plain"),
        (({"a": 1}, "application/json"), b'{"a": 1}', "application/json"),
        (b"bare bytes", b"bare bytes", "text/csv"),
        ("bare text", b"bare text", "text/csv"),
        ([1, 2], b"[1, 2]", "text/csv"),
        (("x", None), b"x", "text/csv"),
    ],
)
def test_handler_results(result: Any, body: bytes, content_type: str) -> None:
    assert run(result) == Reply(200, body, content_type)


def test_exception_text_is_the_error() -> None:
    with pytest.raises(HttpError) as raised:
        run(ValueError("bad things"))
    assert (raised.value.status, raised.value.message) == (500, "bad things")


def test_request_parsing_errors_are_400() -> None:
    try:
        json.loads("{")
    except json.JSONDecodeError as error:
        decode_error = error
    with pytest.raises(HttpError) as raised:
        run(decode_error)
    assert raised.value.status == 400
    assert "Expecting property name" in raised.value.message


def test_exception_without_text_uses_its_type() -> None:
    with pytest.raises(HttpError) as raised:
        run(KeyError())
    assert raised.value.message == "KeyError"


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("application/jsonlines", "application/jsonlines"),
        ("Application/JSONLines; q=1, application/json", "application/jsonlines"),
        ("", ""),
        ("*/*", "*/*"),
    ],
)
def test_first_accept(header: str, expected: str) -> None:
    assert first_accept(header) == expected


@pytest.mark.parametrize("body", ["[" * 100_000 + "]" * 100_000, "[" + "7" * 5000 + "]"])
def test_handlers_parsing_hostile_json_give_400(body: str) -> None:
    """A deep nesting (RecursionError) or a 5000-digit integer (ValueError from int()) raised
    while a handler parses the body is the request's fault."""
    try:
        json.loads(body)
    except (RecursionError, ValueError) as error:
        parse_error = error
    with pytest.raises(HttpError) as raised:
        run(parse_error)
    assert raised.value.status == 400


def model_server_response(status: int, body: bytes, reason: str = "") -> requests.Response:
    response = requests.Response()
    response.status_code, response._content, response.reason = status, body, reason
    return response


def test_a_model_server_error_is_passed_on_as_it_is() -> None:
    body = b'{ "error": "JSON Parse error: The document is empty. at offset: 0" }'
    assert model_server_error(model_server_response(400, body)) == Reply(
        400, body, "application/json"
    )


@pytest.mark.parametrize(
    ("body", "reason", "message"),
    [
        (b"<html>Bad Gateway</html>\n", "", "<html>Bad Gateway</html>"),
        (b"", "Bad Gateway", "Bad Gateway"),
    ],
)
def test_a_model_server_error_that_is_not_json_becomes_json(
    body: bytes, reason: str, message: str
) -> None:
    reply = model_server_error(model_server_response(502, body, reason))
    assert (reply.status, json.loads(reply.body)) == (502, {"error": message})
