"""text_tensors reads a JSON or CSV body into exactly the array the REST path feeds the model.

The REST path here is the real one, in process: ``text_rest.convert`` (the service), then the
model server's JSON reader (``json_reader.parse_json_object``) and Predict's request reader
(``predict_json.parse_predict_request``). Every body read here must give the same dtype,
shape and bits (a negative zero is not a zero), and the same row/columnar kind; a body it does
not read (None) is left to the REST path, which must then be what answers or refuses it.
"""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from conversion_cases import BAD_BODIES, CASES
from sagemaker_tfs.model_server.errors import ServingError
from sagemaker_tfs.model_server.rest.json_reader import parse_json_object
from sagemaker_tfs.model_server.rest.predict_json import parse_predict_request
from sagemaker_tfs.model_server.serving.signatures import GraphTensor, ServableSignature
from sagemaker_tfs.service.codecs.text import text_csv, text_json
from sagemaker_tfs.service.codecs.text.text_rest import convert
from sagemaker_tfs.service.codecs.text_codecs import ARRAY_READERS, Refusal, TextRequest
from sagemaker_tfs.wire import tensors
from sagemaker_tfs.wire.errors import HttpError
from sagemaker_tfs.wire.signatures import Signature, TensorSpec


def read_text_request(
    kind: str, body: bytes, signatures: dict[str, Signature]
) -> TextRequest | Refusal | None:
    """The family's reading into arrays alone (``text_codecs``' codec of the media type):
    None where the entry point would write TF Serving's REST request instead."""
    return ARRAY_READERS[kind](body, signatures)


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
        (CSV, b"1e400\n", DT_FLOAT),  # too big for a double: the REST error
        (CSV, b"nan\n", DT_FLOAT),
        (CSV, b"1\r2\n", DT_FLOAT),  # one line to conversion
        (CSV, b"1,2\n3\n", DT_FLOAT),
        (CSV, b"1,,2\n", DT_FLOAT),
        (CSV, b"1 2\n", DT_FLOAT),
        (CSV, b"1\n   \n2\n", DT_FLOAT),  # a blank line of spaces: conversion's rule
        (CSV, b"\n\n", DT_FLOAT),
        (JSON, b"[[1, 2], []]", DT_FLOAT),  # ragged with an empty list
        (JSON, b"[[1, 2]] [[3, 4]]", DT_FLOAT),  # JSON lines in a JSON body
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


@pytest.mark.parametrize("body", [b"[[]]", b"[]", b"[[], []]", b'{"inputs": [[[]]]}'])
def test_empty_lists_are_read_as_the_rest_path_reads_them(body: bytes) -> None:
    """Read since issue 53's one-implementation part (the REST way before)."""
    for dtype in DTYPES:
        assert_same_as_rest(JSON, body, dtype, must_read=True)


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
    monkeypatch.setattr(text_csv, "PARSE_BYTES", parse_bytes)
    for dtype in (DT_FLOAT, DT_DOUBLE):
        assert_same_as_rest(CSV, body, dtype, must_read=True)
    assert_same_as_rest(CSV, body, DT_INT32)  # a point: the REST path's error


