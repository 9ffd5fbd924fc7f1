"""The text family's reading of a large JSON body holds no copy the size of the body or of its
skeleton (issue 53's memory bound: no process of the stack grows by more than the body plus
the bytes of the input and output tensors).

``tracemalloc`` sees every Python allocation (NumPy's arrays among them) made while
``text_codecs.read_body`` reads a body that was allocated before: what the reading holds on
top of the body. That must stay within ``ALLOWANCE`` times the bytes of the input arrays the
REST path reads from it (or would read, for a body it refuses), plus one piece's work (the
pieces are cut to ``PIECE_BYTES`` here, so that what grows with the body shows at 8-16 MB).
The skeleton (two bytes a number, brackets and names) is made once, in one buffer, and
compared with the layout it should have a block at a time: before, named rows, JSON lines,
named columns and lists of rows held it up to four times over (0.6-1.0x the body).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from memory_traces import traced_peak
from sagemaker_tfs.service.codecs.text import text_json
from sagemaker_tfs.service.codecs.text_codecs import ForPredict, Refusal, TextRequest, read_body
from sagemaker_tfs.wire import tensors
from sagemaker_tfs.wire.signatures import Signature, TensorSpec
from sagemaker_tfs.wire.tfs_json import predict_answer_pieces

JSON = "application/json"
LINES = "application/jsonlines"
F32, I64 = (tensors.tf_dtype(np.dtype(dtype)) for dtype in (np.float32, np.int64))
MB = 1 << 20
PIECE_BYTES = 64 << 10
# The input arrays, then the skeleton (7 bytes a row of two named numbers against 8 bytes of
# float32 inputs; 2 bytes a number against 4 in a list) in a buffer grown an eighth at a time.
ALLOWANCE = 1.25
WORK_BYTES = 2 * MB  # a piece's text, its classes, orjson's list, the doubles of its numbers


def values(count: int, seed: int) -> list[str]:
    """Three decimals in [-1, 1]: 6-7 characters each."""
    return [f"{value:.3f}" for value in np.random.default_rng(seed).uniform(-1, 1, count)]


def repeated(head: bytes, items: list[str], separator: str, tail: bytes, size: int) -> bytes:
    """``head``, ``items`` joined and repeated to about ``size`` bytes, ``tail``."""
    block = separator.join(items).encode()
    count = max(1, size // (len(block) + len(separator)))
    return head + (block + separator.encode()) * (count - 1) + block + tail


def named_rows(size: int) -> bytes:
    rows = [f'{{"a": {a}, "b": {b}}}' for a, b in zip(values(5000, 1), values(5000, 2),
                                                     strict=True)]  # fmt: skip
    return repeated(b'{"instances": [', rows, ", ", b"]}", size)


def json_lines(size: int) -> bytes:
    rows = [f'{{"a": {a}, "b": {b}}}' for a, b in zip(values(5000, 3), values(5000, 4),
                                                     strict=True)]  # fmt: skip
    return repeated(b"", rows, "\n", b"\n", size)


def named_columns(size: int, b_values: list[str] | None = None) -> bytes:
    half = repeated(b"[", values(10_000, 5), ", ", b"]", size // 2)
    other = half if b_values is None else repeated(b"[", b_values, ", ", b"]", size // 2)
    return b'{"inputs": {"a": ' + half + b', "b": ' + other + b"}}"


def mixed_columns(size: int) -> bytes:
    integers = [str(value) for value in np.random.default_rng(6).integers(-999, 999, 10_000)]
    return named_columns(size, integers)


def rows_of_lists(size: int) -> bytes:
    rows = ["[" + ", ".join(values(100, seed)) + "]" for seed in range(20)]
    return repeated(b'{"instances": [', rows, ", ", b"]}", size)


def null_at_the_end(size: int) -> bytes:
    return repeated(b'{"instances": [', values(10_000, 7), ", ", b", null]}", size)


def signatures(dtypes: dict[str, int]) -> dict[str, Signature]:
    inputs = {name: TensorSpec(name, dtype, None) for name, dtype in dtypes.items()}
    return {"serving_default": Signature("serving_default", "", inputs, {})}


TWO_FLOATS = {"a": F32, "b": F32}
SHAPES: list[tuple[str, Callable[[int], bytes], str, dict[str, int]]] = [
    ("named_rows", named_rows, JSON, TWO_FLOATS),
    ("json_lines", json_lines, LINES, TWO_FLOATS),
    ("named_columns", named_columns, JSON, TWO_FLOATS),
    ("mixed_columns", mixed_columns, JSON, {"a": F32, "b": I64}),
    ("rows_of_lists", rows_of_lists, JSON, {"x": F32}),
]


@pytest.mark.parametrize(("name", "make", "kind", "dtypes"), SHAPES, ids=[s[0] for s in SHAPES])
def test_a_large_body_is_read_within_its_inputs_bytes(
    name: str, make: Callable[[int], bytes], kind: str, dtypes: dict[str, int],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.setattr(text_json, "PARSE_BYTES", PIECE_BYTES)
    body = make(16 * MB)
    read, peak = traced_peak(lambda: read_body(kind, body, ForPredict(signatures(dtypes))))
    assert isinstance(read, TextRequest), read
    inputs = sum(array.nbytes for array in read.arrays.values())
    print(f"{name}: {len(body) / MB:.1f} MB, inputs {inputs / len(body):.2f}x, "
          f"peak {peak / len(body):.2f}x the body")  # fmt: skip
    assert peak <= ALLOWANCE * inputs + WORK_BYTES, f"{peak / inputs:.2f}x the inputs' bytes"


def test_a_body_refused_at_its_last_value_is_refused_within_its_inputs_bytes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A ``null`` after 2 M floats: the REST path's 400, found with no more memory than the
    floats' array (which the first attempt to read it held, and let go of)."""
    monkeypatch.setattr(text_json, "PARSE_BYTES", PIECE_BYTES)
    body = null_at_the_end(16 * MB)
    read, peak = traced_peak(lambda: read_body(JSON, body, ForPredict(signatures({"x": F32}))))
    assert isinstance(read, Refusal), read
    assert "JSON Value: null Type: Null is not of expected type: float" in read.message
    inputs = 4 * (body.count(b",") + 1)
    print(f"null at the end: {len(body) / MB:.1f} MB, peak {peak / len(body):.2f}x the body")
    assert peak <= ALLOWANCE * inputs + WORK_BYTES, f"{peak / inputs:.2f}x the inputs' bytes"


def test_a_large_answer_is_written_a_small_block_at_a_time() -> None:
    """The JSON answer of 2 M floats (the doubled values of three decimals: several layouts)
    is written while it is sent, a block at a time: one block's byte matrix and index arrays
    (~180 bytes a value) are what the writer holds, 3 MB (65,536 values a block held 12 MB,
    0.12x a 100 MB body, on top of whatever the request still held)."""
    rng = np.random.default_rng(8)
    outputs = {"y": rng.uniform(-1, 1, 2_000_000).round(3).astype(np.float32) * np.float32(2)}
    written, peak = traced_peak(
        lambda: max(len(piece) for piece in predict_answer_pieces(outputs, False))
    )
    assert isinstance(written, int) and written < MB
    assert peak <= 4 * MB, f"{peak / MB:.1f} MB"
