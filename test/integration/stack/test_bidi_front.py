"""The host stack through the stand-in of SageMaker's ``InvokeEndpointWithBidirectionalStream``
(``test/sdk/bidi_front.py``: request events -> WebSocket frames, frames and the close frame ->
response events), its event stream read back by botocore's own decoder and event parser
against the response union's shapes from the published service model.

The stack serves ``test_bidirectional_stream.STREAM_CODE`` (its mode chosen by the query
string) with a 3 s idle timeout.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from botocore.eventstream import EventStream, EventStreamBuffer
from botocore.exceptions import EventStreamError
from botocore.model import ShapeResolver
from botocore.parsers import EventStreamJSONParser
from test_bidirectional_stream import LIMITS, MODEL, STREAM_CODE
from whole_stack import Stack, stack_with_code

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "sdk"))
from bidi_front import (  # noqa: E402
    RESPONSE_SHAPES,
    InputValidationError,
    PayloadPart,
    invoke_endpoint_with_bidirectional_stream,
)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    root = tmp_path_factory.mktemp("bidi-front")
    code = root / "code-source"
    code.mkdir()
    (code / "inference.py").write_text(STREAM_CODE)
    with stack_with_code(root, MODEL, code, env=LIMITS) as running:
        yield running


def parsed(stream: bytes) -> tuple[list[dict], EventStreamError | None]:
    """The events as an SDK reads them, and the error event that ends the stream, if any."""
    shape = ShapeResolver(RESPONSE_SHAPES).get_shape_by_name("ResponseStreamEvent")
    raw = type("Raw", (), {"stream": lambda self: iter([stream])})()
    events = EventStream(
        raw, shape, EventStreamJSONParser(), "InvokeEndpointWithBidirectionalStream"
    )
    seen = []
    try:
        for event in events:
            seen.append(event)
    except EventStreamError as error:
        return seen, error
    return seen, None


def error_code(stream: bytes) -> str:
    """The ErrorCode of the last message (the SDK's parser keeps only Code and Message)."""
    buffer = EventStreamBuffer()
    buffer.add_data(stream)
    return json.loads(list(buffer)[-1].payload)["ErrorCode"]


def test_parts_become_frames_and_frames_become_events(stack: Stack) -> None:
    parts = [
        PayloadPart(b"text", "UTF8"),
        PayloadPart(b"\x00\xffbinary"),  # no DataType: a binary frame
        PayloadPart(b"Hello ", "UTF8", "PARTIAL"),  # a text frame, then continuation frames
        PayloadPart("Wörld".encode(), "UTF8", "PARTIAL"),
        PayloadPart(b"!", "UTF8", "COMPLETE"),
    ]
    query = "mode=context&voice=alto&sample_rate=16000"
    stream = invoke_endpoint_with_bidirectional_stream(stack.url, parts, None, query)
    events, error = parsed(stream)
    context = json.loads(events[0]["PayloadPart"]["Bytes"])
    assert (context["query_string"], context["invocation_path"]) == (
        query,
        "invocations-bidirectional-stream",
    )
    assert [event["PayloadPart"] for event in events[1:]] == [
        {"Bytes": b"text", "DataType": "UTF8", "CompletionState": "COMPLETE"},
        {"Bytes": b"\x00\xffbinary", "DataType": "BINARY", "CompletionState": "COMPLETE"},
        {"Bytes": "Hello Wörld!".encode(), "DataType": "UTF8", "CompletionState": "COMPLETE"},
    ]
    # the handler waits on: the idle timeout's close frame ends the caller's stream
    assert error is not None and error.response["Error"]["Code"] == "ModelStreamError"
    assert "SAGEMAKER_TFS_STREAM_IDLE_TIMEOUT_SECONDS" in error.response["Error"]["Message"]
    assert error_code(stream) == "1001"


def test_a_handler_that_returns_ends_the_callers_stream_with_a_model_stream_error_1000(
    stack: Stack,
) -> None:
    """On SageMaker even the normal close (1000) reaches the caller as a ModelStreamError."""
    parts = [PayloadPart(b"a", "UTF8"), PayloadPart(b"b"), PayloadPart(b"done", "UTF8")]
    stream = invoke_endpoint_with_bidirectional_stream(
        stack.url, parts, "v1/listen", "mode=busy&seconds=0"
    )
    events, error = parsed(stream)
    assert events == [
        {"PayloadPart": {"Bytes": b"read 2", "DataType": "UTF8", "CompletionState": "COMPLETE"}}
    ]
    assert error is not None and error.response["Error"]["Code"] == "ModelStreamError"
    assert error_code(stream) == "1000"


@pytest.mark.parametrize(
    ("path", "query"),
    [("/v1/speak", None), ("v1//speak", None), ("p" * 101, None), (None, "voice=a b"),
     (None, "=x"), (None, "a=1&")],
)  # fmt: skip
def test_what_the_service_model_refuses_never_reaches_the_container(
    stack: Stack, path: str | None, query: str | None
) -> None:
    with pytest.raises(InputValidationError):
        invoke_endpoint_with_bidirectional_stream(stack.url, [], path, query)
