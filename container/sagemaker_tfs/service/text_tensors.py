"""JSON and CSV bodies read straight into the one input's array, for the service to send over
gRPC rather than as JSON text that the model server parses again (issue 36).

Only bodies that the REST path (``conversion.convert``, then the model server's JSON reader)
would read into exactly the same array are read here, without a Python object per number:

- CSV of numbers: NumPy's C reader (``np.loadtxt``) over the whole buffer;
- JSON whose one tensor is a rectangular array of numbers (``{"instances": [...]}``,
  ``{"inputs": [...]}``, or a bare list, which conversion wraps as instances): its shape
  checked from the brackets and commas alone (NumPy over the bytes, a piece at a time), its
  numbers parsed by orjson (what the model server's reader uses) a piece at a time.

Anything else returns None and the caller converts the body as before, so that its answer
and its errors are the REST path's: strings or other non-number bytes, ragged or empty
lists, other keys (``signature_name``), JSON lines, a NaN, an infinity, an integer input
given a fraction or a value out of its range, and inputs of other dtypes. Values are parsed
as doubles and then cast, as the REST path does (a float32 is rounded from the double, not
from the text). Where the REST path reads a value otherwise than the double of its text, the
difference is recorded and applied (CSV's ``-0``: see ``_unsign_integer_zeros``), so that no
single value sends a body the unbounded way.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Iterator
from typing import NamedTuple

import numpy as np
import orjson

from sagemaker_tfs.service.content_types import CSV, JSON
from sagemaker_tfs.wire import tensors
from sagemaker_tfs.wire.signatures import TensorSpec

# The input dtypes read here.
_READ_TYPES = {
    tensors.tf_dtype(np.dtype(dtype)): np.dtype(dtype)
    for dtype in (np.float32, np.float64, np.int32, np.int64)
}
MAX_DIMS = 64  # the model server's limit on a JSON tensor's dimensions
# Bytes scanned at a time (boolean masks of this size), numbers parsed at a time.
SCAN_BYTES = 4 << 20
PARSE_BYTES = 1 << 20

_WHITESPACE = b" \t\n\r"  # JSON's; ECMAScript's trim has more, which are left to conversion
_NUMBER_CHARS = b"0123456789.eE+-"
_A_DIGIT = re.compile(rb"[0-9]")
_CSV_SEPARATOR = re.compile(rb"[,\n]")


def _byte_table(allowed: bytes) -> np.ndarray:
    table = np.zeros(256, dtype=bool)
    table[list(allowed)] = True
    return table


_CSV_ALLOWED = _byte_table(_NUMBER_CHARS + b"," + _WHITESPACE)
_JSON_ALLOWED = _byte_table(_NUMBER_CHARS + b",[]" + _WHITESPACE)
_IS_NUMBER = _byte_table(_NUMBER_CHARS)
# A CSV body with its blanks made separators and exponents lower case (_negative_zeros_in).
_ZEROS_DELETED = bytes.maketrans(_WHITESPACE + b"E", b"," * len(_WHITESPACE) + b"e")
_NEGATIVE_ZERO_ENDINGS = (b"-,", b"-e", b"-.,", b"-.e")
_IS_STRUCTURE = _byte_table(b",[]")
_NUMBER_MARK = ord("0")
_BRACKETS_TO_SPACES = bytes.maketrans(b"[]", b"  ")
_JSON_HEAD = re.compile(rb'[ \t\n\r]*(?:\{[ \t\n\r]*"(instances|inputs)"[ \t\n\r]*:[ \t\n\r]*)?\[')


class TextTensor(NamedTuple):
    """The input's array, and whether the request was columnar (``inputs``: answered as
    ``{"outputs": ...}``) rather than rows (``{"predictions": ...}``)."""

    array: np.ndarray
    columnar: bool


def read_text_tensor(kind: str, body: bytes, spec: TensorSpec) -> TextTensor | None:
    """The array the REST path would feed ``spec`` for this body, or None (see the module)."""
    dtype = _READ_TYPES.get(spec.dtype)
    if dtype is None:
        return None
    if kind == CSV:
        array = _csv_array(body, dtype)
        return None if array is None else TextTensor(array, False)
    if kind == JSON:
        return _json_tensor(body, dtype)
    return None


# --------------------------------------------------------------------------- CSV


class _Span(NamedTuple):
    """``body[start:end]``, not copied."""

    body: bytes
    start: int
    end: int

    def pieces(self, size: int) -> Iterator[np.ndarray]:
        for offset in range(self.start, self.end, size):
            yield np.frombuffer(self.body, np.uint8, min(size, self.end - offset), offset)


def _csv_array(body: bytes, dtype: np.dtype) -> np.ndarray | None:
    """Rows of numbers -> (rows,) for one field per row (conversion sends each row's value as
    an instance), else (rows, fields)."""
    integral = dtype.kind == "i"
    if not _only_bytes(body, _CSV_ALLOWED) or _A_DIGIT.search(body) is None:
        return None
    if body.count(b"\r") != body.count(b"\r\n"):  # a lone \r: one line to conversion
        return None
    if integral and (b"." in body or b"e" in body or b"E" in body):
        return None
    try:
        values = np.loadtxt(io.BytesIO(body), delimiter=",", comments=None, ndmin=2,
                            dtype=np.int64 if integral else np.float64)  # fmt: skip
    except (ValueError, OverflowError):
        return None
    if not _fits(values, dtype) or not _unsign_integer_zeros(body, values):
        return None
    with np.errstate(over="ignore"):  # beyond a float32: infinity, on the REST path too
        return (values.reshape(-1) if values.shape[1] == 1 else values).astype(dtype, copy=False)


def _only_bytes(body: bytes, allowed: np.ndarray) -> bool:
    return all(allowed[chunk].all() for chunk in _Span(body, 0, len(body)).pieces(SCAN_BYTES))


def _fits(values: np.ndarray, dtype: np.dtype) -> bool:
    """Values the REST path gives the same input: finite, integers within the dtype."""
    if values.size == 0:
        return False
    if dtype.kind == "i":
        limits = np.iinfo(dtype)
        return bool(limits.min <= values.min() and values.max() <= limits.max)
    return bool(np.isfinite(values).all())


def _unsign_integer_zeros(body: bytes, values: np.ndarray) -> bool:
    """Makes CSV's integer negative zeros (``-0``, ``-00``) the zero they are on the REST path,
    in place: conversion copies ``-0`` as JSON's integer ``-0``, which the model server reads
    as the integer 0 (a float input gets +0.0), while ``-0.0``, ``-.0`` or ``-0e1`` stay the
    negative zero NumPy read. False when the text's negative zeros cannot be matched to the
    array's, one for one (the caller then leaves the body to the REST path).

    Negative zeros are rare, so the body is scanned only when the array holds one."""
    if values.dtype.kind != "f":
        return True
    flat = values.reshape(-1)
    zeros = np.flatnonzero(flat == 0)
    negative = zeros[np.signbit(flat[zeros])]
    if negative.size == 0:
        return True
    integral = np.fromiter(_negative_zero_fields(body), dtype=bool)
    if integral.size != negative.size:
        return False
    flat[negative[integral]] = 0.0
    return True


def _negative_zero_fields(body: bytes) -> Iterator[bool]:
    """For each field of the CSV that is a negative zero, in order: whether it is written as
    an integer (no point, no exponent). Scanned a piece of whole fields at a time."""
    start = 0
    while start < len(body):
        cut = _CSV_SEPARATOR.search(body, min(start + PARSE_BYTES, len(body)))
        end = len(body) if cut is None else cut.end()
        yield from _negative_zeros_in(body[start:end])
        start = end


def _negative_zeros_in(piece: bytes) -> Iterator[bool]:
    """``_negative_zero_fields`` of whole fields, found with bytes routines: with the zeros
    deleted and every blank or separator made ``,``, a negative zero's mantissa is a ``-``
    then at most a point, ending at a ``,``, an exponent's ``e`` or the piece's end; a ``-``
    after an ``e`` is an exponent's sign."""
    text = piece.translate(_ZEROS_DELETED, b"0")
    found = sorted(
        (at, ending)
        for ending in _NEGATIVE_ZERO_ENDINGS
        for at in _occurrences(text, ending)
        if text[at - 1 : at] != b"e"
    )
    yield from (ending == b"-," for _, ending in found)
    for ending in (b"-.", b"-"):  # a negative zero ending the body
        if text.endswith(ending) and text[-len(ending) - 1 : -len(ending)] != b"e":
            yield ending == b"-"
            break


