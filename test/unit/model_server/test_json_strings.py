"""json_strings: predict bodies of plain strings read without a Python object per string, to
the same tensors and answers as the general reader, in bounded memory (issue 53)."""

from __future__ import annotations

import base64
import os
import random
import subprocess
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from memory_traces import traced_peak
from one_servable import OneServable
from sagemaker_tfs.model_server.errors import ServingError
from sagemaker_tfs.model_server.rest import api as api_module
from sagemaker_tfs.model_server.rest.api import RestApi
from sagemaker_tfs.model_server.rest.b64_values import NotDecoded, decode_b64_spans
from sagemaker_tfs.model_server.rest.json_reader import decode_b64, parse_json_object
from sagemaker_tfs.model_server.rest.json_strings import read_string_tensor
from sagemaker_tfs.model_server.rest.predict_json import parse_predict_request
from sagemaker_tfs.model_server.serving.signatures import GraphTensor, ServableSignature
from tensorflow.core.framework import types_pb2

STRINGS = ServableSignature(
    "serving_default",
    "tensorflow/serving/predict",
    {"x": GraphTensor("x:0", types_pb2.DT_STRING, None)},
    {"y": GraphTensor("y:0", types_pb2.DT_STRING, None)},
)

CORPUS = [
    b'{"instances": ["a", "bc", ""]}',
    b'{"inputs": ["a", "bc", ""]}',
    b' {\n  "instances" :\t[ "one" ,"two" ]\r\n}  \n',
    '{"instances": ["héllo", "日本語", "emoji 😀", "Ω"]}'.encode(),
    rb'{"instances": ["tab\t", "q\"uote", "back\\slash", "end\\", "\\\"", "\u00e9\u65e5", "\/"]}',
    rb'{"instances": ["nl\nx", "\b\f\r"]}',
    b'{"instances": ["raw \xff\xfe bytes", "\xc3("]}',
    b'{"inputs": [["a", "b"], ["c", "d"], ["e", "f"]]}',
    b'{"instances": [[["a"], ["b"]], [["c"], ["d"]]]}',
    b'{"instances": [["x"], ["y"], ["z"]]}',
    b'{"instances": ["' + b"long" * 100_000 + b'", "s", "t"]}',  # an object array
    rb'{"instances": ["ends in a NUL\u0000", "b"]}',  # an object array
    b'{"instances": ["' + base64.b64encode(b"\x00\x01\xff").rstrip(b"=") + b'"]}',
    b'{"instances": ["a"]}',
    b'{"instances": [{"b64": "aGVsbG8="}, {"b64": "aGk"}, {"b64": ""}, {"b64": "/+8="}]}',
    b'{"inputs": [[{"b64": "_-8"}, {"b64": "YQ=="}], [ {"b64":"Yg"} , {"b64": "AAE="}]]}',
    b'{"instances": [{"b64": "aGk="}, {"b64": "AA=="}, {"b64": "YQ"}]}',  # ends in a NUL
    b'{"instances": [{"b64": "' + base64.b64encode(b"x" * 300_000) + b'"}, {"b64": "YQ"}]}',
]

NOT_TAKEN = [
    b'{"instances": []}',
    b'{"instances": [[], []]}',
    b'{"instances": ["a", ["b"]]}',
    b'{"instances": [["a", "b"], ["c"]]}',
    b'{"instances": ["a", 1]}',
    b'{"instances": ["a", null]}',
    b'{"instances": [{"b64": "AA=="}, "a"]}',  # b64 objects and strings mixed
    b'{"instances": [{"b64": "A"}]}',  # base64 the general reader refuses
    b'{"instances": [{"b64": "AA=A"}]}',
    b'{"instances": [{"b64": "A\\u0041=="}]}',
    b'{"instances": [{"b64": "A\\u0041-="}]}',  # URL-safe: its escape decoded first
    b'{"instances": [{"b64": "\xc3\xa9AA"}]}',
    b'{"instances": [{"b64": 1}]}',
    b'{"instances": [{"b64": "AA==", "b64": "AQ=="}]}',
    b'{"instances": [{"b65": "AA=="}]}',
    b'{"inputs": {"b64": "AA=="}}',
    b'{"instances": [{"x": "a"}]}',
    b'{"inputs": "scalar"}',
    b'{"inputs": {"x": ["a"]}}',
    b'{"instances": ["a"], "signature_name": ""}',
    b'{"instances": ["a"], "instances": ["b"]}',
    b'{"instances": ["a"]} trailing',
    b'{"instances": ["a\tb"]}',  # a control character in a string
    b'{"instances": ["a\nb"]}',
    rb'{"instances": ["\ud800"]}',  # a lone surrogate
    rb'{"instances": ["\ud83d\ude00 pair"]}',  # any \uD8.. escape, a pair too
    rb'{"instances": ["\x"]}',  # a bad escape
    b'{"instances": ["a", "b",]}',
    b'{"instances": ["a" "b"]}',
    b'{"instances": ["a"',
    b'{"instan\\u0063es": ["a"]}',
    b'{"outputs": ["a"]}',
    b'["a", "b"]',
    b"",
]


