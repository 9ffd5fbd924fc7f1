"""Bodies that go the REST way (strings, ``{"b64": ...}``, classify and regress, models whose
signatures cannot be asked for), read without a Python object per value of the whole body
(issue 53): ``text_verbatim`` posts a large JSON body as it is, or wrapped, after checking it
a piece at a time; a large CSV body is converted a piece of whole lines at a time
(``text_rest.convert_csv_pieces``).

Two things are held here. The REST request is the one ``text_rest.convert`` writes, byte for
byte, for every body ``text_verbatim`` answers (and every body it does not answer is left to
``convert``, errors included), and for every CSV body converted in pieces: on the njs parity
corpus, its fuzzed bodies and cases of this file, with windows and pieces of a few bytes so
that every member is "large". And the traced peak of reading a large body of strings, b64
objects or classify examples stays a fraction of the body; a CSV or JSON lines body's, the
request it is written into (before: 7-24x, a Python object per value).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator

import numpy as np
import pytest
from conversion_cases import CASES
from memory_traces import traced_peak
from njs_corpus import fuzzed_bodies, shape_bodies
from sagemaker_tfs.service.codecs import text_codecs
from sagemaker_tfs.service.codecs.content_types import JSON_LINES_TYPES, JSONLINES
from sagemaker_tfs.service.codecs.text import text_rest, text_scan, text_verbatim
from sagemaker_tfs.service.codecs.text.text_rest import convert
from sagemaker_tfs.service.codecs.text_codecs import ForPredict, RestRequest, read_body
from sagemaker_tfs.wire import tensors
from sagemaker_tfs.wire.errors import HttpError
from sagemaker_tfs.wire.signatures import Signature, TensorSpec

JSON = "application/json"
MB = 1 << 20
STRING = tensors.tf_dtype(np.dtype(object))

EXTRA_CASES = [
    '{"instances": ["a\\"b", "c\\\\", "d\\\\\\"e", "\\u00e9\\n"], "signature_name": "s"}',
    '{"instances": ["a", "b",]}',
    '{"instances": ["a" "b"]}',
    '{"instances": ["a",, "b"]}',
    '{"instances": ["a\tb"]}',
    '{"instances": ["\\x"]}',
    '{"instances": ["\\u12"]}',
    '{"instances": ["é", "模型", "\\ud800"]}',
    '{"examples": [{"x": 1.0}, {"x": [1, 2]}], "signature_name": "classify_x_to_y"}',
    '{"inputs": {"x": ["a", "b"], "y": [[1], [2]]}}',
    '{"instances": [{"b64": "YWJj"}, {"b64": "ZGVm"}]}',
    '{"a": ["b", "c"], "d": {"e": "f"}}',
    '{"a": 1, "a": 2, "instances": 3}',
    '{"\\u0069nstances": ["x"]}',
    '[["a", "b"], ["c", "d"]]',
    '[["a"], "b"]',
    '["a", "b"]',
    "[[], []]",
    "[ ]",
    "{ }",
    '[["a"]] ',
    ' \n\t[["a"]]\r\n',
    '[["a"]] x',
    '{"a": "b"}\n{"c": "d"}',
    '{"a": "b"}{"c": "d"}',
    '["a", NaN, Infinity, -Infinity, 1e400, 01]',
    '["a", ' + "[" * 150 + "]" * 150 + "]",
    '{"instances": [' + '"x", ' * 40 + '"y"]',
    '{"instances": [' + '"x", ' * 40 + '"y"]]}',
    '{"instances": ["a"]}]',
    '{"instances": ["a"], "b": }',
    '{"instances": ["a"], : 1}',
    '{"instances": ["a"], 1: 1}',
    '{"instances" ["a"]}',
    '{"instances": ["a\\\\"]}',
    '{"instances": ["' + "\\\\" * 70 + '"]}',
    '{"instances": [' + "1" * 5000 + "]}",
    '{"instances": ["a"]}\ufeff',
    "\ufeff" + '{"instances": ["a"]}',
    "\xa0[[1]]",
    '{"k": ["a", "b", "c", "d", "e", "f", "g", "h", "i"], ["j", "k"]}',
    '{"k": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14], [10, 11]}',
    "[[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12], [13, 14]], [15]]",
    '{"instances": [1, 2, 3, 4, 5, 6, 7, 8, "a, b, c, d", 9, "e, f", 10]}',
    '{"instances": [{"a": [1, 2]}, {"a": [3, 4]}, {"a": [5, 6]}, {"a": [7, 8]}, {"b": 9}]}',
]


LINES_CASES = [
    '{"x": "a"}\n{"x": "b"}\n',
    '{"x": "a"}{"x": "b"}',
    "[1]\r\n\t [2] ",
    '{"x": "a"}\n5\n{"x": "b"}',
    '{"x": "a"}\n"s"',
    '{"x": "a"},{"x": "b"}',
    '{"x": "a"}\n{"x": "b"',
    '{"x": "a"}\n{"x": "b"}}',
    '{"x": "\\"}\n{"x": "\\""}',
    '{"x": "é"}\n{"x": "模型"}\n',
    '{"x": "a"}\n\xa0{"x": "b"}',
    '{"x": [' + '"a", ' * 30 + '"b"]}\n{"y": {"z": [1, 2]}}\n' * 3,
    "[" * 150 + "]" * 150 + "\n[1]",
    '{"x": "a"}\n\n\n   \n',
    '{"x": 1}\n{"x": 01}',
    '{"x": 1}{"x": 2}\n\n{"x": 3}',
    '{"x": 1}\r\n{"x": 2}{"x": 3}\n{"x": 4}',
]


def reference(body: bytes, kind: str = JSON) -> bytes | HttpError:
    try:
        return convert(kind, body).encode("utf-8")
    except HttpError as error:
        return error


def corpus(fuzzed: bool) -> list[tuple[str, bytes]]:
    """(media type, body): the JSON and JSON lines bodies of the njs corpus (``fuzzed``: and
    its fuzzed bodies) and this file's; JSON lines' cases sent as JSON too (a JSON body of
    two values or more is JSON lines)."""
    njs = CASES + shape_bodies() + (fuzzed_bodies(3000, 53) if fuzzed else [])
    cases = [(kind, body) for kind, body in njs if kind in (JSON, *JSON_LINES_TYPES)]
    cases += [(JSON, body) for body in EXTRA_CASES + LINES_CASES]
    cases += [(JSONLINES, body) for body in EXTRA_CASES + LINES_CASES]
    return [(kind, body.encode("utf-8", "surrogatepass")) for kind, body in cases]


@pytest.fixture
def any_size(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(text_verbatim, "MIN_BYTES", 0)


@pytest.mark.parametrize(("window", "fuzzed"), [(16, False), (1 << 18, True)])
def test_a_body_read_verbatim_is_the_request_convert_writes(
    window: int, fuzzed: bool, any_size: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(text_scan, "WINDOW", window)
    read, valid, different = 0, 0, []
    for kind, body in corpus(fuzzed):
        expected = reference(body, kind)
        valid += isinstance(expected, bytes)
        try:
            request = text_verbatim.rest_request(body, lines=kind != JSON).joined()
        except text_scan.Unsure:
            continue
        read += 1
        if request != expected:
            different.append((body[:200], request[:200], expected))
    assert different == []
    assert read > valid * 0.7  # the rest: scalars, empty lists


@pytest.mark.parametrize(("window", "fuzzed"), [(16, False), (64, True)])
def test_the_codec_answers_as_convert_on_every_body(
    window: int, fuzzed: bool, any_size: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What is read here and what is left to ``convert`` together: the same request, or the
    same error in the same words."""
    monkeypatch.setattr(text_scan, "WINDOW", window)
    for kind, body in corpus(fuzzed):
        expected = reference(body, kind)
        try:
            found: bytes | HttpError = text_codecs.rest_request(kind, body).joined()
        except HttpError as error:
            found = error
        if isinstance(expected, HttpError):
            assert isinstance(found, HttpError), body[:200]
            assert (found.status, found.message) == (expected.status, expected.message)
        else:
            assert found == expected, body[:200]


