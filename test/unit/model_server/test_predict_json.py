"""json_codec: float formatting, response layout and request parsing (pure functions)."""

from __future__ import annotations

import base64
import json
import struct

import numpy as np
import pytest
from sagemaker_tfs.model_server import json_writer as jc
from sagemaker_tfs.model_server.errors import Code, ServingError
from sagemaker_tfs.model_server.servable import Signature, TensorSpec
from tensorflow.core.framework import types_pb2
from tensorflow_serving.apis import classification_pb2, regression_pb2


def signature(inputs: dict[str, int], outputs: dict[str, int] | None = None) -> Signature:
    def specs(aliases: dict[str, int]) -> dict[str, TensorSpec]:
        return {alias: TensorSpec(f"{alias}:0", dtype, None) for alias, dtype in aliases.items()}

    return Signature(
        "serving_default", "tensorflow/serving/predict", specs(inputs), specs(outputs or {})
    )


PARSE = "JSON Parse error: "
NOT_INT32 = "is not of expected type: int32"
NOT_FLOAT = "is not of expected type: float"
B64_OBJECT = '{\n    "b64": "AA=="\n}'
FLOAT_X = signature({"x": types_pb2.DT_FLOAT}, {"y": types_pb2.DT_FLOAT})


def parse(body: str, sig: Signature = FLOAT_X) -> tuple[dict[str, np.ndarray], bool]:
    return jc.parse_predict_request(jc.parse_json_object(body.encode()), sig)


def error_message(body: str, sig: Signature = FLOAT_X) -> str:
    with pytest.raises(ServingError) as caught:
        parse(body, sig)
    assert caught.value.code == Code.INVALID_ARGUMENT
    return caught.value.message


# ----------------------------------------------------------------------------- floats


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (4.0, "4.0"),
        (3.5, "3.5"),
        (9000000.0, "9e+06"),
        (3e-05, "3e-05"),
        (0.1, "0.1"),
        (1 / 3, "0.333333343"),  # %.6g does not round-trip in float32 -> %.9g
        (5000003.0, "5000003.0"),
        (-0.0, "-0.0"),
        (123456.0, "123456.0"),
        (1234567.0, "1234567.0"),
        (float("nan"), "NaN"),
        (float("inf"), "Infinity"),
        (float("-inf"), "-Infinity"),
    ],
)
def test_float32_formatting(value: float, text: str) -> None:
    assert jc.format_float(value) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [(0.1, "0.1"), (1 / 3, "0.33333333333333331"), (1e100, "1e+100"), (2.0, "2.0")],
)
def test_float64_formatting(value: float, text: str) -> None:
    assert jc.format_float(value, is_double=True) == text


def test_float_formatting_round_trips_for_random_values() -> None:
    rng = np.random.default_rng(7)
    values = (rng.standard_normal(5000) * 10.0 ** rng.integers(-20, 20, 5000)).astype(np.float32)
    texts = jc.format_floats(values)
    assert np.array_equal(np.array(texts, dtype=np.float64).astype(np.float32), values)
    for value, text in zip(values[:200].tolist(), texts[:200], strict=True):
        short = f"{value:.6g}"
        round_trips = struct.unpack("f", struct.pack("f", float(short)))[0] == value
        expected = short if round_trips else f"{value:.9g}"
        if "." not in expected and "e" not in expected:
            expected += ".0"
        assert text == expected


def test_integers_and_bools_print_as_json() -> None:
    outputs = {"y": np.array([2**62, -1], np.int64)}
    assert jc.format_predict_response(outputs, False) == (
        b'{\n    "predictions": [4611686018427387904, -1\n    ]\n}'
    )
    assert jc.format_predict_response({"y": np.array([True, False])}, False) == (
        b'{\n    "predictions": [true, false\n    ]\n}'
    )


# ----------------------------------------------------------------------------- layout


def test_row_layout_single_output() -> None:
    body = jc.format_predict_response({"y": np.array([3.5, 4, 5.5], np.float32)}, False)
    assert body == b'{\n    "predictions": [3.5, 4.0, 5.5\n    ]\n}'


def test_row_layout_2d() -> None:
    body = jc.format_predict_response({"y": np.array([[3.5, 4.0], [4.0, 5.5]], np.float32)}, False)
    assert body == b'{\n    "predictions": [[3.5, 4.0], [4.0, 5.5]\n    ]\n}'


