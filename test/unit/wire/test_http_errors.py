"""sagemaker_tfs.wire.errors: one HTTP error, short messages, valid JSON, TF Serving statuses."""

from __future__ import annotations

import json

from sagemaker_tfs.wire import errors
from sagemaker_tfs.wire.errors import HttpError


def test_excerpt_is_short_and_printable() -> None:
    text = errors.excerpt("a\n" * 100)
    assert len(text) <= errors.EXCERPT_CHARS + 3 and "\n" not in text
    assert errors.excerpt(b"\xff\x00") == "b'\\xff\\x00'"


def test_long_messages_are_cut() -> None:
    error = HttpError(400, "x" * 10_000)
    assert error.status == 400
    assert error.message == "x" * errors.MESSAGE_CHARS + "..."
    assert str(error) == error.message


def test_body_is_json_even_for_lone_surrogates_and_control_characters() -> None:
    body = HttpError(400, "bad \ud800 \x00 \n input").body()
    body.decode("ascii")  # every non-ASCII character escaped
    assert json.loads(body) == {"error": "bad \ud800 \x00 \n input"}


def test_grpc_codes_map_as_tf_serving_rest_does() -> None:
    assert errors.http_status_of_grpc_code("INVALID_ARGUMENT") == 400
    assert errors.http_status_of_grpc_code("NOT_FOUND") == 404
    assert errors.http_status_of_grpc_code("UNAVAILABLE") == 503
    assert errors.http_status_of_grpc_code("INTERNAL") == 500
    assert errors.http_status_of_grpc_code(None) == 500
