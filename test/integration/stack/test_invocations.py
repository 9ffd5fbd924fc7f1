"""/invocations through the whole stack: real nginx + njs, gunicorn and model servers.

Two models side by side (the bundled half_plus_three, TF Serving's two-version
half_plus_two with classify/regress signatures) served by two model server instances.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from whole_stack import RunningStack, running_stack

pytestmark = pytest.mark.timeout(300)

REPO_ROOT = Path(__file__).resolve().parents[3]
HALF_PLUS_THREE = REPO_ROOT / "test" / "resources" / "models" / "half_plus_three"
ATTRIBUTES = "X-Amzn-SageMaker-Custom-Attributes"


def two_models(root: Path, testdata_dir: Path) -> Path:
    model_dir = root / "models"
    model_dir.mkdir()
    (model_dir / "half_plus_three").symlink_to(HALF_PLUS_THREE)
    (model_dir / "half_plus_two").symlink_to(testdata_dir / "saved_model_half_plus_two_2_versions")
    return model_dir


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, testdata_dir: Path) -> Iterator[RunningStack]:
    root = tmp_path_factory.mktemp("invocations")
    work_dir = root / "work"
    work_dir.mkdir()
    env = {"SAGEMAKER_TFS_INSTANCE_COUNT": "2"}
    with running_stack(two_models(root, testdata_dir), work_dir, env) as running:
        yield running


def predictions(response) -> object:  # type: ignore[no-untyped-def]
    assert response.status_code == 200, response.text
    return response.json()["predictions"]


@pytest.mark.parametrize(
    ("content_type", "body", "expected"),
    [
        ("application/json", '{"instances": [1.0, 2.0, 5.0]}', [3.5, 4.0, 5.5]),
        ("application/json", '{"inputs": [1.0, 2.0]}', None),
        ("application/json", "[1.0, 2.0, 5.0]", [[3.5, 4.0, 5.5]]),
        ("application/json", "[[1.0], [2.0]]", [[3.5], [4.0]]),
        ("application/json", "4.0", [5.0]),
        ("application/json", "[1.0]\n[2.0]\n", [[3.5], [4.0]]),
        ("application/jsonlines", "[1.0, 2.0]\n[5.0, 6.0]", [[3.5, 4.0], [5.5, 6.0]]),
        ("application/jsons", "[1.0]", [[3.5]]),
        ("text/csv", "1.0,2.0\n5.0,6.0\n", [[3.5, 4.0], [5.5, 6.0]]),
        ("text/csv", "1.0\n2.0\n", [3.5, 4.0]),
    ],
)
def test_content_types(stack: RunningStack, content_type: str, body: str, expected) -> None:
    response = stack.post(body, content_type)
    assert response.status_code == 200, response.text
    assert response.headers["Content-Type"] == "application/json"
    if expected is None:
        assert response.json() == {"outputs": [3.5, 4.0]}
    else:
        assert predictions(response) == expected


def test_accept_jsonlines(stack: RunningStack) -> None:
    response = stack.post("[1.0, 2.0]", Accept="application/jsonlines")
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "application/jsonlines"
    assert "\n" not in response.text
    assert json.loads(response.text) == {"predictions": [[3.5, 4.0]]}


def test_default_model_is_the_first_found(stack: RunningStack) -> None:
    assert predictions(stack.post("[2.0]")) == [[4.0]]


def test_model_name_and_version_from_custom_attributes(stack: RunningStack) -> None:
    other = {ATTRIBUTES: "tfs-model-name=half_plus_two"}
    assert predictions(stack.post("[2.0]", **other)) == [[3.0]]
    latest = {ATTRIBUTES: "tfs-model-name=half_plus_two,tfs-model-version=124"}
    assert predictions(stack.post("[2.0]", **latest)) == [[3.0]]
    older = {ATTRIBUTES: "tfs-model-name=half_plus_two,tfs-model-version=123"}
    assert predictions(stack.post("[2.0]", **older)) == [[3.0]]  # every version is served
    missing = {ATTRIBUTES: "tfs-model-name=half_plus_two,tfs-model-version=122"}
    response = stack.post("[2.0]", **missing)
    assert response.status_code == 404
    assert "122" in response.json()["error"]
    unknown = {ATTRIBUTES: "tfs-model-name=nope"}
    response = stack.post("[2.0]", **unknown)
    assert response.status_code == 404
    assert "nope" in response.json()["error"]


def test_classify_and_regress(stack: RunningStack) -> None:
    classify = {ATTRIBUTES: "tfs-model-name=half_plus_two,tfs-method=classify"}
    body = '{"signature_name": "classify_x_to_y", "examples": [{"x": 2.0}]}'
    response = stack.post(body, **classify)
    assert response.status_code == 200, response.text
    assert response.json()["results"][0][0][1] == pytest.approx(3.0)
    regress = {ATTRIBUTES: "tfs-model-name=half_plus_two,tfs-method=regress"}
    body = '{"signature_name": "regress_x_to_y", "examples": [{"x": 4.0}]}'
    response = stack.post(body, **regress)
    assert response.status_code == 200, response.text
    assert response.json()["results"] == [pytest.approx(4.0)]


def test_requests_spread_over_both_instances(stack: RunningStack) -> None:
    for _ in range(10):
        assert stack.post("[1.0]").status_code == 200
    conf = (stack.work_dir / "nginx.conf").read_text()
    upstream = conf.split("upstream model_servers {")[1].split("}")[0]
    assert upstream.count("server 127.0.0.1:") == 2


def test_bad_requests_get_json_errors_and_the_stack_keeps_serving(stack: RunningStack) -> None:
    cases = [
        ("application/json", "{oops", 400),
        ("application/json", "", 400),
        ("text/csv", "1,2\n3", 400),
        ("application/json", '{"instances": ["text"]}', 400),
        ("application/x-unknown", "abc", 415),
    ]
    for content_type, body, status in cases:
        response = stack.post(body, content_type)
        assert response.status_code == status, (content_type, body, response.text)
        assert "error" in response.json()
        assert predictions(stack.post("[1.0]")) == [[3.5]]


def test_ping_and_execution_parameters(stack: RunningStack) -> None:
    assert stack.get("/ping").status_code == 200
    answer = stack.get("/execution-parameters").json()
    assert set(answer) == {"MaxConcurrentTransforms", "BatchStrategy", "MaxPayloadInMB"}
    assert stack.get("/nowhere").status_code == 404


def test_default_model_from_env(tmp_path: Path, testdata_dir: Path) -> None:
    work_dir = tmp_path / "work"
    work_dir.mkdir()
    env = {"SAGEMAKER_TFS_DEFAULT_MODEL_NAME": "half_plus_two"}
    with running_stack(two_models(tmp_path, testdata_dir), work_dir, env) as stack:
        assert predictions(stack.post("[2.0]")) == [[3.0]]
        attrs = {ATTRIBUTES: "tfs-model-name=half_plus_three"}
        assert predictions(stack.post("[2.0]", **attrs)) == [[4.0]]


def npy(values: list[float]) -> bytes:
    import io

    import numpy as np

    buffer = io.BytesIO()
    np.save(buffer, np.array(values, dtype=np.float32))
    return buffer.getvalue()


def test_binary_content_types_go_to_the_fast_path(stack: RunningStack) -> None:
    """njs hands npy (and JSON asking for npy) to the Python service, which calls fast_path."""
    import io

    import numpy as np

    response = stack.post(npy([1.0, 2.0]), "application/x-npy", Accept="application/x-npy")
    assert response.status_code == 200, response.text
    assert response.headers["Content-Type"] == "application/x-npy"
    assert np.load(io.BytesIO(response.content)).tolist() == [3.5, 4.0]
    response = stack.post("[1.0, 5.0]", "application/json", Accept="application/x-npy")
    assert response.status_code == 200, response.text
    assert np.load(io.BytesIO(response.content)).ravel().tolist() == [3.5, 5.5]
