"""text_tensors reads a JSON or CSV body into exactly the array the REST path feeds the model.

The REST path here is the real one, in process: ``conversion.convert`` (the service), then the
model server's JSON reader (``json_reader.parse_json_object``) and Predict's request reader
(``predict_json.parse_predict_request``). Every body read here must give the same dtype,
shape and bits (a negative zero is not a zero), and the same row/columnar kind; a body it does
not read (None) is left to the REST path, which must then be what answers or refuses it.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from conversion_cases import BAD_BODIES, CASES
from sagemaker_tfs.model_server.errors import ServingError
from sagemaker_tfs.model_server.rest.json_reader import parse_json_object
from sagemaker_tfs.model_server.rest.predict_json import parse_predict_request
from sagemaker_tfs.model_server.serving.signatures import GraphTensor, ServableSignature
from sagemaker_tfs.service import text_json, text_tensors
from sagemaker_tfs.service.conversion import convert
from sagemaker_tfs.service.text_refusals import Refusal
from sagemaker_tfs.service.text_tensors import TextRequest, read_text_request
from sagemaker_tfs.wire import tensors
from sagemaker_tfs.wire.errors import HttpError
from sagemaker_tfs.wire.signatures import Signature, TensorSpec

CSV = "text/csv"
JSON = "application/json"
DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64 = (
    tensors.tf_dtype(dtype) for dtype in (np.float32, np.float64, np.int32, np.int64)
)
DTYPES = [DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64]


def rest_path(kind: str, body: bytes, dtype: int) -> tuple[np.ndarray, bool] | str:
    """What the REST path feeds input ``x`` of ``dtype``, and whether it is columnar; or the
    error it answers."""
    signature = ServableSignature(
        "serving_default", "tensorflow/serving/predict", {"x": GraphTensor("x:0", dtype, None)}, {}
    )
    try:
        document = parse_json_object(convert(kind, body).encode())
        inputs, columnar = parse_predict_request(document, signature)
    except (HttpError, ServingError) as error:
        return str(error)
    return inputs["x"], columnar


def read(kind: str, body: bytes, dtype: int) -> TextRequest | Refusal | None:
    signature = Signature("serving_default", "", {"x": TensorSpec("x", dtype, None)}, {})
    return read_text_request(kind, body, {"serving_default": signature})


def assert_same_as_rest(kind: str, body: bytes, dtype: int, must_read: bool = False) -> None:
    tensor = read(kind, body, dtype)
    expected = rest_path(kind, body, dtype)
    if tensor is None:
        assert not must_read, (body[:200], expected)
        return
    if isinstance(tensor, Refusal):  # the REST path's refusal, word for word
        assert tensor.message == expected, body[:200]
        return
    assert not isinstance(expected, str), (body[:200], expected)
    array, columnar = expected
    assert tensor.columnar == columnar
    (read_array,) = tensor.arrays.values()
    assert read_array.dtype == array.dtype and read_array.shape == array.shape, body[:200]
    assert read_array.tobytes() == array.tobytes(), body[:200]


NUMERIC_BODIES = [
    (CSV, b"1.0,2.0\n3.0,4.0\n"),
    (CSV, b"1.0\n2.0\n"),
    (CSV, b"1\r\n2\r\n3"),
    (CSV, b" 1 ,\t2\n\n3,4\n"),
    (CSV, b"1.10,12345678901234567890,-0.5e-3"),
    (CSV, b"+1.5,.5,1.,007,1E5,-2e-3"),
    (CSV, b"0.123456789\n" * 1000),
    (CSV, b"16777217,9007199254740993,3.4028235e38,1e-320\n"),
    (JSON, b'{"instances": [1.0, 2.0]}'),
    (JSON, b'{"instances": [[1.0, 2.0], [3.0, 4.0]]}'),
    (JSON, b' \n{ "instances" :[[[1],[2]],[[3],[4]]] }\r\n'),
    (JSON, b'{"inputs": [[1, 2.5], [3, -4e2]]}'),
    (JSON, b'{"inputs": [7]}'),
    (JSON, b"[1.0, 2.0]"),
    (JSON, b"[[1.0, 2.0], [3.0, 4.0]]"),
    (JSON, b"[[1, -0.0], [0, 1e-7]]"),
    (JSON, b"[[12345678901234567890123, 0.1]]"),
]


@pytest.mark.parametrize(("kind", "body"), NUMERIC_BODIES)
def test_numeric_bodies_are_read_as_the_rest_path_reads_them(kind: str, body: bytes) -> None:
    for dtype in (DT_FLOAT, DT_DOUBLE):
        assert_same_as_rest(kind, body, dtype, must_read=True)


@pytest.mark.parametrize(
    ("kind", "body"),
    [(CSV, b"1,2\n3,-4\n"), (CSV, b"+7\n007\n-0\n"), (JSON, b'{"instances": [[1, 2], [-3, 4]]}'),
     (JSON, b"[2147483647, -2147483648]")],  # fmt: skip
)
def test_integer_inputs(kind: str, body: bytes) -> None:
    for dtype in (DT_INT32, DT_INT64):
        assert_same_as_rest(kind, body, dtype, must_read=True)


@pytest.mark.parametrize(
    ("kind", "body", "dtype"),
    [
        (CSV, b"1.5\n", DT_INT32),  # a fraction for an integer: the REST error
        (CSV, b"2147483648\n", DT_INT32),  # out of range
        (CSV, b"1e400\n", DT_FLOAT),  # too big for a double: the REST error
        (CSV, b"nan\n", DT_FLOAT),
        (CSV, b"1\r2\n", DT_FLOAT),  # one line to conversion
        (CSV, b"1,2\n3\n", DT_FLOAT),
        (CSV, b"1,,2\n", DT_FLOAT),
        (CSV, b"1 2\n", DT_FLOAT),
        (CSV, b"1\n   \n2\n", DT_FLOAT),  # a blank line of spaces: conversion's rule
        (CSV, b"\n\n", DT_FLOAT),
        (JSON, b"[[1, 2], [3]]", DT_FLOAT),  # ragged
        (JSON, b"[[1, 2], 3]", DT_FLOAT),
        (JSON, b"[[1, 2]] [[3, 4]]", DT_FLOAT),  # JSON lines in a JSON body
        (JSON, b"[[]]", DT_FLOAT),
        (JSON, b"[]", DT_FLOAT),
        (JSON, b"[1 2]", DT_FLOAT),
        (JSON, b"[1,,2]", DT_FLOAT),
        (JSON, b"[01, 2]", DT_FLOAT),  # not JSON
        (JSON, b"[+1, .5]", DT_FLOAT),
        (JSON, b"[1e400]", DT_FLOAT),
        (JSON, b"[-NaN]", DT_FLOAT),  # spellings the REST path refuses
        (JSON, b"[Inf, nan]", DT_FLOAT),
        (CSV, b"NaN\n", DT_FLOAT),  # a string on the REST path
        (JSON, b'{"instances": [1.0], "signature_name": "other"}', DT_FLOAT),
        (JSON, b'{"inputs": {"y": [1.0]}}', DT_FLOAT),
        (JSON, b'{"inputs": {"x": [1.0], "y": [2.0]}}', DT_FLOAT),
        (JSON, b'{"instances": [1.0], "other": 1}', DT_FLOAT),
        (JSON, b'{"instances": [1.0]}}', DT_FLOAT),
        (JSON, b'{"instances": [1.0]', DT_FLOAT),
        (JSON, b'{"instances": [1.0]]}', DT_FLOAT),
        (JSON, b'{"instances": ["a"]}', DT_FLOAT),
        (JSON, b"\xef\xbb\xbf[1]", DT_FLOAT),
        (JSON, b"[" * 65 + b"1" + b"]" * 65, DT_FLOAT),
        ("application/jsonlines", b"1\n2", DT_FLOAT),
        ("application/jsonlines", b"[1]\n\n[2]", DT_FLOAT),
    ],
)
def test_bodies_left_to_the_rest_path(kind: str, body: bytes, dtype: int) -> None:
    assert read(kind, body, dtype) is None


@pytest.mark.parametrize(("kind", "text"), CASES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_conversion_cases(kind: str, text: str, dtype: int) -> None:
    assert_same_as_rest(kind, text.encode(), dtype)


@pytest.mark.parametrize(("kind", "body", "status", "message"), BAD_BODIES)
def test_bad_bodies_are_left_to_the_rest_path(kind: str, body: bytes, status: int,
                                              message: str) -> None:  # fmt: skip
    assert read(kind, body, DT_FLOAT) is None


def random_number(rng: random.Random) -> str:
    """A JSON number, a negative zero in all its spellings now and then."""
    if rng.random() < 0.1:
        return rng.choice(["-0", "-0.0", "-0e3", "-0.000E-2", "0", "-0.0e0"])
    return _random_number(rng)


def _random_number(rng: random.Random) -> str:
    digits = "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 20)))
    digits = digits.lstrip("0") or "0"
    shape = rng.random()
    if shape < 0.3:
        return "-" * rng.randint(0, 1) + digits
    if shape < 0.7:
        return f"{'-' * rng.randint(0, 1)}{digits[0]}.{digits[1:] or '0'}e{rng.randint(-50, 50)}"
    return f"{'-' * rng.randint(0, 1)}0.{digits}"


NEGATIVE_ZEROS = [
    b"-0\n",  # the integer 0 on the REST path
    b"-0.0\n",  # a negative zero on both
    b"-0\n-0.0\n-0e1\n-00\n-.0\n-0.\n -0 \n-0.000E+2\n1e-0\n-1e-0\n",
    b"1,-0,-0.0\r\n-0,2,-0e-0\r\n",
    b"0.5\n" * 1000 + b"-0.000\n" + b"-0\n" * 3 + b"-0.25\n" * 1000,
]


@pytest.mark.parametrize("body", NEGATIVE_ZEROS)
@pytest.mark.parametrize("parse_bytes", [1, 3, 1 << 20])
def test_csv_negative_zeros_are_read_as_the_rest_path_reads_them(
    body: bytes, parse_bytes: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every spelling of a negative zero, pieces cut anywhere: read here (not left to the
    REST path, issue 53), with the REST path's zero for integer text."""
    monkeypatch.setattr(text_tensors, "PARSE_BYTES", parse_bytes)
    for dtype in (DT_FLOAT, DT_DOUBLE):
        assert_same_as_rest(CSV, body, dtype, must_read=True)
    assert_same_as_rest(CSV, body, DT_INT32)  # a point: the REST path's error


