"""The bounded reader takes named inputs, several inputs, ``signature_name`` and JSON lines
(issue 53), reading exactly what the REST path reads.

The REST path here is the real one, in process (as in test_text_tensors.py): ``text_rest
.convert``, then the model server's JSON reader and Predict's request reader, for a model
with two signatures: ``serving_default`` (inputs ``a`` and ``b``) and ``one`` (input ``x``).
"""

from __future__ import annotations

import json
import random
from typing import Any

import numpy as np
import pytest
from sagemaker_tfs.model_server.errors import ServingError
from sagemaker_tfs.model_server.rest.json_reader import parse_json_object
from sagemaker_tfs.model_server.rest.predict_json import parse_predict_request
from sagemaker_tfs.model_server.serving.signatures import GraphTensor, ServableSignature
from sagemaker_tfs.service.codecs.text import text_json
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


JSON = "application/json"
LINES = "application/jsonlines"
DT_FLOAT, DT_INT64 = (tensors.tf_dtype(np.dtype(dtype)) for dtype in (np.float32, np.int64))
SIGNATURE_INPUTS = {"serving_default": ("a", "b"), "one": ("x",)}


def signatures(dtype: int) -> dict[str, Signature]:
    return {
        name: Signature(name, "", {i: TensorSpec(i, dtype, None) for i in inputs}, {})
        for name, inputs in SIGNATURE_INPUTS.items()
    }


def rest_path(kind: str, body: bytes, dtype: int) -> tuple[dict, bool] | str:
    """The arrays the REST path feeds the model, and whether it is columnar; or its error."""
    try:
        document = parse_json_object(convert(kind, body).encode())
        name = document.get("signature_name", "serving_default")
        inputs = {i: GraphTensor(f"{i}:0", dtype, None) for i in SIGNATURE_INPUTS[name]}
        signature = ServableSignature(name, "tensorflow/serving/predict", inputs, {})
        return parse_predict_request(document, signature)
    except (HttpError, ServingError, KeyError) as error:
        return str(error)


def assert_same_as_rest(kind: str, body: bytes, dtype: int = DT_FLOAT,
                        must_read: bool = True) -> None:  # fmt: skip
    read = read_text_request(kind, body, signatures(dtype))
    expected = rest_path(kind, body, dtype)
    if read is None:
        assert not must_read, (body[:200], expected)
        return
    if isinstance(read, Refusal):  # the REST path's refusal, word for word
        assert read.message == expected, body[:200]
        return
    assert not isinstance(expected, str), (body[:200], expected)
    arrays, columnar = expected
    assert read.columnar == columnar
    assert sorted(read.arrays) == sorted(arrays)
    for name, array in arrays.items():
        got = read.arrays[name]
        assert got.dtype == array.dtype and got.shape == array.shape, (name, body[:200])
        assert got.tobytes() == array.tobytes(), (name, body[:200])


READ = [
    (JSON, b'{"instances": [{"a": 1.0, "b": 2.0}, {"a": -0.0, "b": 4}]}'),
    (JSON, b'{"instances": [{"b": [1, 2], "a": 3}, {"b": [4, 5], "a": 6}]}'),
    (JSON, b'{"instances":[{"a":[[1],[2]],"b":[0.5]}]}'),
    (JSON, b'{"inputs": {"a": [1.0, 2.0], "b": [[3.0], [4.0]]}}'),
    (JSON, b'{"inputs": {"b": 2.5, "a": [1]}}'),
    (JSON, b'{"signature_name": "one", "instances": [[1.0, 2.0]]}'),
    (JSON, b'{"instances": [[1.0, 2.0]], "signature_name": "one"}'),
    (JSON, b'{ "signature_name" : "one" , "inputs" : {"x": [1]} }\n'),
    (JSON, b'{"inputs": {"a": [1], "b": [2]}, "signature_name": "serving_default"}'),
    (LINES, b'{"a": 1.5, "b": 2}\n{"a": 3, "b": -4e3}\n'),
    (LINES, b'{"a": [1, 2], "b": 2}\r\n{"a": [3, 4], "b": 5}'),
    (LINES, b'{"b": 1, "a": 2}'),
]


@pytest.mark.parametrize(("kind", "body"), READ)
def test_named_inputs_signatures_and_json_lines_are_read(kind: str, body: bytes) -> None:
    assert_same_as_rest(kind, body)
    integers = body.replace(b".5", b"").replace(b"-4e3", b"-4")
    assert_same_as_rest(kind, integers, DT_INT64, must_read=b"." not in integers)