ROWS = [  # rows of the one input alone: read by json_strings when it is given the alias
    b'{"instances": [{"x": "a"}, {"x": "bc"}, {"x": ""}]}',
    b'{"instances": [ {"x":"one"} ,\n{ "x" : "t\\"wo" } ]}',
    rb'{"instances": [{"x": "h\u00e9llo"}, {"x": "\u0000"}]}',
    '{"instances": [{"x": "\u65e5 \u00e9"}]}'.encode(),
]

ROWS_NOT_TAKEN = [
    b'{"instances": [{"x": "a"}, {"y": "b"}]}',
    b'{"instances": [{"x": "a", "x": "b"}]}',
    b'{"instances": [{"x": ["a"]}]}',
    b'{"instances": [[{"x": "a"}]]}',
    b'{"inputs": [{"x": "a"}]}',
    b'{"instances": [{"x": 1}]}',
    b'{"instances": [{"xx": "a"}]}',
    rb'{"instances": [{"\u0078": "a"}]}',
    b'{"instances": [{"x": "a"},]}',
    b'{"instances": [{"x": "a"} {"x": "b"}]}',
    b'{"instances": [{"x": "a"}, "b"]}',
    b'{"instances": [{"x": "a"}], "x": "b"}',
]


def general_read(body: bytes) -> tuple[dict[str, np.ndarray], bool]:
    return parse_predict_request(parse_json_object(body), STRINGS)


def as_lists(array: np.ndarray) -> Any:
    return np.asarray(array, dtype=object).tolist()


@pytest.mark.parametrize("body", CORPUS)
def test_strings_read_as_the_general_reader_reads_them(body: bytes) -> None:
    read = read_string_tensor(body)
    assert read is not None
    key, values = read
    expected, columnar = general_read(body)
    assert key == ("inputs" if columnar else "instances")
    assert values.shape == expected["x"].shape
    assert as_lists(values) == as_lists(expected["x"])


@pytest.mark.parametrize("body", NOT_TAKEN)
def test_other_bodies_are_left_to_the_general_reader(body: bytes) -> None:
    assert read_string_tensor(body) is None


@pytest.mark.parametrize("body", ROWS)
def test_rows_of_the_one_input_read_as_the_general_reader_reads_them(body: bytes) -> None:
    assert read_string_tensor(body) is None
    read = read_string_tensor(body, "x")
    assert read is not None
    expected, columnar = general_read(body)
    assert read[0] == "instances" and not columnar
    assert as_lists(read[1]) == as_lists(expected["x"])


@pytest.mark.parametrize("body", ROWS_NOT_TAKEN)
def test_other_rows_are_left_to_the_general_reader(body: bytes) -> None:
    assert read_string_tensor(body, "x") is None


