"""examples_windows: classify/regress bodies read a window of examples at a time, to the same
examples, answers and errors as the general way (the whole document, then Example protos),
in bounded memory (issue 53)."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from memory_traces import traced_peak
from one_servable import OneServable
from sagemaker_tfs.model_server.errors import invalid_argument
from sagemaker_tfs.model_server.rest import api as api_module
from sagemaker_tfs.model_server.rest import examples_windows
from sagemaker_tfs.model_server.rest.api import RestApi
from sagemaker_tfs.model_server.rest.examples_json import example_bytes, float_examples
from sagemaker_tfs.model_server.rest.examples_windows import read_document, read_examples
from sagemaker_tfs.model_server.rest.json_reader import parse_json_object
from sagemaker_tfs.model_server.serving.classify_regress import (
    Classified,
    Examples,
    serialized_examples,
)
from tensorflow.core.example import example_pb2

ROWS = ", ".join(f'{{"x": {i / 7:.3f}, "n": [{i}, -{i}], "s": "w{i}"}}' for i in range(40))
FLOATS = ", ".join(f'{{"x": {i / 7 - 2:.3f}, "y": {i}.5}}' for i in range(60))

VALID = [
    b'{"examples": [{"x": 1.5}, {"x": 2.0}]}',
    b'{"examples": [' + ROWS.encode() + b"]}",
    b'{"examples": [' + FLOATS.encode() + b"]}",  # the floats read a window at once
    b'{"examples": [' + FLOATS.encode() + b", " + ROWS.encode() + b"]}",
    b'{"signature_name": "s", "context": {"c": "ctx", "k": [1, 2]}, "examples": [{"x": 1}]}',
    b'{"examples": [{"x": 1}, {"x": 0}], "context": {"c": 0.5}, "signature_name": "s"}',
    b'{"context": {"x": 4.0}, "examples": [{}, {}]}',
    b'{"examples": [{}, {"e": []}, {"s": ""}, {"z": 0}, {"f": 0.0}, {"m": [1, 2.5, -0.0]}]}',
    b'{"examples": [{"s": [{"b64": "AAE="}, {"b64": "_-8"}], "t": {"b64": "YQ"}}, {"u": "x"}]}',
    b'{"examples": [{"s": "a}, {b"}, {"s": "]"}, {"s": "\\"}, {"}]}',
    '{"examples": [{"s": "h\\u00e9llo \u65e5\\n\\t"}, {"\u00e9": 1}]}'.encode(),
    b'{"examples": [{"n": [9223372036854775807, -9223372036854775808, 300]}]}',
    b'{"examples": [{"f": [1e39, -1e300, 1e-50, 123456789012]}, {"g": 18446744073709551616}]}',
    b' \n{ "examples" :\n[ {"x":1.5} ,\n\t{"x":2.5}\r\n] }\n trailing bytes',
    b'{"examples": [{"x": 1.5}], "context": {"c": NaN}}',
    b'{"examples": [{"x": 1.5}], "unknown": {"a": [1, {"b": 2}]}}',
    b'{"examples": []}',
    b'{"examples": [], "context": {"c": 1}}',
]

OTHERS = [  # errors, and bodies the windows leave to the general way
    b"",
    b"[]",
    b'{"examples": {"x": 1}}',
    b'{"context": {"c": 1}}',
    b'{"examples": [{"x": 1.5}, ]}',
    b'{"examples": [{"x": 1.5} {"x": 2}]}',
    b'{"examples": [{"x": 1.5}, {"x": 2}',
    b'{"examples": [{"x": 1.5}]',
    b'{"examples": [{"x": 1.5}], "context": {"c": 1}',
    b'{"examples": [{"x": 1.5}], "context": "c"}',
    b'{"examples": [{"x": 1.5}], "context": {"c": true}}',
    b'{"examples": [{"x": 1.5}], "context": {"c": {"d": 1}}, "signature_name": 3}',
    b'{"signature_name": 3, "examples": [{"x": true}]}',
    b'{"examples": [1, 2]}',
    b'{"examples": [{"x": 1.5}, null, {"x": [true]}]}',
    b'{"examples": [{"x": 1.5}, {"x": [1, "a"]}, 7]}',
    b'{"examples": [{"x": {"y": 1}}]}',
    b'{"examples": [{"x": [[1]]}]}',
    b'{"examples": [{"x": {"b64": "A"}}]}',
    b'{"examples": [{"x": 1}, {"x": NaN}]}',
    b'{"examples": [{"x": 1}], "examples": [{"y": 2}]}',
    b'{"ex\\u0061mples": [{"x": 1}], "examples": [{"y": 2}]}',
    b'{"examples": [{"x": "\\ud800"}]}',
    b'{"examples": [{"x": "\xff"}]}',
    b'{"examples": [{"x": 1}, {"x": 2}]} , {"examples": 1}',
    b'{"examples": [' + ROWS.encode() + b', {"x": false}, ' + FLOATS.encode() + b"]}",
    b'{"examples": [' + FLOATS.encode() + b", {" + b"]}",
    b'{"examples": [{"x": [1, true]}, {"n": 9223372036854775808}]}',
    b'{"examples": [{"x": NaN, "y": [Infinity, -Infinity]}], "context": {"c": "z"}}',
    b'{"examples": [{"x": NaN}, {}, {"e": []}, {"n": -9223372036854775808}]}',
    b'{"examples": [{"x": 1.0}, {"x": NaN}], "context": 5}',
    b'{"examples": [{"x": NaN}], "context": {"x": [true]}}',
]

OUT_OF_INT64 = b'{"examples": [{"n": [1, 9223372036854775808]}]}'
B64_NOT_TEXT = b'{"examples": [{"b": [{"b64": "AA=="}, {"b64": 5}]}, {"x": NaN}]}'
CORPUS = VALID + OTHERS + [OUT_OF_INT64, B64_NOT_TEXT]


class ExamplesServable:
    """Classify and regress as a model that answers from the examples' parsed features:
    the answers differ when the examples do."""

    batched = False

    def __init__(self) -> None:
        self.seen: list[list[example_pb2.Example]] = []

    def _read(self, request_input: Examples) -> list[example_pb2.Example]:
        examples = [example_pb2.Example.FromString(e) for e in serialized_examples(request_input)]
        self.seen.append(examples)
        return examples

    def regress_values(self, name: str, request_input: Examples) -> np.ndarray:
        if name not in ("", "s"):
            raise invalid_argument(f"No signature {name}")
        sizes = [len(e.SerializeToString(deterministic=True)) for e in self._read(request_input)]
        return np.array(sizes, dtype=np.float32)

    def classify_arrays(self, name: str, request_input: Examples) -> Classified:
        names = [sorted(e.features.feature)[:2] for e in self._read(request_input)]
        classes = np.array([(row + ["", ""])[:2] for row in names], dtype=object)
        scores = np.vectorize(len, otypes=[np.float32])(classes).reshape(-1, 2)
        return Classified(classes, scores)


def outcomes(bodies: list[bytes], verb: str) -> tuple[list[Any], list[Any]]:
    """Each body's (status, answer), or the exception it raised; and what the model saw."""
    servable = ExamplesServable()
    api = RestApi(OneServable(servable))  # type: ignore[arg-type]
    found: list[Any] = []
    for body in bodies:
        try:
            status, answer = api.handle("POST", f"/v1/models/m:{verb}", body)
            found.append((status, bytes(answer)))
        except Exception as error:  # noqa: BLE001 - the general way's own (a ValueError)
            found.append(repr(error))
    return found, servable.seen


