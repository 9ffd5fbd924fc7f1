"""``Predictor.predict`` raises when the endpoint answers an error, also for an error of the
model server under ``input_handler`` + ``output_handler`` (issue 32: it used to be a 200
carrying the error, which the SDK took for an answer).

The SDK calls the stack as on SageMaker: through boto3's ``sagemaker-runtime`` client, which
raises botocore's ``ModelError`` when the container answers 4xx/5xx. SageMaker's runtime
front in between is an AWS API and cannot exist here: ``runtime_front.py`` plays it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from botocore.exceptions import ClientError
from runtime_front import runtime_front
from sagemaker.deserializers import JSONDeserializer
from sagemaker.predictor import Predictor
from sagemaker.serializers import IdentitySerializer, JSONSerializer
from sagemaker.session import Session
from whole_stack import RunningStack, stack_with_code

REPO_ROOT = Path(__file__).resolve().parents[2]
MODEL = REPO_ROOT / "test" / "resources" / "models" / "half_plus_three"
PASSTHROUGH_CODE = REPO_ROOT / "test" / "resources" / "code" / "io_passthrough"


@pytest.fixture(scope="module")
def passthrough_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    root = tmp_path_factory.mktemp("sdk_io_passthrough")
    with stack_with_code(root, MODEL, PASSTHROUGH_CODE) as stack:
        yield stack


@pytest.fixture(scope="module")
def sagemaker_session(passthrough_stack: RunningStack, offline_sdk) -> Iterator[Session]:
    """A SageMaker session whose runtime client is boto3's, calling the stand-in front."""
    with runtime_front(passthrough_stack.url) as url:
        boto_session = boto3.Session(region_name="us-east-1")
        runtime = boto_session.client("sagemaker-runtime", endpoint_url=url)
        yield Session(boto_session=boto_session, sagemaker_runtime_client=runtime)


def test_an_answer_passes_the_front(sagemaker_session: Session) -> None:
    endpoint = Predictor("endpoint", sagemaker_session, JSONSerializer(), JSONDeserializer())
    assert endpoint.predict({"instances": [1.0, 2.0]}) == {"predictions": [3.5, 4.0]}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"{ this is not valid json", "JSON Parse error"),
        (b'{"instances": "not_a_list_of_lists"}', "list/array"),
    ],
)
def test_predict_raises_on_a_model_server_error(
    sagemaker_session: Session, body: bytes, message: str
) -> None:
    endpoint = Predictor("endpoint", sagemaker_session, IdentitySerializer("application/json"))
    with pytest.raises(ClientError) as raised:
        endpoint.predict(body)
    error = raised.value.response
    assert error["Error"]["Code"] == "ModelError"
    assert error["OriginalStatusCode"] == 400
    assert message in json.loads(error["OriginalMessage"])["error"]