class EchoServable:
    """A string model answering ``y`` (and ``y_bytes``, written as b64) = ``x``, as TF
    answers strings: an object array of bytes."""

    batched = False

    def __init__(self, bytes_output: bool) -> None:
        self.bytes_output = bytes_output
        self.output_bytes = 0  # traced bytes of the last answer's object array

    def signature(self, name: str) -> ServableSignature:
        return STRINGS

    def predict_joined(self, name: str, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        before = tracemalloc.get_traced_memory()[0]
        echoed = np.asarray(inputs["x"], dtype=object)
        self.output_bytes = tracemalloc.get_traced_memory()[0] - before
        if self.bytes_output:
            return {"y": echoed, "y_bytes": echoed}
        return {"y": echoed}


def rest_api(bytes_output: bool = False) -> RestApi:
    return RestApi(OneServable(EchoServable(bytes_output)))  # type: ignore[arg-type]


def answers(bodies: list[bytes], bytes_output: bool) -> list[tuple[int, bytes]]:
    api = rest_api(bytes_output)
    return [
        (status, bytes(body))
        for status, body in (api.handle("POST", "/v1/models/m:predict", b) for b in bodies)
    ]


@pytest.mark.parametrize("bytes_output", [False, True])
def test_answers_are_byte_for_byte_those_of_the_general_path(
    bytes_output: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    bodies = CORPUS + NOT_TAKEN + ROWS + ROWS_NOT_TAKEN
    taken = answers(bodies, bytes_output)
    monkeypatch.setattr(api_module, "read_string_tensor", lambda body, alias: None)
    assert taken == answers(bodies, bytes_output)
    assert all(status == 200 for status, _ in taken[: len(CORPUS)])


def b64_body(size: int) -> bytes:
    """Words in b64 (as bench_large_bodies's): an ``S`` array (binary values that end in a
    NUL byte are an object array, ~2x such a body: the corpus has them)."""
    rng = np.random.default_rng(8)
    values = rng.integers(97, 123, (size // 24, 9), dtype=np.uint8)
    texts = ", ".join(
        f'{{"b64": "{base64.b64encode(row[: 4 + i % 6].tobytes()).decode()}"}}'
        for i, row in enumerate(values)
    )
    return b'{"instances": [' + texts.encode() + b"]}"


def short_strings_body(size: int) -> bytes:
    rng = np.random.default_rng(7)
    letters = rng.integers(97, 123, (size // 10, 8), dtype=np.uint8)
    words = ", ".join(f'"{row[: 3 + i % 6].tobytes().decode()}"' for i, row in enumerate(letters))
    return b'{"instances": [' + words.encode() + b"]}"


def rows_body(size: int) -> bytes:
    """Short strings as rows of the one input (the service's request for JSON lines)."""
    rng = np.random.default_rng(9)
    letters = rng.integers(97, 123, (size // 16, 8), dtype=np.uint8)
    rows = ", ".join(f'{{"x": "{row[: 3 + i % 6].tobytes().decode()}"}}'
                     for i, row in enumerate(letters))  # fmt: skip
    return b'{"instances": [' + rows.encode() + b"]}"


@pytest.mark.parametrize("make_body", [short_strings_body, b64_body, rows_body])
def test_a_body_of_short_strings_is_answered_in_2x_its_size_besides_the_output(
    make_body: Any,
) -> None:
    """4 MB of short strings or of b64 objects, echoed: besides the output's object array
    (TF's, the model's answer), the reader holds its quotes' offsets and one ``S`` array (~1x,
    let go of once run), the answer is one growing buffer (~1.1x). The general reader held
    18.6x the body for strings (a str, then a bytes object per string), 22.9x for b64 (a dict
    per value)."""
    body = make_body(4 << 20)
    servable = EchoServable(bytes_output=False)
    api = RestApi(OneServable(servable))  # type: ignore[arg-type]
    api.handle("POST", "/v1/models/m:predict", b'{"instances": ["warm"]}')
    (status, answer), peak = traced_peak(lambda: api.handle("POST", "/v1/models/m:predict", body))
    assert status == 200 and answer.startswith(b'{\n    "predictions": ["')
    growth = (peak - servable.output_bytes) / len(body)
    assert growth < 2, f"traced peak {growth:.1f}x the body besides the output"


def random_b64_texts(rng: random.Random) -> list[str]:
    """Standard b64 (padded, unpadded, decoding to a trailing NUL or not) and random texts
    of its alphabets, '=' and all."""
    texts = []
    for _ in range(rng.randint(1, 12)):
        kind = rng.random()
        data = bytes(rng.randrange(256) for _ in range(rng.randint(0, 9)))
        if kind < 0.5:
            texts.append(base64.b64encode(data).decode())
        elif kind < 0.7:
            texts.append(base64.b64encode(data).decode().rstrip("="))
        else:
            texts.append("".join(rng.choice("ABCab09+/=-_") for _ in range(rng.randint(0, 9))))
    return texts


def test_b64_values_decode_as_decode_b64_does() -> None:
    """Decoded in bulk (NumPy) or one by one, every list of values gives what the general
    reader's ``decode_b64`` gives, or is left to it when it refuses any."""
    rng = random.Random(2)
    for _ in range(600):
        texts = random_b64_texts(rng)
        body = b"".join(b'"' + text.encode() + b'"' for text in texts)
        ends = np.cumsum([len(text) + 2 for text in texts], dtype=np.int32) - 1
        starts = ends - np.array([len(text) for text in texts], dtype=np.int32)
        try:
            expected = [decode_b64(text) for text in texts]
        except ServingError:
            expected = None
        try:
            values = decode_b64_spans(body, np.frombuffer(body, np.uint8), starts, ends)
            decoded = np.asarray(values, dtype=object).tolist()
        except NotDecoded:
            decoded = None
        assert decoded == expected, texts


RESIDENT_AFTER_READ = """
import gc
import resource
import numpy as np
from sagemaker_tfs.model_server.rest.json_strings import read_string_tensor

def short_strings_body(size):
    letters = np.random.default_rng(7).integers(97, 123, (size // 10, 8), dtype=np.uint8)
    words = ", ".join(f'"{row[: 3 + i % 6].tobytes().decode()}"' for i, row in enumerate(letters))
    return b'{"instances": [' + words.encode() + b"]}"

def resident():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize()

body = short_strings_body(8 << 20)
read_string_tensor(short_strings_body(1 << 20))  # a warm heap: glibc's mmap threshold raised
gc.collect()
before = resident()
read = read_string_tensor(body)
print((resident() - before - read[1].nbytes) / len(body))
"""


def test_a_large_body_read_keeps_resident_about_its_array() -> None:
    """The reader's offsets (~2x the body at their peak), once freed, are handed back to the
    kernel: the run's tensors came on top of them (RSS, not traced: the heap kept them; in a
    new interpreter, whose heap this test alone shapes). Kept without the trim: 1.09x the body
    besides the array."""
    here = Path(__file__).resolve()
    path = os.pathsep.join([os.environ.get("PYTHONPATH", ""), str(here.parents[2] / "container")])
    kept = float(
        subprocess.run(
            [sys.executable, "-c", RESIDENT_AFTER_READ],
            env={**os.environ, "PYTHONPATH": path},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()[-1]
    )
    assert kept < 0.5, f"{kept:.2f}x the body resident besides the array"
