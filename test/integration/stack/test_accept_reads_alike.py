"""The Accept header never changes how a JSON body is read (issue 53): the same body gets the
same verdict, and the same values in the same shape, whether the answer is JSON (the REST
path: the njs, the service's arrays reader, the model server's REST API) or NumPy (the
service's fast path), over the real stack (nginx + njs, gunicorn, the model server)."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import requests
from whole_stack import RunningStack, running_stack

pytestmark = pytest.mark.timeout(300)

MODELS = Path(__file__).resolve().parents[3] / "test" / "resources" / "models"
BODIES = {
    "a bare list": b"[1.0, 2.0]",
    "a number beyond a double": b'{"instances": [1e400]}',
    "an integer beyond uint64": b"123456789012345678901234567890",
    "instances not a list": b'{"instances": 5}',
    "booleans for a float input": b"[true, false]",
    "both inputs and instances": b'{"instances": [1.0], "inputs": [1.0]}',
    "a signature_name not a string": b'{"signature_name": 5, "instances": [1.0]}',
    "no instances": b'{"instances": []}',
    "a JSON object for one instance": b'{"x": 1.0}',
    "JSON lines": b"[1.0]\n[2.0]",
    "examples for predict": b'{"examples": [1]}',
}


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    with running_stack(MODELS, tmp_path_factory.mktemp("accept_alike")) as running:
        yield running


def verdict(response: requests.Response) -> tuple[int, object]:
    """The status, and the values (as float32, with their shape) or the error's words."""
    if response.status_code != 200:
        return response.status_code, response.json()["error"]
    if response.headers["Content-Type"].startswith("application/json"):
        values = np.asarray(response.json()["predictions"], np.float32)
    else:  # the model's float32, exact (JSON's text is its shortest round trip, %.9g)
        values = np.load(io.BytesIO(response.content)).astype(np.float32)
    return 200, (values.shape, values.tolist())


@pytest.mark.parametrize("body", BODIES.values(), ids=BODIES.keys())
def test_a_binary_accept_reads_a_body_as_a_json_accept_does(
    stack: RunningStack, body: bytes
) -> None:
    as_json = verdict(stack.post(body, Accept="application/json"))
    as_npy = verdict(stack.post(body, Accept="application/x-npy"))
    assert as_npy == as_json


@pytest.mark.parametrize("depth", [100_000, 300_000, 1_000])
@pytest.mark.parametrize("accept", ["application/json", "application/x-npy"])
def test_too_deep_a_nesting_is_a_clear_400(stack: RunningStack, accept: str, depth: int) -> None:
    """By the njs (a JSON answer, under 256 KB), the service, or the model server's reader;
    not Python's "RecursionError: maximum recursion depth exceeded"."""
    response = stack.post(b"[" * depth + b"1" + b"]" * depth, Accept=accept)
    assert response.status_code == 400
    message = response.json()["error"]
    assert "Recursion" not in message and "recursion" not in message, message