LEFT = [
    (JSON, b'{"instances": [{"a": 1.0}, {"a": 2.0}]}'),  # an input missing: the REST error
    (JSON, b'{"instances": [{"a": 1.0, "b": 2.0}, {"b": 1.0, "a": 2.0}]}'),  # keys reordered
    (JSON, b'{"instances": [{"a": 1.0, "b": 2.0, "a": 3.0}]}'),
    (JSON, b'{"instances": [{"a": 1.0, "b": 2.0}, {"a": 3.0, "b": 4.0, "c": 5}]}'),
    (JSON, b'{"instances": [{"a": [1, "b": 2]}]}'),  # not JSON
    (JSON, b'{"instances": [{"a" : 1.0, "b": 2.0}]}'),  # a blank before the colon
    (JSON, b'{"instances": [{"a": "1", "b": 2.0}]}'),
    (JSON, b'{"inputs": {"a": [1.0], "b": [2.0]}, "inputs": {"a": [1.0], "b": [2.0]}}'),
    (JSON, b'{"inputs": {"a": [1.0]}}'),
    (JSON, b'{"inputs": {"a": [1.0], "b": [2.0], "c": [3.0]}}'),
    (JSON, b'{"instances": [1.0, 2.0]}'),  # a plain list for two inputs: the REST error
    (JSON, b'{"signature_name": "none", "instances": [[1.0]]}'),
    (JSON, b'{"signature_name": "one", "instances": [[1.0]], "signature_name": "one"}'),
    (JSON, b'{"signature_name": 1, "instances": [[1.0]]}'),
    (JSON, b'[{"a": 1, "b": 2}]'),  # conversion's one instance, a list: the REST error
    (JSON, b'{"a": 1, "b": 2}'),
    (JSON, '{"instances": [{"a": 1, "b": 2, "\u00e9": 3}]}'.encode()),
    (JSON, b'{"instances": [{"a": 1, "b": 2\x80}]}'),
    (LINES, b'{"a": 1, "b": 2}\n\n{"a": 3, "b": 4}'),  # a blank line
    (LINES, b'{"a": 1,\n"b": 2}\n{"a": 3, "b": 4}'),  # a record over two lines
    (LINES, b'{"a": 1, "b": 2} {"a": 3, "b": 4}'),
    (LINES, b"1\n2\n"),
]


@pytest.mark.parametrize(("kind", "body"), LEFT)
def test_other_bodies_are_left_to_the_rest_path(kind: str, body: bytes) -> None:
    assert read_text_request(kind, body, signatures(DT_FLOAT)) is None


def random_rows(rng: random.Random) -> tuple[str, list[dict]]:
    shapes = {name: [rng.randint(1, 3) for _ in range(rng.randint(0, 2))] for name in "ab"}
    rows = []
    for _ in range(rng.randint(1, 6)):
        row = {}
        for name in rng.sample("ab", 2):
            values = np.random.default_rng(rng.randint(0, 99)).normal(size=shapes[name])
            row[name] = np.round(values, 3).tolist()
        rows.append(row)
    order = list(rows[0])
    return rng.choice(["", " ", "\n"]), [{key: row[key] for key in order} for row in rows]