CSV = "text/csv"


def csv_reference(body: bytes) -> bytes | tuple[int, str]:
    try:
        return convert(CSV, body).encode("utf-8")
    except HttpError as error:
        return error.status, error.message


@pytest.mark.parametrize("piece_bytes", [1, 5, 64])
def test_a_csv_body_converted_in_pieces_is_the_request_convert_writes(piece_bytes: int) -> None:
    bodies = [
        body.encode("utf-8", "surrogatepass")
        for kind, body in CASES + shape_bodies() + fuzzed_bodies(3000, 53)
        if kind == CSV
    ]
    bodies += [
        b"a,b\r\n\r\n \n c,d\n",
        b"1\n\xff\n2",
        b"\n\n",
        b"1,2\n3\n",
        b"\xc3\xa9\n\xe6\xa8\xa1",
    ]
    assert len(bodies) > 500
    for body in bodies:
        try:
            found: bytes | tuple[int, str] = text_rest.convert_csv_pieces(
                body, piece_bytes
            ).joined()
        except HttpError as error:
            found = error.status, error.message
        assert found == csv_reference(body), body[:200]


def words(count: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    letters = rng.integers(97, 123, (count, 10), dtype=np.uint8)
    return [row[: 3 + index % 8].tobytes().decode() for index, row in enumerate(letters)]


def repeated(head: str, items: list[str], tail: str, size: int) -> bytes:
    block = ", ".join(items)
    return (head + ", ".join([block] * max(1, size // (len(block) + 2))) + tail).encode()


def strings(size: int) -> bytes:
    return repeated('{"instances": [', [json.dumps(word) for word in words(20_000, 1)], "]}", size)


def b64(size: int) -> bytes:
    items = [
        f'{{"b64": "{base64.b64encode(word.encode()).decode()}"}}' for word in words(20_000, 2)
    ]
    return repeated('{"instances": [', items, "]}", size)


def classify(size: int) -> bytes:
    values = np.random.default_rng(3).uniform(-1, 1, 20_000)
    items = [f'{{"x": {value:.3f}, "w": "{word}"}}' for value, word in zip(values, words(20_000, 3),
                                                                          strict=True)]  # fmt: skip
    return repeated('{"signature_name": "classify_x_to_y", "examples": [', items, "]}", size)


def csv_words(size: int) -> bytes:
    return repeated("", words(20_000, 4), "", size).replace(b", ", b"\n")


def json_lines(size: int) -> bytes:
    items = [f'{{"x": {json.dumps(word)}}}' for word in words(20_000, 5)]
    return repeated("", items, "\n", size).replace(b", ", b"\n")


def rows_of_strings(size: int) -> bytes:
    items = [
        "[" + ", ".join(json.dumps(word) for word in words(8, seed)) + "]" for seed in range(50)
    ]
    return repeated("[", items, "]", size)


STRING_SIGNATURES = {
    "serving_default": Signature("serving_default", "tensorflow/serving/predict",
                                 {"x": TensorSpec("x", STRING, None)}, {})  # fmt: skip
}
# name, body, the reading, the peak's bound over the body: a piece's objects only, the
# request written a piece at a time (a wrapped body is sent between the wrap's two parts;
# CSV and JSON lines, a piece's objects at 3 MB: Python code per value)
LARGE = [
    ("strings", strings, ForPredict(STRING_SIGNATURES), 0.2),
    ("b64", b64, ForPredict(STRING_SIGNATURES), 0.2),
    ("classify", classify, ForPredict(None, "classify"), 0.2),
    ("no_signatures", strings, ForPredict(None), 0.2),
    ("rows_of_strings", rows_of_strings, ForPredict(STRING_SIGNATURES), 0.2),
]
CSV_LARGE = [
    ("csv_strings", csv_words, ForPredict(STRING_SIGNATURES), 0.5),
    ("json_lines", json_lines, ForPredict(STRING_SIGNATURES), 0.5),
]




@pytest.mark.parametrize(("name", "make", "reading", "bound"), LARGE + CSV_LARGE,
                         ids=[s[0] for s in LARGE + CSV_LARGE])  # fmt: skip
def test_a_large_body_going_the_rest_way_is_read_within_a_fraction_of_itself(
    name: str, make: Callable[[int], bytes], reading: ForPredict, bound: float,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.setattr(text_scan, "WINDOW", 32 << 10)
    monkeypatch.setattr(text_codecs, "CSV_PIECE_BYTES", 32 << 10)
    kind = {"csv_strings": CSV, "json_lines": JSONLINES}.get(name, JSON)
    body = make(6 * MB if kind == JSON else 3 * MB)  # CSV, JSON lines: Python code per value

    def read_and_write() -> RestRequest:
        read = read_body(kind, body, reading)
        assert isinstance(read, RestRequest)
        for _ in read.pieces():  # as they are sent
            pass
        return read

    read, peak = traced_peak(read_and_write)
    assert read.joined() == convert(kind, body).encode("utf-8")
    assert peak < bound * len(body), f"{name}: {peak / len(body):.2f}x the body"


@pytest.mark.parametrize("make", [strings, b64, classify], ids=["strings", "b64", "classify"])
def test_a_large_body_is_scanned_a_few_windows_at_most(
    make: Callable[[int], bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Runs end at guessed commas, proved by parsing: the marks of a few windows are
    scanned (before: every window twice, the outer object's and its large member's)."""
    monkeypatch.setattr(text_scan, "WINDOW", 32 << 10)
    scanned = []

    def counted(view: np.ndarray, start: int, stop: int) -> Iterator[text_scan.Marks]:
        for window in text_scan.marks(view, start, stop):
            scanned.append(window)
            yield window

    monkeypatch.setattr(text_verbatim, "marks", counted)
    body = make(4 * MB)
    assert text_verbatim.rest_request(body).joined() == convert(JSON, body).encode()
    assert len(scanned) <= 6, f"{len(scanned)} of {len(body) >> 15} windows scanned"


def test_a_body_nested_near_the_recursion_limit_is_left_to_convert(any_size: None) -> None:
    """A run is parsed PAD lists deeper than it lies in the document: a body that ``convert``
    reads with a few levels to spare is left to it (read here with PAD 0), and every body
    read here near the limit is one ``convert`` reads, into the same request."""

    def body(depth: int) -> bytes:
        return ('{"instances": [' + "[" * depth + "]" * depth + "]}").encode()

    def convert_reads(depth: int) -> bool:
        return isinstance(reference(body(depth)), bytes)

    low, high = 1, 100_000  # the deepest body convert reads, found from this frame
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if convert_reads(middle) else (low, middle)
    with pytest.raises(text_scan.Unsure):
        text_verbatim.rest_request(body(low - 8)).joined()
    read = []
    for depth in range(low - 40, low + 3):
        try:
            read.append(text_verbatim.rest_request(body(depth)).joined() == reference(body(depth)))
        except text_scan.Unsure:
            continue
    assert read and all(read)


def test_a_body_is_read_whatever_the_window(
    any_size: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A member that only ends a window (an empty list or object among them) is read a
    level down like a large one, not left to ``convert``."""
    bodies = [
        b'{"a": -0.5,\n "instances": [], "b": {}, "c": [[], {}, [[]], "x"]}',
        b'[[], {}, [], [[], []], {"d": {}}, [{}]]',
        b'{"instances": [{"b64": "YWJj"}, {"b64": ""}, ["", []], "\\"], [", {}]}',
    ]
    for window in range(4, 48):
        monkeypatch.setattr(text_scan, "WINDOW", window)
        for body in bodies:
            assert text_verbatim.rest_request(body).joined() == reference(body), (window, body)
