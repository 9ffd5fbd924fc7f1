"""nginx + njs in front of a recording model server: docs/contract.md's conversions and routing.

Real nginx (with the njs module) and the real Python service under gunicorn; the model
server's REST port is ``RecordingModelServer`` (see ``front_end.py``) so that each test can
check the exact TF Serving request njs produced.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from front_end import FrontEnd, start_front_end
from sagemaker_tfs.supervisor.model_servers.health import (
    VERDICT_MAX_AGE_SECONDS,
    Verdict,
    write_verdict,
)

if TYPE_CHECKING:
    import requests
    from whole_stack import StartStack

pytestmark = pytest.mark.timeout(120)

BUNDLED_MODELS = Path(__file__).resolve().parents[2] / "resources" / "models"  # half_plus_three


@pytest.fixture(scope="module")
def front(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FrontEnd]:
    front = start_front_end(tmp_path_factory.mktemp("njs"))
    yield front
    front.stop()


def sent(front: FrontEnd) -> tuple[str, object]:
    """(path, parsed body) of the last request the model server received."""
    last = front.recorder.last()
    return last.path, json.loads(last.body)


@pytest.mark.parametrize(
    ("content_type", "body", "expected"),
    [
        ("application/json", '{"instances": [1.0, 2.0]}', {"instances": [1.0, 2.0]}),
        ("application/json", '{"inputs": [[1.0]]}', {"inputs": [[1.0]]}),
        ("application/json", '{"examples": [{"x": 1}]}', {"examples": [{"x": 1}]}),
        ("application/json; charset=utf-8", "[1.0, 2.0]", {"instances": [[1.0, 2.0]]}),
        ("application/json", "[[1.0, 2.0], [3.0, 4.0]]", {"instances": [[1.0, 2.0], [3.0, 4.0]]}),
        ("application/json", "2.5", {"instances": [2.5]}),
        ("application/json", '{"x": 1}', {"instances": [{"x": 1}]}),
        ("application/json", '{"x": 1}\n{"x": 2}', {"instances": [{"x": 1}, {"x": 2}]}),
        ("application/json", "[1, 2] [3, 4]", {"instances": [[1, 2], [3, 4]]}),
        (
            "application/jsonlines",
            '{"x": [1]}\n{"x": [2]}\n',
            {"instances": [{"x": [1]}, {"x": [2]}]},
        ),
        ("application/jsons", "[1.0]\n[2.0]", {"instances": [[1.0], [2.0]]}),
        ("text/csv", "1.0,2.0\n3.0,4.0\n", {"instances": [[1.0, 2.0], [3.0, 4.0]]}),
        ("text/csv", "1.0\n2.0\n5.0", {"instances": [1.0, 2.0, 5.0]}),
        ("text/csv", '1,abc,"q"\r\n', {"instances": [[1, "abc", "q"]]}),
        (None, "[1.0, 2.0]", {"instances": [[1.0, 2.0]]}),
    ],
)
def test_conversion(front: FrontEnd, content_type: str | None, body: str, expected: object) -> None:
    response = front.post(body, content_type)
    assert response.status_code == 200, response.text
    assert response.headers["Content-Type"] == "application/json"
    path, request = sent(front)
    assert path == "/v1/models/half_plus_three:predict"
    assert request == expected
    assert response.json() == {"path": path, "request": expected}


def test_tfs_request_is_forwarded_byte_for_byte(front: FrontEnd) -> None:
    body = b'{"instances": [1.10, 12345678901234567890]}'
    assert front.post(body).status_code == 200
    assert front.recorder.last().body == body


@pytest.mark.parametrize(
    "accept", ["application/jsonlines", "application/jsonlines, application/json;q=0.5"]
)
def test_accept_jsonlines_removes_newlines(front: FrontEnd, accept: str) -> None:
    response = front.post("[1.0]", Accept=accept)
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "application/jsonlines"
    assert "\n" not in response.text
    assert json.loads(response.text)["request"] == {"instances": [[1.0]]}


@pytest.mark.parametrize("accept", ["application/json", "application/json, application/jsonlines"])
def test_accept_json_removes_newlines(front: FrontEnd, accept: str) -> None:
    response = front.post("[1.0]", Accept=accept)
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "application/json"
    assert "\n" not in response.text  # as the reference container answers
    assert json.loads(response.text)["request"] == {"instances": [[1.0]]}


def test_accept_any_keeps_tf_servings_layout(front: FrontEnd) -> None:
    response = front.post("[1.0]", Accept="*/*")
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "application/json"
    assert "\n" in response.text  # TF Serving's pretty printing is kept


@pytest.mark.parametrize(
    ("attributes", "path"),
    [
        ("tfs-model-name=half_plus_three", "/v1/models/half_plus_three:predict"),
        ("tfs-model-version=2", "/v1/models/half_plus_three/versions/2:predict"),
        ("tfs-method=classify", "/v1/models/half_plus_three:classify"),
        ("tfs-method=regress,tfs-model-version=7", "/v1/models/half_plus_three/versions/7:regress"),
        ("other=1, tfs-model-name=half_plus_three ,x", "/v1/models/half_plus_three:predict"),
    ],
)
def test_custom_attributes_route(front: FrontEnd, attributes: str, path: str) -> None:
    front.post("[1.0]", **{"X-Amzn-SageMaker-Custom-Attributes": attributes})
    assert front.recorder.last().path == path


@pytest.mark.parametrize(
    ("content_type", "body", "attributes", "status", "message"),
    [
        ("application/json", "", "", 400, "Empty request body"),
        ("application/json", "{bad json", "", 400, "Invalid JSON"),
        ("application/jsonlines", "1\n2", "", 400, "Invalid JSON lines"),
        ("text/csv", "1,2\n3\n", "", 400, "row 2 has 1 fields"),
        ("text/csv", "", "", 400, "Empty request body"),
        ("application/json", "[1]", "tfs-method=explode", 400, "Invalid method"),
        ("application/json", "[1]", "tfs-model-version=x1", 400, "Invalid model version"),
        ("application/json", "[1]", "tfs-model-name=../../etc", 400, "Invalid model name"),
    ],
)
def test_bad_input_gets_a_json_error(
    front: FrontEnd, content_type: str, body: str, attributes: str, status: int, message: str
) -> None:
    count = len(front.recorder.requests)
    response = front.post(body, content_type, **{"X-Amzn-SageMaker-Custom-Attributes": attributes})
    assert response.status_code == status
    assert response.headers["Content-Type"] == "application/json"
    assert message in response.json()["error"]
    assert len(front.recorder.requests) == count  # nothing reached the model server
    assert front.post("[1.0]").status_code == 200


@pytest.mark.parametrize(
    ("attributes", "message"),
    [
        ("tfs-model-name=\xe9", "Invalid model name: \xe9"),
        ("tfs-model-version=\xff\xfe", "Invalid model version: \xff\xfe"),
        ("tfs-method=pr\xc3\xa9d", "Invalid method: pr\xe9d"),
    ],
)
def test_an_error_quoting_header_bytes_is_valid_json(
    front: FrontEnd, attributes: str, message: str
) -> None:
    """Header text comes back escaped (requests sends these str values as latin-1 bytes): bytes
    that are not UTF-8 as latin-1 characters, as the Python service reads headers; the body stays
    ASCII JSON."""
    response = front.post("[1]", **{"X-Amzn-SageMaker-Custom-Attributes": attributes})
    assert response.status_code == 400
    assert response.content.isascii(), response.content
    assert json.loads(response.content.decode("utf-8"))["error"].startswith(message)


def test_model_server_errors_pass_through(front: FrontEnd) -> None:
    response = front.post("[1.0]", **{"X-Amzn-SageMaker-Custom-Attributes": "tfs-model-name=x"})
    assert response.status_code == 404
    assert response.json() == {"error": "Servable not found for request: Latest(x)"}
    assert front.post("[1.0]").status_code == 200


def test_unknown_content_type_goes_to_the_service_and_gets_415(front: FrontEnd) -> None:
    count = len(front.recorder.requests)
    response = front.post(b"\x00\x01", "application/x-unknown")
    assert response.status_code == 415
    assert response.json() == {"error": "Unsupported Media Type: application/x-unknown"}
    assert len(front.recorder.requests) == count
    assert front.post("[1.0]").status_code == 200


def _ping(front: FrontEnd) -> requests.Response:
    import requests

    return requests.get(front.url + "/ping", timeout=2)


@pytest.fixture
def verdict_file(front: FrontEnd) -> Iterator[Path]:
    """The supervisor's verdict file, which these tests write themselves (there is no
    supervisor here), removed afterwards."""
    path = Path(front.config.work.health_file)
    yield path
    path.unlink(missing_ok=True)


def test_ping_answers_the_health_verdict(front: FrontEnd, verdict_file: Path) -> None:
    write_verdict(str(verdict_file), Verdict(True))
    response = _ping(front)
    assert (response.status_code, response.json()) == (200, {})
    assert response.headers["Content-Type"] == "application/json"
    write_verdict(str(verdict_file), Verdict(False, "Models not available yet: half_plus_three"))
    response = _ping(front)
    assert response.status_code == 503
    assert response.json() == {"error": "Models not available yet: half_plus_three"}
    assert not front.recorder.requests or front.recorder.last().method != "GET"  # no status call


def test_ping_is_503_before_the_first_verdict(front: FrontEnd, verdict_file: Path) -> None:
    verdict_file.unlink(missing_ok=True)
    response = _ping(front)
    assert response.status_code == 503
    assert "no health verdict yet" in response.json()["error"]
    verdict_file.write_text("{not json")  # cannot happen (renamed into place); still 503
    assert _ping(front).status_code == 503


def test_ping_is_503_when_the_verdict_is_stale(front: FrontEnd, verdict_file: Path) -> None:
    """The monitor stopped writing (the supervisor hangs): nginx stops trusting its verdict."""
    old = time.time() - VERDICT_MAX_AGE_SECONDS - 2
    write_verdict(str(verdict_file), Verdict(True), written_at=old)
    response = _ping(front)
    assert response.status_code == 503
    assert "s old" in response.json()["error"]
    write_verdict(str(verdict_file), Verdict(True), written_at=time.time() - 1)
    assert _ping(front).status_code == 200


def test_unknown_paths_are_404_json(front: FrontEnd) -> None:
    import requests

    for path in ("/", "/nope", "/v1/models/half_plus_three", "/invocations/x"):
        response = requests.get(front.url + path, timeout=5)
        assert response.status_code == 404, path
        assert response.json() == {"error": "Not Found"}


def test_get_invocations_is_405(front: FrontEnd) -> None:
    import requests

    response = requests.get(front.url + "/invocations", timeout=5)
    assert response.status_code == 405
    assert "POST" in response.json()["error"]


def test_execution_parameters(front: FrontEnd) -> None:
    import requests

    response = requests.get(front.url + "/execution-parameters", timeout=5)
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "application/json"
    assert response.json() == {
        "MaxConcurrentTransforms": 1,
        "BatchStrategy": "MULTI_RECORD",
        "MaxPayloadInMB": 6,
    }


def test_text_over_its_limit_is_413_and_serving_continues(tmp_path: Path) -> None:
    front = start_front_end(tmp_path, env={"SAGEMAKER_TFS_MAX_TEXT_BODY_MB": "4"})
    try:
        response = front.post(b"[" + b"1.0," * (2 * 1024 * 1024) + b"1.0]")  # 8 MB
        assert response.status_code == 413
        assert "converted up to 4 MB (SAGEMAKER_TFS_MAX_TEXT_BODY_MB)" in response.json()["error"]
        assert not any(request.method == "POST" for request in front.recorder.requests)
        assert front.post("[1.0]").status_code == 200
    finally:
        front.stop()


def test_large_body_under_the_limit_is_converted(start_stack: StartStack) -> None:
    """Over the njs limit (256 KB): the service reads it by the same rules (straight into the
    input's array, over gRPC: a whole stack, since the recording stand-in has no gRPC)."""
    stack = start_stack(BUNDLED_MODELS)
    rows = "\n".join("1.0" for _ in range(200_000))  # ~0.8 MB of CSV, one value a row
    response = stack.post(rows, "text/csv")
    assert response.status_code == 200, response.text[:200]
    assert response.json()["predictions"] == [3.5] * 200_000


def test_batch_transform_parameters_and_limit(start_stack: StartStack) -> None:
    env = {
        "SAGEMAKER_BATCH": "true",
        "SAGEMAKER_MAX_CONCURRENT_TRANSFORMS": "4",
        "SAGEMAKER_BATCH_STRATEGY": "SINGLE_RECORD",
        "SAGEMAKER_MAX_PAYLOAD_IN_MB": "10",
    }
    stack = start_stack(BUNDLED_MODELS, env=env)
    assert stack.get("/execution-parameters").json() == {
        "MaxConcurrentTransforms": 4,
        "BatchStrategy": "SINGLE_RECORD",
        "MaxPayloadInMB": 10,
    }
    values = 2 * 1024 * 1024 + 1
    eight_mb = b"[" + b"1.0," * (values - 1) + b"1.0]"
    answer = stack.post(eight_mb)
    assert answer.status_code == 200
    assert sum(len(row) for row in answer.json()["predictions"]) == values
    # MaxPayloadInMB is what SageMaker sends at most; the limit is SAGEMAKER_TFS_MAX_BODY_MB.
    sixteen_mb = b"[" + b"1.0," * (2 * values - 1) + b"1.0]"
    assert stack.post(sixteen_mb).status_code == 200


def test_deeply_nested_json_is_a_client_error(front: FrontEnd) -> None:
    depth = 100_000
    response = front.post("[" * depth + "]" * depth)
    assert response.status_code == 400, response.text
    assert response.json()["error"].startswith("Invalid JSON: ")
    assert front.post("[1.0]").status_code == 200


def test_no_model_name_anywhere_is_400(tmp_path: Path) -> None:
    """The reference crashes on a URI without a model name; here it is a clear 400."""
    front = start_front_end(tmp_path, default_model=None)
    try:
        response = front.post("[1.0]")
        assert response.status_code == 400
        assert "tfs-model-name" in response.json()["error"]
        named = front.post(
            "[1.0]", **{"X-Amzn-SageMaker-Custom-Attributes": "tfs-model-name=half_plus_three"}
        )
        assert named.status_code == 200
    finally:
        front.stop()


def test_service_down_is_503_json_and_njs_path_keeps_working(tmp_path: Path) -> None:
    import os
    import signal

    front = start_front_end(tmp_path)
    try:
        gunicorn = front.processes["gunicorn"]
        os.killpg(gunicorn.pid, signal.SIGKILL)
        gunicorn.wait(15)
        response = front.post(b"\x00", "application/x-npy")
        assert response.status_code == 503
        assert response.json() == {"error": "The inference service is not available"}
        assert front.post("[1.0]").status_code == 200  # JSON never needed Python
    finally:
        front.stop()
