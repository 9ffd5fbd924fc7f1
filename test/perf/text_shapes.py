"""A generated corpus of JSON, JSON lines and CSV bodies of a given size (issue 53), for
bench_large_bodies.py's ``--shapes``: the shapes TF Serving's REST API takes that real
clients send, each for ``half_plus_three`` (y = 0.5x + 3, one input), ``two_inputs``
(y = 2a + b; signature ``doubled``: 2a), ``dtype_echo`` (a string x -> y = x) or TF Serving's
``saved_model_half_plus_two_cpu`` (classify and regress on tf.Examples: ``headers`` name
the method).

A body repeats a block of about 1 MB of random values with three decimals in [-1, 1] (so
``-0.000`` now and then, as real data has) until it reaches the size: the parsing cost is
that of random values, and the client does not hold a Python string per value.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

BLOCK_VALUES = 150_000  # values in a block (about 1 MB of text)


class Shape(NamedTuple):
    name: str
    model: str  # "half_plus_three", "two_inputs" or "dtype_echo"
    content_type: str
    body: Callable[[int], bytes]  # size in bytes -> a body of about that size
    tensors: Callable[[bytes], int]  # a body -> the bytes of its input and output tensors
    headers: dict[str, str] = {}  # extra request headers (never changed)


def numbers(count: int, seed: int) -> list[str]:
    values = np.random.default_rng(seed).uniform(-1, 1, count)
    return [f"{value:.3f}" for value in values]


def integers(count: int, seed: int) -> list[str]:
    return [str(value) for value in np.random.default_rng(seed).integers(-99_999, 99_999, count)]


def repeated(head: bytes, block: bytes, last: bytes, tail: bytes, size: int) -> bytes:
    """``head``, ``block`` as many times as fits ``size``, ``last``, ``tail``."""
    count = max(1, (size - len(head) - len(last) - len(tail)) // len(block))
    return head + block * count + last + tail


def csv_one_value_a_line(size: int) -> bytes:
    return repeated(b"", ("\n".join(numbers(BLOCK_VALUES, 1)) + "\n").encode(), b"", b"", size)


def csv_many_columns(size: int) -> bytes:
    values = numbers(BLOCK_VALUES, 2)
    rows = [",".join(values[start : start + 100]) for start in range(0, len(values), 100)]
    return repeated(b"", ("\n".join(rows) + "\n").encode(), b"", b"", size)


def csv_integers(size: int) -> bytes:
    return repeated(b"", ("\n".join(integers(BLOCK_VALUES, 3)) + "\n").encode(), b"", b"", size)


def csv_negative_zeros(size: int) -> bytes:
    """One value a line, the integer ``-0`` (the REST path's +0) among them."""
    values = numbers(BLOCK_VALUES, 4)
    values[::10_000] = ["-0"] * len(values[::10_000])
    return repeated(b"", ("\n".join(values) + "\n").encode(), b"", b"", size)


def json_instances(size: int) -> bytes:
    block = ", ".join(numbers(BLOCK_VALUES, 5)).encode() + b", "
    return repeated(b'{"instances": [', block, b"0.5", b"]}", size)


def _rows(seed: int) -> list[str]:
    a, b = numbers(BLOCK_VALUES // 2, seed), numbers(BLOCK_VALUES // 2, seed + 1)
    return [f'{{"a": {x}, "b": {y}}}' for x, y in zip(a, b, strict=True)]


def named_rows(size: int) -> bytes:
    block = ", ".join(_rows(6)).encode() + b", "
    return repeated(b'{"instances": [', block, b'{"a": 0.5, "b": 0.5}', b"]}", size)


def named_columns(size: int) -> bytes:
    half = repeated(b"", ", ".join(numbers(BLOCK_VALUES, 8)).encode() + b", ", b"0.5", b"",
                    size // 2 - 20)  # fmt: skip
    return b'{"inputs": {"a": [' + half + b'], "b": [' + half + b"]}}"


def json_lines(size: int) -> bytes:
    return repeated(b"", ("\n".join(_rows(9)) + "\n").encode(), b"", b"", size)


def signature_name(size: int) -> bytes:
    block = ", ".join(numbers(BLOCK_VALUES, 11)).encode() + b", "
    return repeated(b'{"signature_name": "doubled", "instances": [', block, b"0.5", b"]}", size)


def words(count: int, seed: int) -> list[str]:
    """Lower-case words of 3-10 letters."""
    rng = np.random.default_rng(seed)
    letters = rng.integers(97, 123, (count, 10), dtype=np.uint8)
    lengths = rng.integers(3, 11, count)
    return [row[:length].tobytes().decode() for row, length in zip(letters, lengths, strict=True)]


def json_strings(size: int) -> bytes:
    block = ", ".join(f'"{word}"' for word in words(BLOCK_VALUES, 12)).encode() + b", "
    return repeated(b'{"instances": [', block, b'"end"', b"]}", size)


def json_b64(size: int) -> bytes:
    encoded = (base64.b64encode(word.encode()).decode() for word in words(BLOCK_VALUES, 13))
    block = ", ".join(f'{{"b64": "{text}"}}' for text in encoded).encode() + b", "
    return repeated(b'{"instances": [', block, b'{"b64": "ZW5k"}', b"]}", size)


def csv_strings(size: int) -> bytes:
    return repeated(b"", ("\n".join(words(BLOCK_VALUES, 16)) + "\n").encode(), b"", b"", size)


def json_lines_strings(size: int) -> bytes:
    lines = "\n".join(f'{{"x": "{word}"}}' for word in words(BLOCK_VALUES, 17)) + "\n"
    return repeated(b"", lines.encode(), b"", b"", size)


def _examples(signature: str, seed: int, size: int) -> bytes:
    block = ", ".join(f'{{"x": {value}}}' for value in numbers(BLOCK_VALUES // 2, seed))
    head = f'{{"signature_name": "{signature}", "examples": ['.encode()
    return repeated(head, block.encode() + b", ", b'{"x": 0.5}', b"]}", size)


def classify_examples(size: int) -> bytes:
    return _examples("classify_x_to_y", 14, size)


def regress_examples(size: int) -> bytes:
    return _examples("regress_x_to_y", 15, size)


# Issue 53's bound on each process's growth: the body plus the bytes of the input and output
# tensors. A float32 is 4 bytes; TensorFlow holds 24 bytes a string element (plus the bytes
# over 22 of each: none here, words and serialized one-float examples are shorter).
FLOAT, STRING = 4, 24


def per(count: Callable[[bytes], int], each: int) -> Callable[[bytes], int]:
    """Tensor bytes of ``count(body)`` elements (rows, values) of ``each`` bytes in and out."""
    return lambda body: count(body) * each


def lines(body: bytes) -> int:
    return body.count(b"\n")


def fields(body: bytes) -> int:
    return body.count(b",") + body.count(b"\n")


def listed(body: bytes) -> int:
    return body.count(b",") + 1


def tagged(tag: bytes) -> Callable[[bytes], int]:
    return lambda body: body.count(tag)


ONE_FLOAT = 2 * FLOAT  # half_plus_three and two_inputs' doubled: a float in, a float out
ROW_OF_TWO = 3 * FLOAT  # two_inputs: a and b in, y out
STRING_ECHO = 2 * STRING  # dtype_echo: a string in, the same out
EXAMPLE = STRING + FLOAT  # classify/regress: a serialized example in, a float out

METHOD = "X-Amzn-SageMaker-Custom-Attributes"
HALF_PLUS_TWO = "saved_model_half_plus_two_cpu"

JSON, CSV, LINES = "application/json", "text/csv", "application/jsonlines"
EXAMPLES = per(tagged(b'"x"'), EXAMPLE)

SHAPES = [
    Shape("csv_one_value_a_line", "half_plus_three", CSV, csv_one_value_a_line,
          per(lines, ONE_FLOAT)),
    Shape("csv_many_columns", "half_plus_three", CSV, csv_many_columns, per(fields, ONE_FLOAT)),
    Shape("csv_integers", "half_plus_three", CSV, csv_integers, per(lines, ONE_FLOAT)),
    Shape("csv_negative_zeros", "half_plus_three", CSV, csv_negative_zeros, per(lines, ONE_FLOAT)),
    Shape("json_instances", "half_plus_three", JSON, json_instances, per(listed, ONE_FLOAT)),
    Shape("named_rows", "two_inputs", JSON, named_rows, per(tagged(b'"a"'), ROW_OF_TWO)),
    Shape("named_columns", "two_inputs", JSON, named_columns, per(listed, ROW_OF_TWO // 2)),
    Shape("json_lines", "two_inputs", LINES, json_lines, per(lines, ROW_OF_TWO)),
    Shape("signature_name", "two_inputs", JSON, signature_name, per(listed, ONE_FLOAT)),
    Shape("strings", "dtype_echo", JSON, json_strings, per(listed, STRING_ECHO)),
    Shape("b64", "dtype_echo", JSON, json_b64, per(tagged(b'"b64"'), STRING_ECHO)),
    Shape("csv_strings", "dtype_echo", CSV, csv_strings, per(lines, STRING_ECHO)),
    Shape("json_lines_strings", "dtype_echo", LINES, json_lines_strings, per(lines, STRING_ECHO)),
    Shape("classify", HALF_PLUS_TWO, JSON, classify_examples, EXAMPLES,
          {METHOD: "tfs-method=classify"}),
    Shape("regress", HALF_PLUS_TWO, JSON, regress_examples, EXAMPLES,
          {METHOD: "tfs-method=regress"}),
]  # fmt: skip
