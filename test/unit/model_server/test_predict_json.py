"""predict_json: row and columnar requests read into tensors, responses laid out byte for byte."""

from __future__ import annotations

import base64

import numpy as np
import pytest
from sagemaker_tfs.model_server.errors import Code, ServingError
from sagemaker_tfs.model_server.rest.json_reader import parse_json_object
from sagemaker_tfs.model_server.rest.predict_json import (
    format_predict_response,
    parse_predict_request,
)
from sagemaker_tfs.model_server.serving.signatures import GraphTensor, ServableSignature
from tensorflow.core.framework import types_pb2


def signature(inputs: dict[str, int], outputs: dict[str, int] | None = None) -> ServableSignature:
    def specs(aliases: dict[str, int]) -> dict[str, GraphTensor]:
        return {alias: GraphTensor(f"{alias}:0", dtype, None) for alias, dtype in aliases.items()}

    return ServableSignature(
        "serving_default", "tensorflow/serving/predict", specs(inputs), specs(outputs or {})
    )


NOT_INT32 = "is not of expected type: int32"
NOT_FLOAT = "is not of expected type: float"
B64_OBJECT = '{\n    "b64": "AA=="\n}'
FLOAT_X = signature({"x": types_pb2.DT_FLOAT}, {"y": types_pb2.DT_FLOAT})


def parse(body: str, sig: ServableSignature = FLOAT_X) -> tuple[dict[str, np.ndarray], bool]:
    return parse_predict_request(parse_json_object(body.encode()), sig)


def error_message(body: str, sig: ServableSignature = FLOAT_X) -> str:
    with pytest.raises(ServingError) as caught:
        parse(body, sig)
    assert caught.value.code == Code.INVALID_ARGUMENT
    return caught.value.message


def test_integers_and_bools_print_as_json() -> None:
    outputs = {"y": np.array([2**62, -1], np.int64)}
    assert format_predict_response(outputs, False) == (
        b'{\n    "predictions": [4611686018427387904, -1\n    ]\n}'
    )
    assert format_predict_response({"y": np.array([True, False])}, False) == (
        b'{\n    "predictions": [true, false\n    ]\n}'
    )


def test_row_layout_single_output() -> None:
    body = format_predict_response({"y": np.array([3.5, 4, 5.5], np.float32)}, False)
    assert body == b'{\n    "predictions": [3.5, 4.0, 5.5\n    ]\n}'


def test_row_layout_2d() -> None:
    body = format_predict_response({"y": np.array([[3.5, 4.0], [4.0, 5.5]], np.float32)}, False)
    assert body == b'{\n    "predictions": [[3.5, 4.0], [4.0, 5.5]\n    ]\n}'


def test_row_layout_several_outputs() -> None:
    outputs = {"b": np.array([[1, 2], [3, 4]], np.int32), "a": np.array([0.5, 1.5], np.float32)}
    body = format_predict_response(outputs, False).decode()
    assert body == (
        "{\n"
        '    "predictions": [{\n'
        '            "a": 0.5,\n'
        '            "b": [1, 2]\n'
        "        }, {\n"
        '            "a": 1.5,\n'
        '            "b": [3, 4]\n'
        "        }\n"
        "    ]\n"
        "}"
    )


def test_columnar_layout_is_one_element_per_line() -> None:
    body = format_predict_response({"y": np.array([[1.0], [2.0]], np.float32)}, True)
    assert body.decode() == (
        "{\n"
        '    "outputs": [\n'
        "        [\n"
        "            1.0\n"
        "        ],\n"
        "        [\n"
        "            2.0\n"
        "        ]\n"
        "    ]\n"
        "}"
    )


def test_columnar_scalar_and_empty_outputs() -> None:
    outputs = {"s": np.array(2.0, np.float32), "e": np.zeros((0,), np.float32)}
    assert format_predict_response(outputs, True).decode() == (
        '{\n    "outputs": {\n        "e": [],\n        "s": 2.0\n    }\n}'
    )


def test_bytes_outputs_are_b64_and_other_strings_escaped() -> None:
    outputs = {
        "img_bytes": np.array([b"\x00\xff"], dtype=object),
        "label": np.array(['a"\\\n\x01é'.encode()], dtype=object),
    }
    body = format_predict_response(outputs, False).decode()
    assert body == (
        "{\n"
        '    "predictions": [{\n'
        '            "img_bytes": {\n'
        f'                "b64": "{base64.b64encode(bytes([0, 255])).decode()}"\n'
        "            },\n"
        '            "label": "a\\"\\\\\\n\\u0001é"\n'
        "        }\n"
        "    ]\n"
        "}"
    )


def test_row_format_rejects_inconsistent_batch_sizes() -> None:
    outputs = {"a": np.zeros(2, np.float32), "b": np.zeros(3, np.float32)}
    with pytest.raises(ServingError, match="inconsistent batch size: 3 expecting: 2"):
        format_predict_response(outputs, False)