def test_row_layout_several_outputs() -> None:
    outputs = {"b": np.array([[1, 2], [3, 4]], np.int32), "a": np.array([0.5, 1.5], np.float32)}
    body = jc.format_predict_response(outputs, False).decode()
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
    body = jc.format_predict_response({"y": np.array([[1.0], [2.0]], np.float32)}, True)
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
    assert jc.format_predict_response(outputs, True).decode() == (
        '{\n    "outputs": {\n        "e": [],\n        "s": 2.0\n    }\n}'
    )


def test_bytes_outputs_are_b64_and_other_strings_escaped() -> None:
    outputs = {
        "img_bytes": np.array([b"\x00\xff"], dtype=object),
        "label": np.array(['a"\\\n\x01é'.encode()], dtype=object),
    }
    body = jc.format_predict_response(outputs, False).decode()
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
        jc.format_predict_response(outputs, False)


def test_regress_and_classify_results_on_one_line() -> None:
    regression = regression_pb2.RegressionResult()
    for value in (3.5, 4.0):
        regression.regressions.add().value = value
    assert jc.format_regress_response(regression) == b'{\n    "results": [3.5, 4.0]\n}'
    classification = classification_pb2.ClassificationResult()
    for scores in ((0.25, 0.75), (1.0,)):
        classes = classification.classifications.add()
        for index, score in enumerate(scores):
            classes.classes.add(label=f"c{index}", score=score)
    assert jc.format_classify_response(classification) == (
        b'{\n    "results": [[["c0", 0.25], ["c1", 0.75]], [["c0", 1.0]]]\n}'
    )


def test_error_body() -> None:
    assert jc.format_error('no "x"') == b'{\n    "error": "no \\"x\\""\n}'


def test_proto_document_has_one_space_indent_and_newline() -> None:
    assert jc.format_proto_document({"a": [{"b": "1"}]}) == (
        b'{\n "a": [\n  {\n   "b": "1"\n  }\n ]\n}\n'
    )


# ----------------------------------------------------------------------------- parsing


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


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("", "JSON Parse error: The document is empty. at offset: 0"),
        ("  \n", "JSON Parse error: The document is empty. at offset: 3"),
        ("whatever", "JSON Parse error: Invalid value. at offset: 0"),
        ('{"a" 1}', PARSE + "Missing a colon after a name of object member. at offset: 5"),
        ('{"a": [1 2]}', PARSE + "Missing a comma or ']' after an array element. at offset: 9"),
        ('{"a": 1 "b": 2}', PARSE + "Missing a comma or '}' after an object member. at offset: 8"),
        ('{"a": "x', "JSON Parse error: Missing a closing quotation mark in string. at offset: 6"),
        ("[1, 2]", "JSON Value: [1, 2] Is not object"),
        ('"x"', 'JSON Value: "x" Is not object'),
    ],
)  # fmt: skip
def test_json_errors(body: str, message: str) -> None:
    with pytest.raises(ServingError) as caught:
        jc.parse_json_object(body.encode())
    assert caught.value.message == message


def test_named_instances_need_every_input() -> None:
    sig = signature({"a": types_pb2.DT_FLOAT, "b": types_pb2.DT_FLOAT})
    assert error_message('{"instances": [{"a": 1}]}', sig) == (
        "Failed to process element: 0 of 'instances' list. JSON object: {\n    \"a\": 1\n} "
        "keys must be equal to: 2"
    )
    assert (
        error_message('{"inputs": {"a": [1]}}', sig) == "Missing named input: b in 'inputs' object."
    )


@pytest.mark.parametrize(
    ("value", "text"),
    [(1.0, "1.0"), (1e-05, "0.00001"), (1e-07, "1e-7"), (1.5e30, "1.5e30"), (1e21, "1e21"),
     (1e20, "100000000000000000000.0"), (-2.5, "-2.5"), (123.456, "123.456")],
)  # fmt: skip
def test_quoted_doubles_use_rapidjson_layout(value: float, text: str) -> None:
    assert jc.rapidjson_double(value) == text