def _occurrences(text: bytes, part: bytes) -> Iterator[int]:
    at = text.find(part)
    while at >= 0:
        yield at
        at = text.find(part, at + 1)


# --------------------------------------------------------------------------- JSON


def _json_tensor(body: bytes, dtype: np.dtype) -> TextTensor | None:
    head = _JSON_HEAD.match(body)
    if head is None:
        return None
    key = head.group(1)
    end = _rstrip(body, len(body))
    if key is not None:
        if body[end - 1 : end] != b"}":
            return None
        end = _rstrip(body, end - 1)
    span = _Span(body, head.end() - 1, end)
    if span.end - span.start < 2 or body[span.end - 1] != ord("]"):
        return None
    shape = _rectangular_shape(span)
    if shape is None:
        return None
    array = _parse_numbers(span, math.prod(shape), dtype)
    if array is None:
        return None
    array = array.reshape(shape)
    if key is None and len(shape) == 1:  # a list of numbers: conversion's one instance
        array = array.reshape(1, -1)
    return TextTensor(array, key == b"inputs")


def _rstrip(body: bytes, end: int) -> int:
    """Where ``body[:end]`` ends, JSON whitespace removed (without copying the body)."""
    while end > 0 and body[end - 1] in _WHITESPACE:
        end -= 1
    return end