@pytest.mark.parametrize("seed", range(6))
def test_random_arrays_in_pieces(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Shapes of 1 to 4 dimensions, spacing and numbers at random, read with tiny pieces so
    that scans and parses cut numbers, brackets and rows everywhere."""
    monkeypatch.setattr(text_tensors, "SCAN_BYTES", 7)
    monkeypatch.setattr(text_tensors, "PARSE_BYTES", 5)
    monkeypatch.setattr(text_json, "PARSE_BYTES", 5)
    rng = random.Random(seed)
    for _ in range(20):
        shape = [rng.randint(1, 4) for _ in range(rng.randint(1, 4))]
        values = np.array([random_number(rng) for _ in range(int(np.prod(shape)))]).reshape(shape)
        space = rng.choice(["", " ", "\n  ", "\t"])
        text = np.array2string(values, separator="," + space, threshold=10**9, max_line_width=60)
        text = text.replace("'", "")
        for wrapped in (text, '{"instances": ' + text + "}", '{"inputs":' + text + "}"):
            assert_same_as_rest(JSON, wrapped.encode(), rng.choice(DTYPES[:2]), must_read=True)
        rows = values.reshape(values.shape[0], -1)
        csv = "\n".join(",".join(row) for row in rows) + rng.choice(["", "\n", "\r\n"])
        assert_same_as_rest(CSV, csv.encode(), DT_FLOAT, must_read=True)


ONE_COLUMN = [
    b"1.5\n2.5\n-3e2\n",
    b"1.5\r\n2.5\r\n.5\r\n5.\r\n",
    b"1\n2\n3",
    b" 1.5 \n\t2.5\t\n",
    b"1.5\n\n2.5\n",  # a blank line: read a line at a time
    b"1.5\n  \n2.5\n",  # blanks on a line: the REST path's error
    b"nan\ninf\n-inf\n1\n",
    b"1.5\nabc\n",
    b"-0\n-0.0\n0\n",
    b"\n\n",
    b"9" * 400 + b"\n1\n",
]


@pytest.mark.parametrize("body", ONE_COLUMN)
@pytest.mark.parametrize("scan_bytes", [3, 1 << 20])
@pytest.mark.parametrize("row_bytes", [4, 1 << 18])
def test_one_value_a_line_read_as_rows_of_fields_as_the_rest_path_reads_it(
    body: bytes, scan_bytes: int, row_bytes: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(text_tensors, "SCAN_BYTES", scan_bytes)
    monkeypatch.setattr(text_tensors, "ROW_OF_FIELDS_BYTES", row_bytes)
    for dtype in DTYPES:
        assert_same_as_rest(CSV, body, dtype)


def test_one_value_a_line_is_read_by_one_call_of_numpys_reader(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """NumPy's reader costs over twice as much a line as a field: a piece of one value a
    line is given to it as lines of fields (of up to 256 KB: its own memory is ~10x)."""
    texts = []
    original = text_tensors._loadtxt
    monkeypatch.setattr(
        text_tensors,
        "_loadtxt",
        lambda text, numbers: texts.append(text) or original(text, numbers),
    )
    body = b"".join(b"%.3f\r\n" % value for value in np.linspace(-1, 1, 5000))
    assert_same_as_rest(CSV, body, DT_FLOAT, must_read=True)
    assert len(texts) == 1 and b"\n" not in texts[0]