def test_examples_become_tf_example_protos() -> None:
    document = {
        "context": {"c": "ctx"},
        "examples": [{"x": 1.5, "n": [1, 2], "s": {"b64": "AAE="}}, {"x": [2, 2.5]}],
    }
    request_input = jc.parse_examples_request(document)
    listing = request_input.example_list_with_context
    assert listing.context.features.feature["c"].bytes_list.value == [b"ctx"]
    first = listing.examples[0].features.feature
    assert first["x"].float_list.value == [1.5]
    assert first["n"].int64_list.value == [1, 2]
    assert first["s"].bytes_list.value == [b"\x00\x01"]
    assert listing.examples[1].features.feature["x"].float_list.value == [2.0, 2.5]
    plain = jc.parse_examples_request({"examples": [{"x": 1.0}]})
    assert plain.WhichOneof("kind") == "example_list"


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


def test_fast_and_standard_parsers_agree() -> None:
    body = b'{"instances": [[1, 2.5, -3e-7, 1e308], ["\\u00e9", {"b64": "AA=="}], true, null]}'
    assert jc._strict_fast_parse(body) == jc._lenient_parse(body) == jc.parse_json_object(body)
    big = b'{"a": [18446744073709551615, 18446744073709551616, -9223372036854775809]}'
    assert jc._strict_fast_parse(big) == jc._lenient_parse(big)
    assert jc._lenient_parse(big)["a"] == [2**64 - 1, float(2**64), float(-(2**63) - 1)]
    for lenient_only in (b'{"a": NaN}', b'{"a": 1} trailing', b'{"a": Infinity}'):
        assert jc._strict_fast_parse(lenient_only) is None
        assert jc.parse_json_object(lenient_only) == jc._lenient_parse(lenient_only)


@pytest.mark.parametrize(
    ("number", "offset"),
    [("9" * 5000, 15), ("-" + "9" * 400, 15), ("1e400", 15), ("-2.5E+999", 15)],
)
def test_numbers_beyond_a_double_are_a_parse_error_not_a_crash(number: str, offset: int):
    """rapidjson's kParseErrorNumberTooBig; Python's int() refuses over 4300 digits and
    float(int) overflows, which must not escape as a 500."""
    message = error_message(f'{{"instances": [{number}, 1]}}')
    expected = f"JSON Parse error: Number too big to be stored in double. at offset: {offset}"
    assert message == expected


def test_long_integers_within_a_double_become_doubles() -> None:
    body = ('{"a": [' + "9" * 25 + ", -" + "1" * 300 + "]}").encode()
    assert jc.parse_json_object(body)["a"] == [float("9" * 25), -float("1" * 300)]


@pytest.mark.parametrize(
    ("body", "offset"),
    [
        ('{"instances": ["\\ud800"]}', 16),
        ('{"instances": ["\\uDC00"]}', 16),
        ('{"instances": ["a\\ud800\\u0041"]}', 17),
        ('{"\\udbff": 1}', 2),
        ('{"instances": ["\\\\\\ud800"], "x": NaN}', 18),
    ],
)
def test_lone_surrogates_are_refused_like_rapidjson(body: str, offset: int) -> None:
    """A lone \\uD800 cannot be encoded as UTF-8: rapidjson refuses it; so must we (not 500)."""
    expected = f"JSON Parse error: The surrogate pair in string is invalid. at offset: {offset}"
    assert error_message(body) == expected


@pytest.mark.parametrize(
    ("body", "value"),
    [
        ('{"instances": ["\\ud83d\\ude00"]}', "\U0001f600"),
        ('{"instances": ["\\\\ud800"]}', "\\ud800"),  # a backslash, then the text ud800
    ],
)
def test_surrogate_pairs_and_escaped_backslashes_are_accepted(body: str, value: str) -> None:
    assert jc.parse_json_object(body.encode())["instances"] == [value]


def test_half_and_bfloat16_tensors() -> None:
    for dtype in (types_pb2.DT_HALF, types_pb2.DT_BFLOAT16):
        inputs, _ = parse('{"instances": [1.5, 2]}', signature({"x": dtype}))
        assert inputs["x"].astype(np.float32).tolist() == [1.5, 2.0]
        body = jc.format_predict_response({"y": inputs["x"]}, False)
        assert body == b'{\n    "predictions": [1.5, 2.0\n    ]\n}'


@pytest.mark.parametrize("message", ["bad \udcff\udcc1 bytes", "lone \ud800", "fine \u00e9"])
def test_error_bodies_are_always_valid_utf8_json(message: str) -> None:
    body = jc.format_error(message)
    assert json.loads(body.decode("utf-8"))["error"].startswith(message[:4])
