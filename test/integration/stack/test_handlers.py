"""The five handler styles of docs/contract.md, each in a whole stack (real model server).

Each test copies the bundled half_plus_three model and one ``test/resources/code/STYLE``
directory into a fresh model directory and starts ``sagemaker-tfs serve`` on it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from whole_stack import RunningStack, running_stack

pytestmark = pytest.mark.timeout(300)

REPO_ROOT = Path(__file__).resolve().parents[3]
MODEL = REPO_ROOT / "test" / "resources" / "models" / "half_plus_three"
CODE = REPO_ROOT / "test" / "resources" / "code"


def model_dir_with_code(root: Path, style: str) -> Path:
    model_dir = root / "model"
    shutil.copytree(MODEL, model_dir / "half_plus_three")
    shutil.copytree(CODE / style, model_dir / "code")
    return model_dir


@pytest.fixture
def stack_with(tmp_path: Path) -> Iterator:
    stacks = []

    def start(style: str, env: dict[str, str] | None = None) -> RunningStack:
        model_dir = model_dir_with_code(tmp_path, style)
        work_dir = tmp_path / "work"
        work_dir.mkdir()
        context = running_stack(model_dir, work_dir, env)
        stacks.append(context)
        return context.__enter__()

    yield start
    for context in stacks:
        context.__exit__(None, None, None)


def test_input_output_handler_pair(stack_with) -> None:
    stack = stack_with("io_pair")
    response = stack.post("1.0,2.0,5.0", "text/csv")
    assert response.status_code == 200, response.text
    assert response.json() == {
        "predictions": [3.5, 4.0, 5.5],
        "handler": "io_pair",
        "model": "half_plus_three",
    }
    response = stack.post('{"instances": [4.0]}')
    assert response.json()["predictions"] == [5.0]
    # input_handler raises: the exception text comes back as JSON, then serving continues
    response = stack.post(b"\x89PNG", "image/png")
    assert response.status_code == 500
    assert response.json() == {"error": "unsupported content type image/png"}
    # the model server refuses: its 400 and error reach the client, output_handler is not run
    response = stack.post('{"instances": ["a"]}')
    assert response.status_code == 400
    assert set(response.json()) == {"error"}
    assert stack.post("1.0", "text/csv").json()["predictions"] == [3.5]


def test_handler_with_rest_sees_the_whole_context(stack_with) -> None:
    stack = stack_with("rest_handler")
    response = stack.post(
        '{"instances": [1.0, 2.0]}',
        "application/json; charset=utf-8",
        Accept="application/json",
        **{"X-Amzn-SageMaker-Custom-Attributes": "tfs-model-version=123,tfs-method=predict"},
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["predictions"] == [3.5, 4.0]
    context = body["context"]
    assert context["model_name"] == "half_plus_three"
    assert context["model_version"] == "123"
    assert context["method"] == "predict"
    assert context["rest_uri"].endswith("/v1/models/half_plus_three/versions/123:predict")
    assert context["grpc_port"] == context["grpc_uri"] and context["grpc_port"].isdigit()
    assert context["channel"] != "NoneType"
    assert context["custom_attributes"] == "tfs-model-version=123,tfs-method=predict"
    assert context["request_content_type"] == "application/json"
    assert context["accept_header"] == "application/json"
    assert context["content_length"] == len('{"instances": [1.0, 2.0]}')
    defaults = stack.post('{"instances": [1.0]}', None).json()["context"]
    assert defaults["request_content_type"] == "application/json"
    assert defaults["accept_header"] == "application/json"
    assert defaults["model_version"] is None
    # a handler that calls the model server itself owns its errors: its 500, its text
    refused = stack.post('{"instances": ["a"]}')
    assert refused.status_code == 500
    assert set(json.loads(refused.json()["error"])) == {"error"}


@pytest.mark.parametrize(
    "env",
    [
        {},  # gevent, one worker (the default)
        {"SAGEMAKER_GUNICORN_WORKER_CLASS": "sync", "SAGEMAKER_GUNICORN_WORKERS": "2"},
        {"SAGEMAKER_GUNICORN_WORKER_CLASS": "gthread", "SAGEMAKER_GUNICORN_THREADS": "4"},
    ],
    ids=["gevent", "sync-2-workers", "gthread"],
)
def test_handler_with_grpc(stack_with, env: dict[str, str]) -> None:
    stack = stack_with("grpc_handler", env)
    response = stack.post("[1.0, 2.0, 5.0]")
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["channel"] == [3.5, 4.0, 5.5]
    assert body["port"] == [3.5, 4.0, 5.5]
    assert body["grpc_uri"].isdigit()


def write_wheel(directory: Path, marker: str) -> Path:
    """A pure-Python wheel built by hand (no build tools or network needed)."""
    name, version = "sagemaker_tfs_testpkg", "1.0"
    dist_info = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": f"MARKER = {marker!r}\n",
        f"{dist_info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{dist_info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        record.append(f"{path},sha256={digest.decode()},{len(text.encode())}")
    record.append(f"{dist_info}/RECORD,,")
    files[f"{dist_info}/RECORD"] = "\n".join(record) + "\n"
    wheel = directory / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
    return wheel


def test_handler_with_requirements(tmp_path: Path) -> None:
    staging = tmp_path / "wheel"
    staging.mkdir()
    wheel = write_wheel(staging, "installed from requirements.txt")
    original = CODE / "with_requirements"
    assert (original / "requirements.txt").read_text().strip() == f"./{wheel.name}"
    # the wheel must sit in code/ before the stack starts: copy it into the copied code dir
    model_dir = model_dir_with_code(tmp_path / "pre", "with_requirements")
    shutil.copy(wheel, model_dir / "code" / wheel.name)
    work_dir = tmp_path / "pre" / "work"
    work_dir.mkdir()
    with running_stack(model_dir, work_dir) as stack:
        response = stack.post("[1.0]")
        assert response.status_code == 200, response.text
        assert response.json() == {"package": "installed from requirements.txt"}
        assert "installing" in stack.log_text()


def test_failed_requirements_install_stops_start_up(tmp_path: Path) -> None:
    model_dir = model_dir_with_code(tmp_path, "with_requirements")  # the wheel is missing
    work_dir = tmp_path / "work"
    work_dir.mkdir()
    with pytest.raises(RuntimeError) as raised, running_stack(model_dir, work_dir):
        pass
    assert "requirements.txt failed" in str(raised.value)


def test_handler_with_code_lib(stack_with) -> None:
    stack = stack_with("with_lib")  # its requirements.txt names a package that cannot exist
    response = stack.post("[1.0]")
    assert response.status_code == 200, response.text
    assert response.json() == {"lib": "from code/lib"}
    assert "code/lib exists: not installing" in stack.log_text()


def test_raising_handler_gets_json_errors_and_serving_continues(stack_with) -> None:
    stack = stack_with("raising")
    response = stack.post("handler input", "text/plain")
    assert response.status_code == 500
    assert response.json() == {"error": "handler exploded on purpose"}
    response = stack.post("{not json")
    assert response.status_code == 400
    assert "Expecting property name" in response.json()["error"]
    response = stack.post(b"\x00\x01raw", "application/x-anything")
    assert response.status_code == 200
    assert response.content == b"\x00\x01raw"
    assert response.headers["Content-Type"] == "application/octet-stream"
    assert stack.post('{"a": 1}').json() == {"parsed": {"a": 1}}


def test_python_service_spreads_requests_over_instances(stack_with) -> None:
    stack = stack_with("rest_handler", {"SAGEMAKER_TFS_INSTANCE_COUNT": "2"})
    seen = set()
    for _ in range(4):
        context = stack.post('{"instances": [1.0]}').json()["context"]
        seen.add((context["rest_uri"].split("/")[2], context["grpc_port"]))
    assert len(seen) == 2  # both model servers, each with its own REST and gRPC port
