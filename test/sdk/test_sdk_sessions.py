"""Stateful sessions as SageMaker's clients use them: boto3's ``invoke_endpoint`` with
``SessionId`` (``NEW_SESSION`` to open one; ``NewSessionId`` and ``ClosedSessionId`` in the
answer) and the SDK's ``Predictor.predict`` in the session, against the host stack serving
``examples/inference/sessions`` with two workers.

SageMaker's runtime front (an AWS API; moto has none) is played by ``runtime_front.py``,
which passes the session header to the container and its session headers back.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from botocore.exceptions import ClientError
from runtime_front import runtime_front
from sagemaker.deserializers import JSONDeserializer
from sagemaker.predictor import Predictor
from sagemaker.serializers import JSONSerializer
from sagemaker.session import Session
from whole_stack import RunningStack, stack_with_code

REPO_ROOT = Path(__file__).resolve().parents[2]
MODEL = REPO_ROOT / "test" / "resources" / "models" / "half_plus_three"
SESSIONS = REPO_ROOT / "examples" / "inference" / "sessions" / "code"
NEW_SESSION_ID = re.compile(r"(\d+-[0-9a-f]{32}); Expires=\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")


@pytest.fixture(scope="module")
def sessions_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    env = {"SAGEMAKER_ENABLE_STATEFUL_SESSIONS": "true", "SAGEMAKER_GUNICORN_WORKERS": "2"}
    root = tmp_path_factory.mktemp("sdk_sessions")
    with stack_with_code(root, MODEL, SESSIONS, env) as stack:
        yield stack


@pytest.fixture(scope="module")
def sagemaker_session(sessions_stack: RunningStack, offline_sdk) -> Iterator[Session]:  # type: ignore[no-untyped-def]
    with runtime_front(sessions_stack.url) as url:
        boto_session = boto3.Session(region_name="us-east-1")
        runtime = boto_session.client("sagemaker-runtime", endpoint_url=url)
        yield Session(boto_session=boto_session, sagemaker_runtime_client=runtime)


def invoke(session: Session, body: dict, **args: str) -> dict:
    return session.sagemaker_runtime_client.invoke_endpoint(
        EndpointName="endpoint", Body=json.dumps(body), ContentType="application/json", **args
    )


def open_session(session: Session) -> str:
    answer = invoke(session, {"requestType": "NEW_SESSION"}, SessionId="NEW_SESSION")
    match = NEW_SESSION_ID.fullmatch(answer["NewSessionId"])
    assert match, answer["NewSessionId"]
    return match.group(1)


def test_open_use_and_close_sessions_through_boto3_and_the_sdk(
    sagemaker_session: Session,
) -> None:
    endpoint = Predictor("endpoint", sagemaker_session, JSONSerializer(), JSONDeserializer())
    first, second = open_session(sagemaker_session), open_session(sagemaker_session)
    assert {first[0], second[0]} == {"0", "1"}  # opened in turn by the two workers
    for values in ([1.0, 2.0], [5.0]):
        endpoint.predict({"instances": values}, initial_args={"SessionId": first})
    answer = endpoint.predict({"instances": [-2.0]}, initial_args={"SessionId": second})
    assert answer == {"predictions": [2.0], "seen": 1, "total": 2.0}
    answer = endpoint.predict({"instances": [0.0]}, initial_args={"SessionId": first})
    assert answer == {"predictions": [3.0], "seen": 4, "total": 3.5 + 4.0 + 5.5 + 3.0}
    assert endpoint.predict({"instances": [1.0]}) == {"predictions": [3.5]}
    for session_id in (first, second):
        closed = invoke(sagemaker_session, {"requestType": "CLOSE"}, SessionId=session_id)
        assert closed["ClosedSessionId"] == session_id


def test_a_closed_or_unknown_session_is_a_model_error_naming_it(
    sagemaker_session: Session,
) -> None:
    closed = open_session(sagemaker_session)
    invoke(sagemaker_session, {"requestType": "CLOSE"}, SessionId=closed)
    for session_id in (closed, "0-" + "0" * 32):
        with pytest.raises(ClientError) as raised:
            invoke(sagemaker_session, {"instances": [1.0]}, SessionId=session_id)
        error = raised.value.response
        assert error["Error"]["Code"] == "ModelError" and error["OriginalStatusCode"] == 400
        assert session_id in json.loads(error["OriginalMessage"])["error"]
