"""Classify and regress bodies on a real TensorFlow model (TF Serving's half_plus_two), in
process: the examples read a window at a time (``examples_windows``) and the answers written
from the output arrays give, byte for byte, what the general way gives (issue 53)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import tensorflow as tf
from one_servable import OneServable
from sagemaker_tfs.model_server.rest import api as api_module
from sagemaker_tfs.model_server.rest.api import RestApi
from sagemaker_tfs.model_server.serving.saved_model_servable import SavedModelServable

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "unit" / "model_server"))
from test_examples_windows import CORPUS, regress_body  # noqa: E402

pytestmark = pytest.mark.slow
MODEL = "saved_model_half_plus_two_cpu"
SIGNATURES = ("classify_x_to_y", "regress_x_to_y", "classify_x2_to_y3", "regress_x2_to_y3")


@pytest.fixture(scope="module")
def rest_api(test_models: Any) -> RestApi:
    test_models.ensure([MODEL])
    root = test_models(MODEL)
    version = sorted(path.name for path in root.iterdir() if path.name.isdigit())[-1]
    servable = SavedModelServable.load(MODEL, int(version), str(root / version),
                                       tf.compat.v1.ConfigProto())  # fmt: skip
    return RestApi(OneServable(servable))  # type: ignore[arg-type]


def with_signature(body: bytes, signature: str) -> bytes:
    """The body naming ``signature`` when it is an object of examples that names none."""
    try:
        document = json.loads(body)
    except ValueError:
        return body
    if isinstance(document, dict) and "signature_name" not in document:
        document["signature_name"] = signature
        return json.dumps(document).encode()
    return body


def bodies() -> list[bytes]:
    found = [with_signature(body, signature) for signature in SIGNATURES for body in CORPUS]
    features = '{{"x": {value:.3f}}}'
    for signature in SIGNATURES:
        found.append(regress_body(1 << 20, features).replace(b'"s"', f'"{signature}"'.encode()))
    return found


def answers(api: RestApi, verb: str) -> list[tuple[int, bytes]]:
    replies = (api.handle("POST", f"/v1/models/m:{verb}", body) for body in bodies())
    return [(status, bytes(answer)) for status, answer in replies]


@pytest.mark.parametrize("verb", ["classify", "regress"])
def test_examples_through_tensorflow_answer_as_the_general_way(
    rest_api: RestApi, verb: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    taken = answers(rest_api, verb)
    monkeypatch.setattr(api_module, "read_examples", lambda body: None)
    assert taken == answers(rest_api, verb)
    assert sum(status == 200 for status, _ in taken) >= 8
