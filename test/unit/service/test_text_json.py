"""The bounded reader takes named inputs, several inputs, ``signature_name`` and JSON lines
(issue 53), reading exactly what the REST path reads.

The REST path here is the real one, in process (as in test_text_tensors.py): ``conversion
.convert``, then the model server's JSON reader and Predict's request reader, for a model
with two signatures: ``serving_default`` (inputs ``a`` and ``b``) and ``one`` (input ``x``).
"""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from sagemaker_tfs.model_server.errors import ServingError
from sagemaker_tfs.model_server.rest.json_reader import parse_json_object
from sagemaker_tfs.model_server.rest.predict_json import parse_predict_request
from sagemaker_tfs.model_server.serving.signatures import GraphTensor, ServableSignature
from sagemaker_tfs.service import text_json
from sagemaker_tfs.service.conversion import convert
from sagemaker_tfs.service.text_refusals import Refusal
from sagemaker_tfs.service.text_tensors import read_text_request
from sagemaker_tfs.wire import tensors
from sagemaker_tfs.wire.errors import HttpError
from sagemaker_tfs.wire.signatures import Signature, TensorSpec

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
    (JSON, b'{"instances": [{"a": [1, 2], "b": 2.0}, {"a": [3], "b": 4.0}]}'),  # ragged
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
