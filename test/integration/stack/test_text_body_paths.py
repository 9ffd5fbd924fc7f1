"""A JSON or CSV body means the same request on every path through the stack.

nginx's njs converts it for TF Serving when the answer is JSON; the Python service's fast
path reads it (conversion.parse) when the Accept asks for a binary answer. Both trim CSV
fields as ECMAScript's ``trim`` does (spaces, tabs, no-break spaces, a UTF-8 byte order
mark...), and custom attribute values by spaces and tabs only: here under the real nginx and
njs, which Node.js stands in for in test_njs_parity.py.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from whole_stack import RunningStack, running_stack

pytestmark = pytest.mark.timeout(300)

MODELS = Path(__file__).resolve().parents[2] / "resources" / "models"  # half_plus_three


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    with running_stack(MODELS, tmp_path_factory.mktemp("text_body_paths")) as running:
        yield running


def values_of(response) -> list[float]:
    assert response.status_code == 200, response.text
    if response.headers["Content-Type"].startswith("application/x-npy"):
        return np.load(io.BytesIO(response.content), allow_pickle=False).ravel().tolist()
    return np.asarray(response.json()["predictions"], np.float64).ravel().tolist()


@pytest.mark.parametrize(
    "body",
    [
        b"1.0\n2.0\n",
        b"\xef\xbb\xbf1.0\n2.0\n",  # a byte order mark, as spreadsheets write
        " 1.0\t\r\n\u00a02.0\u3000\n".encode(),
    ],
)
def test_csv_fields_are_trimmed_alike_by_njs_and_the_fast_path(
    stack: RunningStack, body: bytes
) -> None:
    by_njs = stack.post(body, "text/csv")
    by_service = stack.post(body, "text/csv", Accept="application/x-npy")
    assert values_of(by_njs) == values_of(by_service) == [3.5, 4.0]


@pytest.mark.parametrize("accept", ["application/json", "application/x-npy"])
def test_custom_attribute_values_lose_spaces_and_tabs(stack: RunningStack, accept: str) -> None:
    attributes = "tfs-model-name=\thalf_plus_three , tfs-method= predict\t"
    response = stack.post(
        '{"instances": [1.0, 2.0]}',
        Accept=accept,
        **{"X-Amzn-SageMaker-Custom-Attributes": attributes},
    )
    assert values_of(response) == [3.5, 4.0]