@pytest.mark.parametrize("seed", range(6))
def test_random_arrays_in_pieces(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Shapes of 1 to 4 dimensions, spacing and numbers at random, read with tiny pieces so
    that scans and parses cut numbers, brackets and rows everywhere."""
    monkeypatch.setattr(text_csv, "SCAN_BYTES", 7)
    monkeypatch.setattr(text_csv, "PARSE_BYTES", 5)
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


OTHER_DTYPES = [
    tensors.tf_dtype(np.dtype(dtype))
    for dtype in (np.int8, np.int16, np.uint8, np.uint16, np.uint32, np.float16)
]
OTHER_DTYPE_BODIES = [
    (CSV, b"1,2\n3,-4\n"),
    (CSV, b"255\n256\n-129\n65536\n"),  # wrapped into the dtype, as on the REST path
    (CSV, b"4294967295\n2147483647\n"),
    (JSON, b'{"instances": [[1, 2], [300, 4]]}'),
    (JSON, b'{"inputs": [-1, 70000, 0]}'),
    (JSON, b"[4294967295, 4294967296]"),  # beyond a uint32: the REST path's refusal
    (JSON, b"[-2147483649, 1]"),  # beyond an int32
    (JSON, b'{"instances": [1.5, 70000.25, 1e-8]}'),
    (CSV, b"65504\n65520\n1e-8\n-0\n-0.0\n"),  # a float16's largest, its infinity, its zeros
]


@pytest.mark.parametrize(("kind", "body"), OTHER_DTYPE_BODIES)
@pytest.mark.parametrize("dtype", OTHER_DTYPES, ids=lambda dtype: tensors.dtype_name(dtype))
def test_other_dtypes_are_read_as_the_rest_path_reads_them(kind: str, body: bytes,
                                                           dtype: int) -> None:  # fmt: skip
    """int8, int16, uint8, uint16, uint32 and half inputs (issue 53): read here with the REST
    path's values (integers within an int32's or a uint32's range, then wrapped), or refused
    with its words."""
    read_here = read(kind, body, dtype)
    expected = rest_path(kind, body, dtype)
    assert read_here is not None or isinstance(expected, str) and kind == CSV, (body, expected)
    assert_same_as_rest(kind, body, dtype)


CSV_INTEGERS_REFUSED = [
    b"1.5\n",  # a fraction
    b"2147483648\n",  # beyond an int32
    b"1,2\n3,4.0\n",
    b"1\n\n2\n 3e2 \n",  # an exponent, after a blank line (not a row)
    b"1\n" * 300 + b"+1.\n",  # conversion's 1.0
    b"007,-0\r\n12345678901234567890,1\r\n",  # beyond an int64
    b"1,2\n123456789012345678901234,3\n",  # a double to the REST path's reader
    b"-1.0e0,9\n",
    b"4294967296\n-2147483649\n",
]
CSV_INTEGERS_NOT_READ = [b"1.5\n1,2\n", b"1.5\nabc\n", b"1e400\n1\n", b"1.5\n1\r2\n"]


@pytest.mark.parametrize("body", CSV_INTEGERS_REFUSED)
@pytest.mark.parametrize("scan_bytes", [3, 1 << 20])
def test_csv_integer_inputs_given_other_numbers_are_refused_alike(
    body: bytes, scan_bytes: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A CSV field with a point or an exponent, or beyond the REST path's range, for an
    integer input: the REST path's 400, word for word, without the REST path (issue 53)."""
    monkeypatch.setattr(text_csv, "SCAN_BYTES", scan_bytes)
    for dtype in [DT_INT32, DT_INT64, *OTHER_DTYPES[:-1]]:
        refused = read(CSV, body, dtype)
        expected = rest_path(CSV, body, dtype)
        if isinstance(expected, str):
            assert isinstance(refused, Refusal) and refused.message == expected, (body, dtype)
        else:
            assert_same_as_rest(CSV, body, dtype, must_read=True)


@pytest.mark.parametrize("body", CSV_INTEGERS_NOT_READ)
def test_csv_integer_refusals_leave_other_errors_to_the_rest_path(body: bytes) -> None:
    """Conversion's error (a short row, a string, a lone CR) or the model server's (a number
    beyond a double) comes first on the REST path: not refused here."""
    assert read(CSV, body, DT_INT64) is None
    assert isinstance(rest_path(CSV, body, DT_INT64), str)


RAGGED = [
    b"[[1, 2], [3]]",
    b"[[1, 2], 3]",  # conversion's one instance: a level down
    b'{"instances": [[1, 2], 3]}',
    b'{"instances": [1, [2]]}',
    b'{"inputs": [[[1], [2]], [[3], [4, 5]]]}',
    b'{"instances": [[1], [[2]]]}',
    b"[[[1, 2], [3, 4]], [[5, 6]]]",
    b'{"signature_name": "serving_default", "instances": [[1, 2], [3, 4], [5]]}',
    b'{"inputs": [[NaN, 1], [2]]}',
]


@pytest.mark.parametrize("body", RAGGED)
def test_ragged_lists_are_refused_alike(body: bytes) -> None:
    """The REST path's 400 for a ragged list, word for word, without the REST path (issue 53)."""
    for dtype in (DT_FLOAT, DT_INT64):
        expected = rest_path(JSON, body, dtype)
        refused = read(JSON, body, dtype)
        if b"NaN" in body and dtype == DT_INT64:  # the value's error comes first: the REST way
            assert refused is None
            continue
        assert isinstance(refused, Refusal) and refused.message == expected, (body, expected)


def random_nested(rng: random.Random, level: int) -> object:
    """Numbers in lists of 1-3 members, 1-4 levels, mostly rectangular, ragged now and then."""
    if level >= 4 or (level and rng.random() < 0.15):
        return rng.randint(-9, 9)
    size = rng.choice([2, 2, 2, 1, 3])
    return [random_nested(rng, level + 1) for _ in range(size)]


@pytest.mark.parametrize("seed", range(4))
def test_random_ragged_lists(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(text_json, "PARSE_BYTES", 3)
    rng = random.Random(seed)
    for _ in range(200):
        text = json.dumps(random_nested(rng, 0))
        for body in (text, '{"instances": ' + text + "}", '{"inputs": ' + text + "}"):
            expected = rest_path(JSON, body.encode(), DT_FLOAT)
            read_here = read(JSON, body.encode(), DT_FLOAT)
            if isinstance(expected, str):
                assert isinstance(read_here, Refusal), (body, expected)
                assert read_here.message == expected, body
            else:
                assert_same_as_rest(JSON, body.encode(), DT_FLOAT, must_read=True)


STRING_BODIES = [  # read by the REST path
    b'{"instances": ["a", "b\\u00e9", ""]}',
    b'{"inputs": [["x", {"b64": "aGk="}], [{"b64": "aGk"}, "\\ud83d\\ude00"]]}',
    b'{"inputs": [{"b64": "_-8="}]}',  # the URL-safe alphabet
    b'["a", "b"]',  # conversion's one instance
    b'[["a"], ["b"]]',
    b'{"signature_name": "serving_default", "instances": [[["a", "b"]], [["c", "d"]]]}',
    b'{"instances": ["a,b", "c\\"d", "[1]", "nul\\u0000in"]}',
    b'{"instances": [{"x": "a"}, {"x": {"b64": "aGk="}}]}',  # rows naming the input
    b'{"inputs": {"x": [["a"], ["b"]]}}',
]
STRINGS_THE_REST_PATH_REFUSES = [
    b'{"instances": ["a", 1]}',
    b'{"instances": [["a"], ["b", "c"]]}',
    b'{"instances": [{"b64": "@@"}]}',
    b'{"instances": [{"x": "a"}, {"y": "b"}]}',
    b'{"instances": []}',
    b'{"instances": "a"}',
    b'{"instances": ["\\ud800"]}',
]


@pytest.mark.parametrize("body", STRING_BODIES + STRINGS_THE_REST_PATH_REFUSES)
def test_strings_are_left_to_the_rest_path(body: bytes) -> None:
    """A string input's strings and b64 objects go the REST way: over gRPC the stack held
    more memory than that way (issue 53, docs/performance.md)."""
    assert read(JSON, body, tensors.DT_STRING) is None


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
    monkeypatch.setattr(text_csv, "SCAN_BYTES", scan_bytes)
    monkeypatch.setattr(text_csv, "ROW_OF_FIELDS_BYTES", row_bytes)
    for dtype in DTYPES:
        assert_same_as_rest(CSV, body, dtype)


def test_one_value_a_line_is_read_by_one_call_of_numpys_reader(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """NumPy's reader costs over twice as much a line as a field: a piece of one value a
    line is given to it as lines of fields (of up to 256 KB: its own memory is ~10x)."""
    texts = []
    original = text_csv._loadtxt
    monkeypatch.setattr(
        text_csv,
        "_loadtxt",
        lambda text, numbers: texts.append(text) or original(text, numbers),
    )
    body = b"".join(b"%.3f\r\n" % value for value in np.linspace(-1, 1, 5000))
    assert_same_as_rest(CSV, body, DT_FLOAT, must_read=True)
    assert len(texts) == 1 and b"\n" not in texts[0]