@pytest.mark.parametrize("window", [16, 1 << 18])
@pytest.mark.parametrize("verb", ["regress", "classify"])
def test_answers_and_errors_are_those_of_the_general_way(
    verb: str, window: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(examples_windows, "WINDOW_BYTES", window)
    taken, seen = outcomes(CORPUS, verb)
    monkeypatch.setattr(api_module, "read_examples", lambda body: None)
    assert (taken, seen) == outcomes(CORPUS, verb)
    assert [answer[0] for answer in taken[: len(VALID) - 2]] == [200] * (len(VALID) - 2)


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (OUT_OF_INT64, "Feature: n has 9223372036854775808, outside int64"),
        (B64_NOT_TEXT, "Feature: b has values of unsupported or mixed types"),
    ],
)
def test_values_protobuf_refused_are_a_400_not_a_500(body: bytes, words: str) -> None:
    """Both were protobuf's own exceptions, answered 500 INTERNAL: bad input is a 400."""
    (status, answer), *_ = outcomes([body], "regress")[0]
    assert status == 400 and words in json.loads(answer)["error"], answer


@pytest.mark.parametrize("body", VALID)
def test_valid_bodies_are_read_by_windows(body: bytes) -> None:
    assert read_examples(body) is not None


NUL_ENDED = [  # rows that end in a NUL byte: an object array
    b'{"context": {"c\\u0000": 1}, "examples": [{}, {"x": 1.5}]}',
    b'{"examples": [{"a\\u0000": "b"}, {"x": NaN}]}',
]


