"""A model server error under ``input_handler`` + ``output_handler`` reaches the client as an
error (issue 32): the model server's status and JSON body, ``output_handler`` not called.

Three stacks on the bundled half_plus_three: with ``io_passthrough`` (the handler pair most
examples have: the body passed on, the answer passed back, no status check), with ``io_pair``
(an ``output_handler`` that checks ``status_code`` itself) and with no ``inference.py``. The
model server's own answer to the same body, asked of its REST port directly, is what the
client must get.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from whole_stack import RunningStack, stack_with_code

pytestmark = pytest.mark.timeout(300)

REPO_ROOT = Path(__file__).resolve().parents[3]
MODEL = REPO_ROOT / "test" / "resources" / "models" / "half_plus_three"
CODE = REPO_ROOT / "test" / "resources" / "code"

# (content type, body): the four bad requests of the issue
BAD_REQUESTS = [
    ("application/json", b"{ this is not valid json"),
    ("application/json", b""),
    ("application/x-unsupported-mimetype", b"aW1hZ2UgYnl0ZXM="),
    ("application/json", b'{"instances": "not_a_list_of_lists"}'),
]
IDS = ["invalid-json", "empty", "unsupported-type", "instances-not-a-list"]


def start(tmp_path_factory: pytest.TempPathFactory, code: str | None) -> Iterator[RunningStack]:
    root = tmp_path_factory.mktemp(f"stack_{code or 'no_code'}")
    with stack_with_code(root, MODEL, CODE / code if code else None) as stack:
        yield stack


@pytest.fixture(scope="module")
def passthrough(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    yield from start(tmp_path_factory, "io_passthrough")


@pytest.fixture(scope="module")
def checking(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    yield from start(tmp_path_factory, "io_pair")


@pytest.fixture(scope="module")
def no_code(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    yield from start(tmp_path_factory, None)


def model_server_answer(stack: RunningStack, body: bytes) -> requests.Response:
    """What the model server itself answers to ``body`` (what ``input_handler`` sent it)."""
    config = json.loads((stack.work_dir / "stack.json").read_text())
    rest_port = config["instances"][0]["rest_port"]
    url = f"http://127.0.0.1:{rest_port}/v1/models/half_plus_three:predict"
    return requests.post(url, data=body, timeout=30)


@pytest.mark.parametrize(("content_type", "body"), BAD_REQUESTS, ids=IDS)
def test_the_model_servers_error_reaches_the_client(
    passthrough: RunningStack, no_code: RunningStack, content_type: str, body: bytes
) -> None:
    direct = model_server_answer(passthrough, body)
    assert 400 <= direct.status_code < 500, direct.text
    response = passthrough.post(body, content_type, Accept="application/json")
    assert response.status_code == direct.status_code, response.text
    assert response.headers["Content-Type"] == "application/json"
    assert response.json() == direct.json()
    assert set(response.json()) == {"error"}
    without_code = no_code.post(body, content_type, Accept="application/json")
    # the same status as without inference.py, except for the type that only the stack's own
    # conversion refuses (415): the handler here took it and passed it on
    if content_type == "application/x-unsupported-mimetype":
        assert without_code.status_code == 415
    else:
        assert response.status_code == without_code.status_code == 400


def test_a_success_still_reaches_output_handler(passthrough: RunningStack) -> None:
    response = passthrough.post(b'{"instances": [1.0, 2.0]}', Accept="application/json")
    assert response.status_code == 200, response.text
    assert response.json() == {"predictions": [3.5, 4.0]}


def test_an_output_handler_checking_the_status_itself(checking: RunningStack) -> None:
    """``io_pair`` raises on a status other than 200: written for the old behaviour, it keeps
    working; the error it would have raised (a 500) is now the model server's 400."""
    assert checking.post("1.0,2.0", "text/csv").json() == {
        "predictions": [3.5, 4.0],
        "handler": "io_pair",
        "model": "half_plus_three",
    }
    body = b'{"instances": ["a"]}'
    response = checking.post(body)
    assert response.status_code == 400, response.text
    assert response.json() == model_server_answer(checking, body).json()
    # input_handler raising is still the handler's own 500
    refused = checking.post(b"\x89PNG", "image/png")
    assert refused.status_code == 500
    assert refused.json() == {"error": "unsupported content type image/png"}
