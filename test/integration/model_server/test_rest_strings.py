"""Predict bodies of plain strings on a real TensorFlow model (``dtype_echo``), in process: the
array ``json_strings`` reads them into (``S``, or objects) is fed to TF and answered byte for
byte as the general reader's object array of bytes is (issue 53)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import tensorflow as tf
from memory_traces import traced_peak
from one_servable import OneServable
from sagemaker_tfs.model_server.rest import api as api_module
from sagemaker_tfs.model_server.rest.api import RestApi
from sagemaker_tfs.model_server.serving.saved_model_servable import SavedModelServable

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "unit" / "model_server"))
from test_json_strings import CORPUS, NOT_TAKEN, short_strings_body  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def rest_api(test_models: Any) -> RestApi:
    test_models.ensure(["dtype_echo"])
    path = str(test_models("dtype_echo") / "1")
    servable = SavedModelServable.load("dtype_echo", 1, path, tf.compat.v1.ConfigProto())
    return RestApi(OneServable(servable))  # type: ignore[arg-type]


def answers(api: RestApi, bodies: list[bytes]) -> list[tuple[int, bytes]]:
    replies = (api.handle("POST", "/v1/models/dtype_echo:predict", body) for body in bodies)
    return [(status, bytes(body)) for status, body in replies]


def test_strings_through_tensorflow_answer_as_the_general_path(
    rest_api: RestApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    bodies = CORPUS + NOT_TAKEN
    taken = answers(rest_api, bodies)
    monkeypatch.setattr(api_module, "read_string_tensor", lambda body, alias: None)
    assert taken == answers(rest_api, bodies)
    assert [status for status, _ in taken[: len(CORPUS)]] == [200] * len(CORPUS)
    assert (
        taken[3][1]
        == '{\n    "predictions": ["héllo", "日本語", "emoji 😀", "Ω"\n    ]\n}'.encode()
    )


def test_a_scalar_string_output_is_answered(rest_api: RestApi) -> None:
    """TensorFlow's session gives a 0-d string output as a bytes object, not an array: the
    answer writer took it for an array and raised AttributeError (no answer)."""
    assert answers(rest_api, [b'{"inputs": "scalar \\u00e9"}']) == [
        (200, '{\n    "outputs": "scalar é"\n}'.encode())
    ]


def test_string_outputs_fetched_joined_answer_as_arrays_of_bytes(
    rest_api: RestApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The answers from string outputs fetched as one buffer (``string_outputs``) are those
    from TF's object arrays of bytes, row and columnar, nested, empty strings and all."""
    bodies = CORPUS + NOT_TAKEN
    joined = answers(rest_api, bodies)
    servable = rest_api._manager.servable  # type: ignore[attr-defined]
    monkeypatch.setattr(servable, "predict_joined", servable.predict)
    assert joined == answers(rest_api, bodies)


def test_a_body_of_short_strings_is_answered_in_3_5x_its_size(rest_api: RestApi) -> None:
    """3 MB of short strings echoed by TensorFlow, traced (Python's and NumPy's memory, not
    TF's tensors): at most the reader's offsets and ``S`` array (2.8x while read), then the
    joined output and its offsets (1.4x) with the answer (1.1x) and a block's bytes objects
    and texts (~0.7x of this body). Read and answered the general way: 18.6x."""
    body = short_strings_body(3 << 20)
    (status, answer), peak = traced_peak(
        lambda: rest_api.handle("POST", "/v1/models/dtype_echo:predict", body)
    )
    assert status == 200 and len(answer) > len(body) * 0.9
    assert peak < 3.5 * len(body), f"traced peak {peak / len(body):.1f}x the body"