@pytest.mark.parametrize("body", VALID + NUL_ENDED + [b'{"examples": [{"x": NaN}, {"y": 1}]}'])
def test_the_general_way_feeds_the_examples_as_the_windows_do(body: bytes) -> None:
    """A body the windows leave (NaN) is fed as one array of serialized examples too, no
    Input proto; a few examples are cut in Python, to the same array NumPy makes."""
    read = read_examples(body) or read_document(parse_json_object(body))
    examples = read.serialized()
    assert isinstance(examples, np.ndarray)
    if examples.size:
        assert examples.dtype.kind == "S" or any(row.endswith(b"\x00") for row in examples)
    read = read_examples(body) or read_document(parse_json_object(body))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(examples_windows, "_FEW_ROWS", 0)
        by_numpy = read.serialized()
    assert by_numpy.dtype == examples.dtype and by_numpy.tolist() == examples.tolist()


def test_a_window_of_floats_is_serialized_as_one_at_a_time() -> None:
    examples = [{"x": 0.1 * i, "long" * 40: -float(i), "z": 1e39} for i in range(50)]
    table = float_examples(examples)
    assert table is not None
    assert [row.tobytes() for row in table] == [example_bytes(e) for e in examples]
    assert float_examples([{"x": 1.0}, {"x": 1}]) is None
    assert float_examples([{"x": 1.0}, {"y": 1.0}]) is None


def regress_body(size: int, features: str) -> bytes:
    rng = np.random.default_rng(5)
    count = size // len(features.format(value=0.5, index=50_000))
    values = rng.uniform(-1, 1, count)
    rows = ", ".join(features.format(value=value, index=i) for i, value in enumerate(values))
    return b'{"signature_name": "s", "examples": [' + rows.encode() + b"]}"


class CountingServable:
    """Regress answering one value per example, reading nothing else."""

    batched = False

    def regress_values(self, name: str, request_input: Examples) -> np.ndarray:
        return np.full(1, len(serialized_examples(request_input)), dtype=np.float32)


@pytest.mark.parametrize(
    "features", ['{{"x": {value:.3f}}}', '{{"x": {value:.3f}, "w": "word", "n": [{index}, 2]}}']
)
def test_a_large_body_is_read_in_bounded_memory(features: str) -> None:
    """4 MB of examples (one float each: read a window at once; three features: one at a
    time): the reader holds a window's objects, the serialized examples (1.2x the body for
    one-float examples), their lengths (4 bytes each) and then their ``S`` array (1.2x).
    The general way held the document (a dict per example): 27x and 20x the body."""
    body = regress_body(4 << 20, features)
    api = RestApi(OneServable(CountingServable()))  # type: ignore[arg-type]
    (status, answer), peak = traced_peak(lambda: api.handle("POST", "/v1/models/m:regress", body))
    assert status == 200, bytes(answer)
    assert peak < 3.5 * len(body), f"traced peak {peak / len(body):.1f}x the body"


def test_a_large_body_with_a_bad_example_is_refused_in_bounded_memory(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An example's error is raised once the rest has parsed, without the whole document:
    the general way's error (and status) at the windows' memory."""
    body = regress_body(4 << 20, '{{"x": {value:.3f}}}')
    body = body[: -len(b"]}")] + b', {"x": [1, true]}, 3]}'
    api = RestApi(OneServable(CountingServable()))  # type: ignore[arg-type]
    (status, answer), peak = traced_peak(lambda: api.handle("POST", "/v1/models/m:regress", body))
    assert (status, bytes(answer)) == (
        400,
        b'{\n    "error": "JSON Value: [1, true] Feature: x has values of unsupported or mixed '
        b'types"\n}',
    )
    assert peak < 3.5 * len(body), f"traced peak {peak / len(body):.1f}x the body"
    monkeypatch.setattr(api_module, "read_examples", lambda body: None)
    assert api.handle("POST", "/v1/models/m:regress", body) == (status, answer)


@pytest.mark.parametrize("window", [64, 1024])
def test_examples_holding_lists_of_objects_are_cut_between_examples(
    window: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``}, {`` inside an example (ten b64 objects each) is not taken for the one between
    two: the cuts before an object that opens as the first example does are tried first
    (the last ``}, {`` of a window alone ran out of tries on these and left the body to the
    general way)."""
    monkeypatch.setattr(examples_windows, "WINDOW_BYTES", window)
    example = '{"s": [' + ", ".join(['{"b64": "AAE="}'] * 10) + '], "x": 1.5}'
    body = ('{"examples": [' + ", ".join([example] * 200) + "]}").encode()
    read = read_examples(body)
    assert read is not None
    assert len(read.serialized()) == 200
