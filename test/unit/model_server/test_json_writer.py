"""json_writer: TF Serving's float text (``wire/tfs_json.py``'s), rapidjson's doubles and strings,
error and proto bodies."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest
from sagemaker_tfs.model_server.rest import json_writer as jw
from sagemaker_tfs.wire import tfs_json


def format_float(value: float, is_double: bool = False) -> str:
    """One float as the REST API writes it (float32 unless ``is_double``)."""
    return tfs_json.format_floats(np.array([value], dtype=np.float64 if is_double else np.float32))[
        0
    ]


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
    assert format_float(value) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [(0.1, "0.1"), (1 / 3, "0.33333333333333331"), (1e100, "1e+100"), (2.0, "2.0")],
)
def test_float64_formatting(value: float, text: str) -> None:
    assert format_float(value, is_double=True) == text


def test_float_formatting_round_trips_for_random_values() -> None:
    rng = np.random.default_rng(7)
    values = (rng.standard_normal(5000) * 10.0 ** rng.integers(-20, 20, 5000)).astype(np.float32)
    texts = tfs_json.format_floats(values)
    assert np.array_equal(np.array(texts, dtype=np.float64).astype(np.float32), values)
    for value, text in zip(values[:200].tolist(), texts[:200], strict=True):
        short = f"{value:.6g}"
        round_trips = struct.unpack("f", struct.pack("f", float(short)))[0] == value
        expected = short if round_trips else f"{value:.9g}"
        if "." not in expected and "e" not in expected:
            expected += ".0"
        assert text == expected


@pytest.mark.parametrize(
    ("value", "text"),
    [(1.0, "1.0"), (1e-05, "0.00001"), (1e-07, "1e-7"), (1.5e30, "1.5e30"), (1e21, "1e21"),
     (1e20, "100000000000000000000.0"), (-2.5, "-2.5"), (123.456, "123.456")],
)  # fmt: skip
def test_quoted_doubles_use_rapidjson_layout(value: float, text: str) -> None:
    assert tfs_json.rapidjson_double(value) == text


def test_error_body() -> None:
    assert jw.format_error('no "x"') == b'{\n    "error": "no \\"x\\""\n}'


def test_proto_document_has_one_space_indent_and_newline() -> None:
    assert jw.format_proto_document({"a": [{"b": "1"}]}) == (
        b'{\n "a": [\n  {\n   "b": "1"\n  }\n ]\n}\n'
    )


@pytest.mark.parametrize("message", ["bad \udcff\udcc1 bytes", "lone \ud800", "fine \u00e9"])
def test_error_bodies_are_always_valid_utf8_json(message: str) -> None:
    body = jw.format_error(message)
    assert json.loads(body.decode("utf-8"))["error"].startswith(message[:4])