@pytest.mark.parametrize("seed", range(8))
def test_random_named_bodies_in_pieces(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows of blocks of random shapes, as rows, columns and JSON lines, read with tiny
    pieces so that cuts fall after every comma and line end."""
    rng = random.Random(seed)
    monkeypatch.setattr(text_json, "PARSE_BYTES", rng.randint(1, 9))
    for _ in range(10):
        space, rows = random_rows(rng)
        separators = ("," + space, ": ")
        body = json.dumps({"instances": rows}, separators=separators)
        assert_same_as_rest(JSON, body.encode())
        columns = {name: [row[name] for row in rows] for name in rows[0]}
        assert_same_as_rest(JSON, json.dumps({"inputs": columns}, separators=separators).encode())
        lines = "\n".join(json.dumps(row, separators=(",", ":")) for row in rows)
        assert_same_as_rest(LINES, lines.encode())


NON_FINITE = [  # read since issue 53's second part; the REST path's JSON reader takes them
    (JSON, b'{"signature_name": "one", "instances": [NaN, Infinity, -Infinity, 1.5]}'),
    (JSON, b'{"inputs": [[NaN, 1], [-Infinity, 2]], "signature_name": "one"}'),
    (JSON, b'{"inputs": {"a": [NaN, 1], "b": [Infinity, -0.0]}}'),
    (JSON, b'{"instances": [{"a": -Infinity, "b": NaN}, {"a": 2, "b": Infinity}]}'),
    (JSON, b'{"signature_name": "one", "instances": [[NaN], [Infinity]]}'),
    (LINES, b'{"a": NaN, "b": 1}\n{"a": -Infinity, "b": Infinity}\n'),
]


@pytest.mark.parametrize(("kind", "body"), NON_FINITE)
@pytest.mark.parametrize("dtype", [DT_FLOAT, tensors.tf_dtype(np.dtype(np.float64))])
def test_nan_and_infinities_are_read_for_float_inputs(kind: str, body: bytes, dtype: int) -> None:
    """Same arrays as the REST path, bit for bit (its NaN has no sign bit)."""
    assert_same_as_rest(kind, body, dtype)
    refused = read_text_request(kind, body, signatures(DT_INT64))  # the REST path's error
    assert isinstance(refused, Refusal) or refused is None  # None: two inputs refuse
    assert_same_as_rest(kind, body, DT_INT64, must_read=False)


NON_FINITE_LEFT = [  # spellings the REST path's reader refuses: its error, not ours
    b'{"instances": [-NaN, 1.0]}',
    b'{"instances": [Inf, 1.0]}',
    b'{"instances": [nan, 1.0]}',
    b'{"instances": [infinity, 1.0]}',
    b'{"instances": [--Infinity, 1.0]}',
    b'{"instances": [+Infinity, 1.0]}',
    b'{"instances": [NaNNaN, 1.0]}',
    b'{"instances": [1NaN, 1.0]}',
    b'{"instances": [Infinity1, 1.0]}',
    b'{"instances": [- Infinity, 1.0]}',
    b'{"instances": [tiny, 1.0]}',
]


@pytest.mark.parametrize("body", NON_FINITE_LEFT)
def test_other_non_finite_spellings_are_left_to_the_rest_path(body: bytes) -> None:
    assert read_text_request(JSON, body, signatures(DT_FLOAT)) is None
    assert isinstance(rest_path(JSON, body, DT_FLOAT), str)  # refused there too


@pytest.mark.parametrize("seed", range(4))
def test_non_finite_values_cut_in_pieces(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """NaN and the infinities among random values, read with tiny pieces so that a cut falls
    next to every word."""
    rng = random.Random(seed)
    monkeypatch.setattr(text_json, "PARSE_BYTES", rng.randint(1, 9))
    words = ["NaN", "Infinity", "-Infinity", "0.5", "-0.0", "3"]
    for _ in range(10):
        rows = [[rng.choice(words) for _ in range(3)] for _ in range(rng.randint(1, 5))]
        text = ", ".join("[" + ", ".join(row) + "]" for row in rows)
        assert_same_as_rest(JSON, f'{{"signature_name": "one", "instances": [{text}]}}'.encode())


DT_INT32 = tensors.tf_dtype(np.dtype(np.int32))
INTEGER_REFUSALS = [  # the REST path's 400, now given by the bounded path (issue 53)
    (JSON, b'{"signature_name": "one", "instances": [1, 2.0, 3]}'),
    (JSON, b'{"signature_name": "one", "instances": [[1, 2], [3, 4.5]]}'),
    (JSON, b'{"signature_name": "one", "inputs": [[1, -0.0]]}'),
    (JSON, b'{"signature_name": "one", "instances": [1, NaN, 2.5]}'),
    (JSON, b'{"signature_name": "one", "instances": [1, 12345678901234567890.0]}'),
    (JSON, b'{"signature_name": "one", "instances": [[1, 2147483648]]}'),  # int32's range
    (JSON, b'{"inputs": {"a": [1, 2], "b": [3.0, 4]}}'),
    (JSON, b'{"inputs": {"b": [1, 2], "a": [[3], [4e0]]}}'),
    (JSON, b'{"instances": [{"a": 1, "b": 2}, {"a": 1e2, "b": 2}]}'),
    (JSON, b'{"instances": [{"b": [1, 2], "a": 3}, {"b": [4, 5.5], "a": 6}]}'),
    (LINES, b'{"b": [1, 2], "a": [3, 4]}\n{"b": [5, 6], "a": [7, 8.5]}'),
    (LINES, b'{"a": 1, "b": Infinity}\n{"a": 2, "b": -Infinity}\n'),
]


@pytest.mark.parametrize(("kind", "body"), INTEGER_REFUSALS)
@pytest.mark.parametrize("dtype", [DT_INT32, DT_INT64])
def test_integer_inputs_given_other_numbers_are_refused_as_the_rest_path_does(
    kind: str, body: bytes, dtype: int
) -> None:
    """A point, an exponent, a NaN or an infinity, or a value beyond the dtype: the REST
    path's 400 and message, from the bounded reader (no longer the REST way)."""
    refused = read_text_request(kind, body, signatures(dtype))
    expected = rest_path(kind, body, dtype)
    if dtype == DT_INT64 and b"2147483648" in body:
        assert not isinstance(expected, str) and refused is not None  # read: within int64
        return
    assert isinstance(refused, Refusal), (body, expected)
    assert refused.message == expected


def test_two_refusing_inputs_are_left_to_the_rest_path() -> None:
    """Which input the REST path reads first is its signature map's order: not guessed."""
    body = b'{"inputs": {"a": [1.5], "b": [2.5]}}'
    assert read_text_request(JSON, body, signatures(DT_INT64)) is None
    assert isinstance(rest_path(JSON, body, DT_INT64), str)


def listed(texts: list[str]) -> str:
    return "[" + ", ".join(texts) + "]"


@pytest.mark.parametrize("seed", range(6))
def test_random_integer_refusals_in_pieces(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Integer bodies of every form with a few other numbers at random places, read with
    tiny pieces: the REST path's message for the first of them, or the REST way."""
    rng = random.Random(seed)
    monkeypatch.setattr(text_json, "PARSE_BYTES", rng.randint(1, 9))
    others = ["1.0", "-0.0", "2e3", "NaN", "Infinity", "3000000000", "7.5"]
    for _ in range(15):
        rows = rng.randint(1, 5)
        words = {name: [[str(rng.randint(-9, 9)) for _ in range(2)] for _ in range(rows)]
                 for name in "ab"}  # fmt: skip
        bad = rng.choice("ab")
        for _ in range(rng.randint(1, 2)):
            words[bad][rng.randrange(rows)][rng.randrange(2)] = rng.choice(others)
        lists = {name: [listed(row) for row in words[name]] for name in "ab"}
        row_texts = [f'{{"a": {a}, "b": {b}}}' for a, b in zip(lists["a"], lists["b"], strict=True)]
        columns = {name: listed(lists[name]) for name in "ab"}
        bodies = [
            (JSON, f'{{"instances": {listed(row_texts)}}}'.encode()),
            (JSON, f'{{"inputs": {{"b": {columns["b"]}, "a": {columns["a"]}}}}}'.encode()),
            (LINES, "\n".join(row_texts).encode()),
            (JSON, f'{{"signature_name": "one", "instances": {columns[bad]}}}'.encode()),
        ]
        for kind, body in bodies:
            for dtype in (DT_INT32, DT_INT64):
                refused = read_text_request(kind, body, signatures(dtype))
                assert refused is not None or dtype == DT_INT64, body  # 3000000000 alone
                assert_same_as_rest(kind, body, dtype, must_read=False)


DT_DOUBLE, DT_INT32, DT_BOOL, DT_HALF = (
    tensors.tf_dtype(np.dtype(dtype)) for dtype in (np.float64, np.int32, np.bool_, np.float16)
)
WRONG_TYPES = [  # refused by the REST path; read since issue 53's one-implementation part
    (JSON, b'{"instances": [{"a": 1, "b": null}, {"a": 2, "b": 3}]}'),
    (JSON, b'{"instances": [{"a": [1, 2], "b": 3}, {"a": [4, null], "b": 5}]}'),
    (JSON, b'{"inputs": {"a": [1, null], "b": [3, 4]}}'),
    (JSON, b'{"inputs": {"a": [null], "b": 2}}'),
    (JSON, b'{"signature_name": "one", "instances": [[1, 2], [null, 4]]}'),
    (JSON, b'{"signature_name": "one", "inputs": [1, 2, null]}'),
    (JSON, b'{"signature_name": "one", "instances": [true, 1]}'),
    (JSON, b'{"signature_name": "one", "inputs": [[false], [1]]}'),
    (JSON, b'{"signature_name": "one", "instances": [1, 2.5, null]}'),  # first: 2.5 or null
    (JSON, b'{"signature_name": "one", "instances": [NaN, null]}'),
    (LINES, b'{"a": 1, "b": 2}\n{"a": null, "b": 4}\n'),
    (LINES, b'{"a": 1, "b": true}\n'),
]


BOOL_WRONG_TYPES = [  # to bool inputs
    (JSON, b'{"instances": [{"a": true, "b": null}, {"a": false, "b": true}]}'),
    (JSON, b'{"inputs": {"a": [true, 1], "b": [false, true]}}'),
    (JSON, b'{"signature_name": "one", "instances": [[true, false], [0, true]]}'),
    (LINES, b'{"a": true, "b": false}\n{"a": 1.5, "b": true}\n'),
]
TYPED_WRONG = [
    *((kind, body, dtype) for kind, body in WRONG_TYPES
      for dtype in (DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64, DT_HALF)),
    *((kind, body, DT_BOOL) for kind, body in BOOL_WRONG_TYPES),
]  # fmt: skip


@pytest.mark.parametrize(("kind", "body", "dtype"), TYPED_WRONG)
def test_null_and_words_refused_as_the_rest_path_refuses_them(
    kind: str, body: bytes, dtype: int
) -> None:
    """``null`` for any input, ``true``/``false`` for one that is not bool, a number for a
    bool input: the REST path's 400, word for word, never the REST way (issue 53)."""
    read = read_text_request(kind, body, signatures(dtype))
    assert isinstance(read, Refusal), (body, read)
    assert_same_as_rest(kind, body, dtype)


@pytest.mark.parametrize(
    "body",
    [b'{"inputs": {"a": [null], "b": [null]}}',  # two inputs refuse: the REST path's order
     b'{"instances": [{"a": 1, "b": null}, {"a": [2], "b": 3}]}',  # ragged too
     b'{"signature_name": "one", "instances": [nul]}',
     b'{"signature_name": "one", "instances": [-null]}'],
)  # fmt: skip
def test_null_left_to_the_rest_path_where_its_order_decides(body: bytes) -> None:
    assert read_text_request(JSON, body, signatures(DT_FLOAT)) is None
    assert isinstance(rest_path(JSON, body, DT_FLOAT), str)


@pytest.mark.parametrize("seed", range(4))
def test_random_nulls_in_pieces(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Float bodies with a null at a random place, read with tiny pieces: the REST path's
    message for it."""
    rng = random.Random(seed)
    monkeypatch.setattr(text_json, "PARSE_BYTES", rng.randint(1, 9))
    for _ in range(15):
        values = [[str(rng.randint(-9, 9)) + ".5" for _ in range(3)] for _ in range(4)]
        values[rng.randrange(4)][rng.randrange(3)] = "null"
        rows = listed([listed(row) for row in values])
        for body in (f'{{"signature_name": "one", "instances": {rows}}}',
                     f'{{"signature_name": "one", "inputs": {rows}}}'):  # fmt: skip
            assert isinstance(read_text_request(JSON, body.encode(), signatures(DT_FLOAT)),
                              Refusal)  # fmt: skip
            assert_same_as_rest(JSON, body.encode(), DT_FLOAT)


EMPTY_LISTS = [
    (JSON, b'{"signature_name": "one", "inputs": []}'),
    (JSON, b'{"signature_name": "one", "inputs": [[], []]}'),
    (JSON, b'{"signature_name": "one", "instances": [[], [], []]}'),
    (JSON, b'{"signature_name": "one", "instances": [[[]], [[]]]}'),
    (JSON, b'{"inputs": [[[], []]], "signature_name": "one"}'),
]


@pytest.mark.parametrize(("kind", "body"), EMPTY_LISTS)
@pytest.mark.parametrize("dtype", [DT_FLOAT, DT_INT64, DT_BOOL])
def test_empty_lists_are_read(kind: str, body: bytes, dtype: int) -> None:
    """Empty lists give the one input an empty array, as on the REST path (issue 53)."""
    assert isinstance(read_text_request(kind, body, signatures(dtype)), TextRequest)
    assert_same_as_rest(kind, body, dtype)


@pytest.mark.parametrize(
    "body",
    [b'{"signature_name": "one", "instances": []}',  # the REST path's error, with its text
     b'{"signature_name": "one", "instances": [[], [1]]}',  # ragged
     b'{"signature_name": "one", "instances": [[], [[]]]}',
     b'{"inputs": {"a": [], "b": []}}'],  # named inputs
)  # fmt: skip
def test_other_empty_lists_left_to_the_rest_path(body: bytes) -> None:
    read = read_text_request(JSON, body, signatures(DT_FLOAT))
    assert not isinstance(read, TextRequest)
    assert_same_as_rest(JSON, body, DT_FLOAT, must_read=False)


RAGGED_NAMED = [  # refused by the service since issue 53's one-implementation part
    (JSON, b'{"instances": [{"a": [1, 2], "b": 2.0}, {"a": [3], "b": 4.0}]}'),
    (JSON, b'{"instances": [{"a": [1, 2], "b": 1}, {"a": [1], "b": 2}]}'),
    (JSON, b'{"instances": [{"a": 1, "b": 1}, {"a": [1], "b": 2}]}'),
    (JSON, b'{"instances": [{"a": [[1, 2], [3]], "b": 1}]}'),
    (JSON, b'{"inputs": {"a": [[1, 2], [3]], "b": [1]}}'),
    (JSON, b'{"inputs": {"b": [1, 2], "a": [[1], 2]}}'),
    (LINES, b'{"a": [1, 2], "b": 1}\n{"a": [1, 2, 3], "b": 2}\n'),
    (JSON, b'{"signature_name": "one", "instances": [{"x": [1]}, {"x": [[2]]}]}'),
]


@pytest.mark.parametrize(("kind", "body"), RAGGED_NAMED)
def test_ragged_named_inputs_refused_as_the_rest_path_refuses_them(kind: str, body: bytes) -> None:
    assert isinstance(read_text_request(kind, body, signatures(DT_FLOAT)), Refusal)
    assert_same_as_rest(kind, body, DT_FLOAT)


def random_value(rng: random.Random, shape: list[int], ragged: bool) -> str:
    """A nested list of ``shape`` (a number for ``[]``), one of its lists cut short or a
    number made a list when ``ragged``."""
    if not shape:
        return f"[{rng.randint(0, 9)}]" if ragged else str(rng.randint(0, 9))
    bad = rng.randrange(shape[0]) if ragged else -1
    items = [random_value(rng, shape[1:], index == bad) for index in range(shape[0])]
    if ragged and rng.random() < 0.3 and len(items) > 1:
        items.pop()
    return listed(items)


@pytest.mark.parametrize("seed", range(6))
def test_random_ragged_named_inputs(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Named inputs in rows, columns and JSON lines, one or both of them ragged somewhere,
    read with tiny pieces: the REST path's message, or the REST way (both ragged)."""
    rng = random.Random(seed)
    monkeypatch.setattr(text_json, "PARSE_BYTES", rng.randint(1, 9))
    refused = 0
    for _ in range(20):
        shapes = {name: [rng.randint(1, 3) for _ in range(rng.randint(0, 2))] for name in "ab"}
        rows = rng.randint(1, 4)
        bad = {name: rng.random() < 0.6 for name in "ab"}
        bad_row = rng.randrange(rows)
        values = {name: [random_value(rng, shapes[name], bad[name] and row == bad_row)
                         for row in range(rows)] for name in "ab"}  # fmt: skip
        row_texts = [f'{{"a": {a}, "b": {b}}}' for a, b in zip(values["a"], values["b"],
                                                               strict=True)]  # fmt: skip
        columns = {name: listed(values[name]) for name in "ab"}
        bodies = [
            (JSON, f'{{"instances": {listed(row_texts)}}}'.encode()),
            (JSON, f'{{"inputs": {{"b": {columns["b"]}, "a": {columns["a"]}}}}}'.encode()),
            (LINES, "\n".join(row_texts).encode()),
        ]
        for kind, body in bodies:
            read = read_text_request(kind, body, signatures(DT_FLOAT))
            refused += isinstance(read, Refusal)
            assert_same_as_rest(kind, body, DT_FLOAT, must_read=False)
    assert refused > 5


def assert_mixed_same_as_rest(kind: str, body: bytes, dtypes: dict[str, int]) -> bool:
    """The arrays read for inputs of ``dtypes`` (by name) equal the REST path's, or the body
    is left to it; whether it was read."""
    ours = {"serving_default": Signature("serving_default", "",
                                         {n: TensorSpec(n, d, None) for n, d in dtypes.items()},
                                         {})}  # fmt: skip
    read = read_text_request(kind, body, ours)
    inputs = {name: GraphTensor(f"{name}:0", dtype, None) for name, dtype in dtypes.items()}
    theirs = ServableSignature("serving_default", "tensorflow/serving/predict", inputs, {})
    try:
        expected = parse_predict_request(parse_json_object(convert(kind, body).encode()), theirs)
    except (HttpError, ServingError) as error:
        assert not isinstance(read, TextRequest), (body, str(error))
        assert not isinstance(read, Refusal) or read.message == str(error), body
        return False
    if read is None:
        return False
    assert isinstance(read, TextRequest), (body, read)
    arrays, columnar = expected
    assert read.columnar == columnar and sorted(read.arrays) == sorted(arrays)
    for name, array in arrays.items():
        got = read.arrays[name]
        assert got.dtype == array.dtype and got.shape == array.shape, (name, body)
        assert got.tobytes() == array.tobytes(), (name, body)
    return True


MIXED = [  # read since issue 53's one-implementation part (the REST way before)
    (JSON, b'{"inputs": {"a": [1.5, -0.0], "b": [2, 2147483647]}}'),
    (JSON, b'{"instances": [{"a": 1.5, "b": 2}, {"a": NaN, "b": -3}]}'),
    (JSON, b'{"instances": [{"b": [1, 2], "a": [[0.1], [2]]}, {"b": [3, 4], "a": [[5], [6]]}]}'),
    (LINES, b'{"a": 1e-3, "b": 7}\n{"a": 2, "b": 8}\n'),
]


@pytest.mark.parametrize(("kind", "body"), MIXED)
@pytest.mark.parametrize("dtypes", [(DT_FLOAT, DT_INT64), (DT_DOUBLE, DT_INT32),
                                    (DT_HALF, DT_INT64)])  # fmt: skip
def test_inputs_of_mixed_dtypes_are_read(kind: str, body: bytes, dtypes: tuple[int, int]) -> None:
    assert assert_mixed_same_as_rest(kind, body, dict(zip("ab", dtypes, strict=True)))


@pytest.mark.parametrize(
    "body",
    [b'{"inputs": {"a": [1.5], "b": [2.5]}}',  # the int input given a fraction: the REST way
     b'{"inputs": {"a": [null], "b": [2]}}', b'{"inputs": {"a": [1.5], "b": [true]}}',
     b'{"inputs": {"a": [1.5], "b": [3000000000]}}',
     b'{"instances": [{"a": 1, "b": [2]}, {"a": 1, "b": 3}]}'],
)  # fmt: skip
def test_mixed_dtypes_refused_as_the_rest_path_refuses_them(body: bytes) -> None:
    """A value one input does not take: the REST path's 400 (a ragged one: the REST way)."""
    assert not assert_mixed_same_as_rest(JSON, body, {"a": DT_FLOAT, "b": DT_INT32})
    inputs = {"a": TensorSpec("a", DT_FLOAT, None), "b": TensorSpec("b", DT_INT32, None)}
    read = read_text_request(JSON, body, {"serving_default": Signature("serving_default", "",
                                                                       inputs, {})})  # fmt: skip
    assert isinstance(read, Refusal) == (b"[2]}," not in body)  # the ragged one: None


@pytest.mark.parametrize("seed", range(4))
def test_random_mixed_dtypes_refused(seed: int) -> None:
    """A float and an int32 input in rows, one value made null, a fraction or too large for
    one of them: the REST path's message."""
    rng = random.Random(seed)
    dtypes = {"a": DT_FLOAT, "b": DT_INT32}
    for _ in range(20):
        rows = [[f"{rng.randint(0, 9)}.5", str(rng.randint(-9, 9))] for _ in range(4)]
        row, column = rng.randrange(4), rng.randrange(2)
        rows[row][column] = rng.choice(["null", "true"] + ["2.5", "3000000000"] * column)
        records = [f'{{"a": {a}, "b": {b}}}' for a, b in rows]
        for kind, body in [(JSON, f'{{"instances": {listed(records)}}}'),
                           (LINES, "\n".join(records))]:  # fmt: skip
            assert not assert_mixed_same_as_rest(kind, body.encode(), dtypes)
            signature = Signature(
                "serving_default", "", {n: TensorSpec(n, d, None) for n, d in dtypes.items()}, {}
            )
            read = read_text_request(kind, body.encode(), {"serving_default": signature})
            assert isinstance(read, Refusal), body


@pytest.mark.parametrize("seed", range(6))
def test_random_mixed_dtypes_in_pieces(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows, columns and JSON lines for a float, an integer and a bool input, read with tiny
    pieces: the REST path's arrays."""
    rng = random.Random(seed)
    monkeypatch.setattr(text_json, "PARSE_BYTES", rng.randint(1, 9))
    dtypes = {"a": rng.choice([DT_FLOAT, DT_DOUBLE, DT_HALF]), "b": rng.choice([DT_INT32,
              DT_INT64]), "c": DT_BOOL}  # fmt: skip
    words = {
        "a": lambda: rng.choice(["1.5", "-0.0", "2e-3", "NaN", "7"]),
        "b": lambda: str(rng.randint(-9, 99)),
        "c": lambda: rng.choice(["true", "false"]),
    }
    for _ in range(10):
        shapes = {name: [rng.randint(1, 3) for _ in range(rng.randint(0, 2))] for name in "abc"}
        rows = rng.randint(1, 4)
        values = {name: [nested(shapes[name], words[name]) for _ in range(rows)] for name in "abc"}
        row_texts = [", ".join(f'"{n}": {values[n][row]}' for n in "cab") for row in range(rows)]
        records = [f"{{{text}}}" for text in row_texts]
        columns = ", ".join(f'"{n}": {listed(values[n])}' for n in "bca")
        for kind, body in [
            (JSON, f'{{"instances": {listed(records)}}}'),
            (JSON, f'{{"inputs": {{{columns}}}}}'),
            (LINES, "\n".join(records)),
        ]:
            assert assert_mixed_same_as_rest(kind, body.encode(), dtypes), body  # fmt: skip


def nested(shape: list[int], word: Any) -> str:
    if not shape:
        return str(word())
    return listed([nested(shape[1:], word) for _ in range(shape[0])])


DT_UINT64 = tensors.tf_dtype(np.dtype(np.uint64))


@pytest.mark.parametrize(
    ("body", "read"),
    [(b'{"signature_name": "one", "instances": [0, 18446744073709551615, 9223372036854775808]}',
      TextRequest),
     (b'{"inputs": {"a": [[1, 2]], "b": [18446744073709551615]}}', TextRequest),
     (b'{"instances": [{"a": 1, "b": 2}, {"a": 3, "b": -4}]}', Refusal),
     (b'{"signature_name": "one", "inputs": [1, 2.5]}', Refusal),
     (b'{"signature_name": "one", "inputs": [18446744073709551616]}', Refusal),
     (b'{"signature_name": "one", "inputs": [7, null]}', Refusal)],
)  # fmt: skip
def test_uint64_inputs(body: bytes, read: type) -> None:
    """uint64 inputs: read, or refused, as the REST path reads them (the REST way before)."""
    assert isinstance(read_text_request(JSON, body, signatures(DT_UINT64)), read)
    assert_same_as_rest(JSON, body, DT_UINT64)


PLAIN_LIST_FLAWS = [", ,", " 1 2", ",[1]", "]", "[", " - 1"]  # wrong wherever they go


@pytest.mark.parametrize("seed", range(6))
def test_plain_lists_read_in_one_pass_in_pieces(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A list of numbers is read in one pass, its flat pieces' skeleton kept as counts
    (issue 53's speed): cut into tiny pieces, with blanks, the arrays are the REST path's;
    with a flaw anywhere (two commas, two numbers, a list, a bracket), both refuse it."""
    rng = random.Random(seed)
    monkeypatch.setattr(text_json, "PARSE_BYTES", rng.randint(1, 12))
    for _ in range(12):
        values = np.round(
            np.random.default_rng(rng.randint(0, 99)).normal(size=rng.randint(1, 60)), 4
        )
        texts = [rng.choice(["", " ", "\n"]) + repr(value) for value in values.tolist()]
        if rng.random() < 0.3:
            texts[rng.randrange(len(texts))] = rng.choice(["NaN", "-0", "7", "1e3"])
        inside = ",".join(texts)
        for wrapped in (b'{"signature_name": "one", "instances": [%s]}', b'{"inputs": [%s], '
                        b'"signature_name": "one"}'):  # fmt: skip
            assert_same_as_rest(JSON, wrapped % inside.encode())
            at = rng.randrange(len(inside) + 1)
            flawed = inside[:at] + rng.choice(PLAIN_LIST_FLAWS) + inside[at:]
            read = read_text_request(JSON, wrapped % flawed.encode(), signatures(DT_FLOAT))
            assert read is None or isinstance(read, Refusal), flawed
            assert isinstance(rest_path(JSON, wrapped % flawed.encode(), DT_FLOAT), str), flawed
