"""json_reader: request bodies read as rapidjson reads them, with its error messages."""

from __future__ import annotations

import pytest
from sagemaker_tfs.model_server.errors import Code, ServingError
from sagemaker_tfs.model_server.rest import json_reader as jr

PARSE = "JSON Parse error: "


def error_message(body: str) -> str:
    with pytest.raises(ServingError) as caught:
        jr.parse_json_object(body.encode())
    assert caught.value.code == Code.INVALID_ARGUMENT
    return caught.value.message


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
        jr.parse_json_object(body.encode())
    assert caught.value.message == message


def test_fast_and_standard_parsers_agree() -> None:
    body = b'{"instances": [[1, 2.5, -3e-7, 1e308], ["\\u00e9", {"b64": "AA=="}], true, null]}'
    assert jr._strict_fast_parse(body) == jr._lenient_parse(body) == jr.parse_json_object(body)
    big = b'{"a": [18446744073709551615, 18446744073709551616, -9223372036854775809]}'
    assert jr._strict_fast_parse(big) == jr._lenient_parse(big)
    assert jr._lenient_parse(big)["a"] == [2**64 - 1, float(2**64), float(-(2**63) - 1)]
    for lenient_only in (b'{"a": NaN}', b'{"a": 1} trailing', b'{"a": Infinity}'):
        assert jr._strict_fast_parse(lenient_only) is None
        assert jr.parse_json_object(lenient_only) == jr._lenient_parse(lenient_only)


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
    assert jr.parse_json_object(body)["a"] == [float("9" * 25), -float("1" * 300)]


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
    assert jr.parse_json_object(body.encode())["instances"] == [value]