def _rectangular_shape(span: _Span) -> tuple[int, ...] | None:
    """The shape of a nested list of numbers, from its skeleton: the brackets and commas with
    each run of number characters as one ``0``. A rectangular array's skeleton is the one its
    shape makes; anything else (ragged, empty, two numbers without a comma) is None."""
    skeleton = _skeleton(span)
    if skeleton is None:
        return None
    head = skeleton[: MAX_DIMS + 1]
    depth = len(head) - len(head.lstrip(b"["))
    if not 0 < depth <= MAX_DIMS:
        return None
    shape: list[int] = []
    child = b"0"
    for level in range(depth, 0, -1):  # innermost list first; level 1 is the outer list
        run = depth - level + 1  # "]" closing the first list of this level and those inside
        closing = skeleton.find(b"]" * run)
        if closing < 0:
            return None
        length = closing + run - (level - 1)  # from its "[" (at level - 1) to its "]"
        count, remainder = divmod(length - 1, len(child) + 1)
        if count < 1 or remainder:
            return None
        shape.insert(0, count)
        child = b"[" + (child + b",") * (count - 1) + child + b"]"  # no list of copies
    return tuple(shape) if child == skeleton else None


def _skeleton(span: _Span) -> bytes | None:
    parts = []
    in_number = False
    for chunk in span.pieces(SCAN_BYTES):
        if not _JSON_ALLOWED[chunk].all():
            return None
        number = _IS_NUMBER[chunk]
        first = number.copy()
        first[1:] &= ~number[:-1]
        first[0] &= not in_number
        in_number = bool(number[-1])
        keep = _IS_STRUCTURE[chunk] | first
        parts.append(np.where(first, np.uint8(_NUMBER_MARK), chunk)[keep].tobytes())
    return b"".join(parts)


def _parse_numbers(span: _Span, count: int, dtype: np.dtype) -> np.ndarray | None:
    """The numbers of a list checked rectangular, by orjson a piece at a time (cut at commas,
    brackets made spaces), each piece made an array as the model server's reader does."""
    out = np.empty(count, dtype)
    filled = 0
    start = span.start
    while start < span.end:
        cut = span.body.find(b",", min(start + PARSE_BYTES, span.end), span.end)
        cut = span.end if cut < 0 else cut
        piece = span.body[start:cut].translate(_BRACKETS_TO_SPACES)
        start = cut + 1
        try:
            values = orjson.loads(b"[" + piece + b"]")
        except orjson.JSONDecodeError:
            return None
        array = _numbers_as(values, dtype)
        if array is None or filled + len(array) > count:
            return None
        out[filled : filled + len(array)] = array
        filled += len(array)
    return out if filled == count else None


def _numbers_as(values: list, dtype: np.dtype) -> np.ndarray | None:
    """What ``json_tensors`` makes of a list of numbers: Python numbers cast by NumPy (a
    double to a float32 rounds once more), integer inputs given integers only."""
    objects = np.array(values, dtype=object)
    if dtype.kind == "i":
        if not all(type(value) is int for value in values):
            return None
        try:
            wide = objects.astype(np.int64)
        except OverflowError:
            return None
        return wide if _fits(wide, dtype) else None
    with np.errstate(over="ignore"):  # beyond a float32: infinity, on the REST path too
        return objects.astype(dtype)
