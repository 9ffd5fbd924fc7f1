"""SDK v2's ``Predictor.predict_stream`` against the host stack serving
``examples/inference/streaming``: the chunks in order, and an error mid-stream seen as one.

The SDK calls boto3's ``invoke_endpoint_with_response_stream``; SageMaker's runtime front is
an AWS API that cannot exist here (moto has no runtime and no response streaming), so
``runtime_front.py`` plays it at the HTTP level botocore talks to: each chunk of the
container's real chunked answer becomes a ``PayloadPart`` event, and a body the container
cut short a ``ModelStreamError`` event. A container that ended a failed answer like a
complete one would make the error test fail.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from botocore.exceptions import ClientError, EventStreamError
from runtime_front import runtime_front
from sagemaker.iterators import ByteIterator, LineIterator
from sagemaker.predictor import Predictor
from sagemaker.serializers import JSONSerializer
from sagemaker.session import Session
from whole_stack import RunningStack, stack_with_code

REPO_ROOT = Path(__file__).resolve().parents[2]
MODEL = REPO_ROOT / "test" / "resources" / "models" / "half_plus_three"
STREAMING = REPO_ROOT / "examples" / "inference" / "streaming" / "code"
X = [float(x) for x in range(-3, 8)]


@pytest.fixture(scope="module")
def streaming_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    with stack_with_code(tmp_path_factory.mktemp("sdk_streaming"), MODEL, STREAMING) as stack:
        yield stack


@pytest.fixture(scope="module")
def endpoint(streaming_stack: RunningStack, offline_sdk) -> Iterator[Predictor]:  # type: ignore[no-untyped-def]
    with runtime_front(streaming_stack.url) as url:
        boto_session = boto3.Session(region_name="us-east-1")
        runtime = boto_session.client("sagemaker-runtime", endpoint_url=url)
        session = Session(boto_session=boto_session, sagemaker_runtime_client=runtime)
        yield Predictor("endpoint", session, JSONSerializer())


def batches(values: list, size: int) -> list[list[float]]:
    return [[0.5 * x + 3 for x in values[i : i + size]] for i in range(0, len(values), size)]


def test_predict_stream_yields_the_json_lines_in_order(endpoint: Predictor) -> None:
    lines = endpoint.predict_stream(
        {"instances": X, "batch_size": 3},
        initial_args={"Accept": "application/jsonlines"},
        iterator=LineIterator,
    )
    assert [json.loads(line)["predictions"] for line in lines] == batches(X, 3)


def test_predict_stream_of_server_sent_events(endpoint: Predictor) -> None:
    parts = list(endpoint.predict_stream({"instances": X, "batch_size": 4},
                                         initial_args={"Accept": "text/event-stream"}))  # fmt: skip
    assert len(parts) >= 2  # the answer came in parts, as the container produced them
    events = b"".join(parts).decode().split("\n\n")
    assert events[-1] == ""
    data = [json.loads(event.removeprefix("data: ")) for event in events[:-2]]
    assert [event["predictions"] for event in data] == batches(X, 4)
    assert events[-2] == f'event: end\ndata: {{"count": {len(X)}}}'


def test_an_error_mid_stream_is_seen_as_one(endpoint: Predictor) -> None:
    """The model server refuses the third batch: the lines of the first two arrive, then the
    SDK's iteration raises botocore's EventStreamError for the ModelStreamError event."""
    instances = [1.0, 2.0, 3.0, 4.0, "not a number", 6.0]
    lines = endpoint.predict_stream(
        {"instances": instances, "batch_size": 2},
        initial_args={"Accept": "application/jsonlines"},
        iterator=LineIterator,
    )
    received = []
    with pytest.raises(EventStreamError) as raised:
        for line in lines:
            received.append(json.loads(line)["predictions"])
    assert received == [[3.5, 4.0], [4.5, 5.0]]
    assert raised.value.response["Error"]["Code"] == "ModelStreamError"


def test_an_error_before_the_first_chunk_is_a_model_error(endpoint: Predictor) -> None:
    with pytest.raises(ClientError) as raised:
        list(endpoint.predict_stream({"instances": [1.0], "batch_size": 0}, iterator=ByteIterator))
    error = raised.value.response
    assert error["Error"]["Code"] == "ModelError" and error["OriginalStatusCode"] == 500
    assert "batch_size must be at least 1" in error["OriginalMessage"]