def test_parse_row_and_columnar() -> None:
    inputs, columnar = parse('{"instances": [1, 2.5]}')
    assert not columnar
    assert inputs["x"].dtype == np.float32
    assert inputs["x"].tolist() == [1.0, 2.5]
    inputs, columnar = parse('{"inputs": [[1], [2]]}')
    assert columnar and inputs["x"].shape == (2, 1)
    inputs, _ = parse('{"inputs": {"x": 3}}')
    assert inputs["x"].shape == () and inputs["x"] == 3.0


def test_parse_several_named_inputs_and_b64() -> None:
    sig = signature({"a": types_pb2.DT_INT64, "s": types_pb2.DT_STRING})
    body = '{"instances": [{"a": [1, 2], "s": {"b64": "AAE="}}, {"a": [3, 4], "s": "hé"}]}'
    inputs, _ = parse(body, sig)
    assert inputs["a"].dtype == np.int64 and inputs["a"].tolist() == [[1, 2], [3, 4]]
    assert inputs["s"].tolist() == [b"\x00\x01", "hé".encode()]


def test_parse_nan_infinity_and_trailing_bytes() -> None:
    inputs, _ = parse('{"instances": [NaN, Infinity, -Infinity]} trailing ]]')
    values = inputs["x"]
    assert np.isnan(values[0]) and values[1] == np.inf and values[2] == -np.inf


@pytest.mark.parametrize(
    ("dtype", "body", "message"),
    [
        (types_pb2.DT_INT32, "[1.0]", "1.0 Type: Number is not of expected type: int32"),
        (types_pb2.DT_INT32, "[4294967296]", "4294967296 Type: Number " + NOT_INT32),
        (types_pb2.DT_FLOAT, "[true]", "true Type: True is not of expected type: float"),
        (types_pb2.DT_FLOAT, "[1, true]", "true Type: True is not of expected type: float"),
        (types_pb2.DT_FLOAT, '[{"b64": "AA=="}]', B64_OBJECT + " Type: Object " + NOT_FLOAT),
        (types_pb2.DT_BOOL, "[1]", "1 Type: Number is not of expected type: bool"),
        (types_pb2.DT_STRING, "[1]", "1 Type: Number is not of expected type: string"),
        (types_pb2.DT_UINT8, "[-1]", "-1 Type: Number is not of expected type: uint8"),
    ],
)  # fmt: skip
def test_type_errors(dtype: int, body: str, message: str) -> None:
    sig = signature({"x": dtype})
    index = body.count(",")
    assert error_message(f'{{"instances": {body}}}', sig) == (
        f"Failed to process element: {index} of 'instances' list. Error: INVALID_ARGUMENT: "
        f"JSON Value: {message}"
    )


def test_ragged_and_mixed_depth_lists() -> None:
    assert error_message('{"instances": [[1, 2, 3], [1, 2]]}') == (
        "Encountered list at unexpected size: 2 at level: 1 expected size: 3"
    )
    assert error_message('{"inputs": [[1], 2]}').startswith("Encountered scalar element")
    assert error_message('{"inputs": [1, [2]]}').startswith("Encountered list at level: 1")


def test_named_instances_need_every_input() -> None:
    sig = signature({"a": types_pb2.DT_FLOAT, "b": types_pb2.DT_FLOAT})
    assert error_message('{"instances": [{"a": 1}]}', sig) == (
        "Failed to process element: 0 of 'instances' list. JSON object: {\n    \"a\": 1\n} "
        "keys must be equal to: 2"
    )
    assert (
        error_message('{"inputs": {"a": [1]}}', sig) == "Missing named input: b in 'inputs' object."
    )


def test_too_deep_nesting_is_a_clear_400() -> None:
    deep = "[" * 65 + "1" + "]" * 65
    assert error_message(f'{{"instances": {deep}}}') == (
        "Tensor has at least 65 dimensions; at most 64 allowed"
    )
    deeper = "[" * 990 + "1" + "]" * 990  # near Python's recursion limit: still a 400
    message = error_message(f'{{"inputs": {deeper}}}')
    assert "at most 64 allowed" in message or message.startswith("JSON Parse error: ")
    inputs, _ = parse('{"inputs": ' + "[" * 64 + "1" + "]" * 64 + "}")
    assert inputs["x"].ndim == 64


def test_half_and_bfloat16_tensors() -> None:
    for dtype in (types_pb2.DT_HALF, types_pb2.DT_BFLOAT16):
        inputs, _ = parse('{"instances": [1.5, 2]}', signature({"x": dtype}))
        assert inputs["x"].astype(np.float32).tolist() == [1.5, 2.0]
        body = format_predict_response({"y": inputs["x"]}, False)
        assert body == b'{\n    "predictions": [1.5, 2.0\n    ]\n}'
