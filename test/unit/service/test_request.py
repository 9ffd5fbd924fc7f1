"""The request read once at the edge (``request.parse_request``), and its ``Context``."""

from __future__ import annotations

import falcon
import falcon.testing
import pytest
from sagemaker_tfs.service.codecs.registry import AnswerType
from sagemaker_tfs.service.handlers.context import build_context
from sagemaker_tfs.service.request import (
    ParsedRequest,
    RequestBody,
    model_named_by,
    parse_request,
)
from sagemaker_tfs.service.routing.model_servers import ModelServer
from sagemaker_tfs.service.targets import ModelTarget
from sagemaker_tfs.wire.errors import HttpError
from sagemaker_tfs.wire.http_headers import CUSTOM_ATTRIBUTES_HEADER, TARGET_MODEL_HEADER


def falcon_request(headers: dict[str, str] | None = None, body: bytes = b"") -> falcon.Request:
    env = falcon.testing.create_environ(
        path="/invocations", method="POST", headers=headers or {}, body=body
    )
    return falcon.Request(env)


def test_every_header_read_once_into_one_value() -> None:
    req = falcon_request(
        {
            "Content-Type": "Image/PNG; q=1",
            "Accept": " application/x-npy;q=0.5 , text/csv",
            CUSTOM_ATTRIBUTES_HEADER: "tfs-model-version=2,tfs-output-filter=a; b,mine=1",
            TARGET_MODEL_HEADER: "ignored.tar.gz",
        },
        b"abc",
    )
    request = parse_request(req, 3, "m", None)
    assert request.content_type.name == "image/png"
    assert request.content_type.parameter("q") == "1"
    assert [entry.name for entry in request.accept] == ["application/x-npy", "text/csv"]
    assert request.answer == AnswerType(
        tfs_json=False,
        one_line=None,
        fast_path="application/x-npy",
        handler="application/x-npy;q=0.5 , text/csv",
    )
    assert request.custom_attributes.output_filter == ("a", "b")
    assert request.target == ModelTarget("m", "2", "predict")
    assert request.content_length == 3


def test_defaults() -> None:
    request = parse_request(falcon_request(), 7, "m", None)
    assert request.content_type.name == "application/json"
    assert request.accept == () and request.answer == AnswerType(True, None, "application/json",
                                                                 "application/json")  # fmt: skip
    assert request.custom_attributes.header == ""
    assert request.content_length == 7  # no Content-Length header: the body's length


def test_multi_model_requests_name_their_model() -> None:
    req = falcon_request(
        {TARGET_MODEL_HEADER: " m2 ", CUSTOM_ATTRIBUTES_HEADER: "tfs-method=regress"}
    )
    assert model_named_by(req, None) == "m2"
    assert model_named_by(req, "from_path") == "from_path"
    request = parse_request(req, 0, None, model_named_by(req, None))
    assert request.target == ModelTarget("m2", None, "regress")
    with pytest.raises(HttpError) as unnamed:
        parse_request(falcon_request(), 0, None, None)
    assert unnamed.value.status == 400 and TARGET_MODEL_HEADER in unnamed.value.message
    with pytest.raises(HttpError) as bad:
        parse_request(falcon_request(), 0, None, "../etc")
    assert bad.value.status == 400


@pytest.mark.parametrize(
    "attributes", ["tfs-model-version=x", "tfs-method=explode", "tfs-model-name=a/b"]
)
def test_a_bad_target_is_a_400_before_any_work(attributes: str) -> None:
    with pytest.raises(HttpError) as raised:
        parse_request(falcon_request({CUSTOM_ATTRIBUTES_HEADER: attributes}), 0, "m", None)
    assert raised.value.status == 400


def parsed(**headers: str) -> ParsedRequest:
    return parse_request(falcon_request(headers, b"12345"), 5, "m", None)


def test_context_fields_in_the_contract_order_and_defaults() -> None:
    """Handlers may unpack the context by position: docs/contract.md's order, grpc_uri last."""
    request = parse_request(
        falcon_request({CUSTOM_ATTRIBUTES_HEADER: "tfs-model-version=2"}, b"12345"), 5, "m", None
    )
    context = build_context(request, ModelServer(9000, 8501, "chan"))
    assert tuple(context) == (
        "m",  # model_name
        "2",  # model_version
        "predict",  # method
        "http://127.0.0.1:8501/v1/models/m/versions/2:predict",  # rest_uri
        "9000",  # grpc_port, a string as the reference container gives it
        "chan",  # channel
        "tfs-model-version=2",  # custom_attributes
        "application/json",  # request_content_type (default)
        "application/json",  # accept_header (default)
        5,  # content_length
        "9000",  # grpc_uri
    )


def test_context_keeps_given_types() -> None:
    request = parsed(**{"Content-Type": "text/csv; charset=utf-8", "Accept": "*/*"})
    context = build_context(request, ModelServer(1, 2, None))
    assert context.request_content_type == "text/csv"
    assert context.accept_header == "application/json"
    assert build_context(parsed(Accept="text/csv, */*"), ModelServer(1, 2, None)).accept_header == (
        "text/csv, */*"
    )


@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        (
            "*/*, application/jsonlines",
            AnswerType(True, "application/json", "application/json", "*/*, application/jsonlines"),
        ),
        ("application/jsons", AnswerType(True, "application/jsons", None, "application/jsons")),
        ("application/*", AnswerType(False, None, "application/json", "application/*")),
        (
            "text/csv, application/json",
            AnswerType(False, "application/json", "text/csv", "text/csv, application/json"),
        ),
    ],
)
def test_the_answer_type_is_decided_once_for_every_way_of_answering(
    accept: str, expected: AnswerType
) -> None:
    """The JSON answer (its one-line type), the fast path's type (None: 406) and the handler's
    Accept, from one Accept header."""
    assert parsed(Accept=accept).answer == expected


def test_a_request_body_let_go_of_cannot_be_read_again() -> None:
    body = RequestBody(b"1,2\n")
    assert (body.data, body.length) == (b"1,2\n", 4)
    body.let_go()
    assert body.length == 4
    with pytest.raises(RuntimeError, match="let go of"):
        _ = body.data
