"""JSON, JSON lines and CSV bodies read straight into the inputs' arrays, for the service to
send over gRPC rather than as JSON text that the model server parses again (issues 36, 53):
the one reader of the bounded path, whose entry point is :func:`read_text_request`.

Only bodies that the REST path (``conversion.convert``, then the model server's JSON reader)
would read into exactly the same arrays are read here, without a Python object per number:

- CSV of numbers: NumPy's C reader (``np.loadtxt``) over the whole buffer;
- JSON and JSON lines (``text_json``): a rectangular list of numbers (``NaN``,
  ``Infinity`` and ``-Infinity`` among them for float inputs), or named inputs in rows or
  columns, under any signature (``signature_name``), with any number of inputs.

Anything else returns None and the caller converts the body as before, so that its answer
and its errors are the REST path's: strings or other non-number bytes (CSV's ``NaN`` is a
string to conversion), ragged or empty lists, a NaN or an infinity spelt otherwise than
JSON's words, an integer input given a fraction or a value out of its range in CSV (or in
JSON when two inputs are given one), and inputs of other dtypes. A JSON body that gives
one integer input such a value is refused as the REST path refuses it (``text_refusals``:
a 400 in its words).

Values are parsed as doubles and then cast, as the REST path does (a float32 is rounded
from the double, not from the text). Where the REST path reads a value otherwise than the
double of its text, the difference is recorded and applied (CSV's ``-0``: see
``_unsign_integer_zeros``), so that no single value sends a body the unbounded way.
"""

from __future__ import annotations

import contextlib
import io
import re
import warnings
from collections.abc import Iterator, Mapping
from typing import NamedTuple

import numpy as np

from sagemaker_tfs.service import text_json, text_refusals
from sagemaker_tfs.service.content_types import CSV, JSON, JSON_LINES_TYPES
from sagemaker_tfs.service.text_json import PARSE_BYTES, WHITESPACE, byte_table, fits
from sagemaker_tfs.service.text_refusals import Refusal
from sagemaker_tfs.wire import tensors
from sagemaker_tfs.wire.signatures import Signature, TensorSpec

DEFAULT_SIGNATURE = "serving_default"
# The input dtypes read here.
_READ_TYPES = {
    tensors.tf_dtype(np.dtype(dtype)): np.dtype(dtype)
    for dtype in (np.float32, np.float64, np.int32, np.int64)
}
SCAN_BYTES = 4 << 20  # bytes checked at a time (boolean masks of this size)
# One value a line: lines read by NumPy as one row of fields, this many bytes of them a row.
ROW_OF_FIELDS_BYTES = 256 << 10

_A_DIGIT = re.compile(rb"[0-9]")
_CSV_SEPARATOR = re.compile(rb"[,\n]")
_CSV_ALLOWED = byte_table(text_json.NUMBER_CHARS + b"," + WHITESPACE)
# A CSV body with its blanks made separators and exponents lower case (_negative_zeros_in).
_ZEROS_DELETED = bytes.maketrans(WHITESPACE + b"E", b"," * len(WHITESPACE) + b"e")
_NEGATIVE_ZERO_ENDINGS = (b"-,", b"-e", b"-.,", b"-.e")


class TextRequest(NamedTuple):
    """The inputs' arrays by name, whether the request was columnar (``inputs``: answered as
    ``{"outputs": ...}``) rather than rows (``{"predictions": ...}``), and its signature."""

    arrays: dict[str, np.ndarray]
    columnar: bool
    signature: Signature


def read_text_request(
    kind: str, body: bytes, signatures: Mapping[str, Signature]
) -> TextRequest | Refusal | None:
    """The arrays the REST path would feed the model for this body, its refusal of a JSON
    body that gives an integer input another number (``text_refusals``), or None (see the
    module). ``signatures``: the model's, by name."""
    if kind == CSV:
        return _csv_request(body, signatures.get(DEFAULT_SIGNATURE))
    if kind != JSON and kind not in JSON_LINES_TYPES:
        return None
    document = text_json.find_document(body, lines=kind != JSON)
    if document is None:
        return None
    signature = signatures.get(document.signature_name or DEFAULT_SIGNATURE)
    if signature is None or not signature.inputs:
        return None
    names = list(signature.inputs)
    dtype = text_json.same_dtype({name: _dtype(spec) for name, spec in signature.inputs.items()})
    if dtype is None:
        return None
    read = text_json.read_document(document, names, dtype)
    if read is None:
        return text_refusals.integer_refusal(document, names, dtype)
    return TextRequest(read.arrays, read.columnar, signature)


def _dtype(spec: TensorSpec) -> np.dtype | None:
    return _READ_TYPES.get(spec.dtype)


def _csv_request(body: bytes, signature: Signature | None) -> TextRequest | None:
    if signature is None or len(signature.inputs) != 1:
        return None
    ((name, spec),) = signature.inputs.items()
    dtype = _dtype(spec)
    array = None if dtype is None else _csv_array(body, dtype)
    return None if array is None else TextRequest({name: array}, False, signature)


# --------------------------------------------------------------------------- CSV


def _csv_array(body: bytes, dtype: np.dtype) -> np.ndarray | None:
    """Rows of numbers -> (rows,) for one field per row (conversion sends each row's value as
    an instance), else (rows, fields). Read a piece of whole lines at a time into the
    input's array, so that NumPy's reader (which grows its doubles as it goes) holds a
    piece's values, not the body's."""
    integral = dtype.kind == "i"
    if not _only_bytes(body, _CSV_ALLOWED) or _A_DIGIT.search(body) is None:
        return None
    if body.count(b"\r") != body.count(b"\r\n"):  # a lone \r: one line to conversion
        return None
    if integral and (b"." in body or b"e" in body or b"E" in body):
        return None
    out: np.ndarray | None = None
    filled = 0
    for piece in _whole_lines(body):
        values = _csv_values(piece, dtype)
        if values is None:
            return None
        if values.size == 0:  # blank lines only
            continue
        if out is None:
            out = np.empty((body.count(b"\n") + 1, values.shape[1]), dtype)
        elif values.shape[1] != out.shape[1]:
            return None
        with np.errstate(over="ignore"):  # beyond a float32: infinity, on the REST path too
            out[filled : filled + len(values)] = values
        filled += len(values)
    if out is None:
        return None
    return out[:filled, 0] if out.shape[1] == 1 else out[:filled]


def _whole_lines(body: bytes, size: int | None = None) -> Iterator[bytes]:
    """The body in pieces of about ``size`` (``SCAN_BYTES``), each ending at a line's end."""
    size = SCAN_BYTES if size is None else size
    start = 0
    while start < len(body):
        cut = body.find(b"\n", min(start + size, len(body)))
        end = len(body) if cut < 0 else cut + 1
        yield body[start:end]
        start = end


def _csv_values(piece: bytes, dtype: np.dtype) -> np.ndarray | None:
    """A piece's rows as NumPy reads them (int64 or doubles), as the REST path has them (see
    ``_unsign_integer_zeros``); None where the REST path would read them otherwise."""
    numbers = np.dtype(np.int64 if dtype.kind == "i" else np.float64)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # blank lines: no data
            values = _rows_read(piece, numbers)
    except (ValueError, OverflowError):
        return None
    if values.size and not (fits(values, dtype) and _unsign_integer_zeros(piece, values)):
        return None
    return values


def _rows_read(piece: bytes, numbers: np.dtype) -> np.ndarray:
    """NumPy's reading of a piece's rows. A piece of one field a line is read as one row of
    its lines' fields (NumPy's reader costs over twice as much a line as a field): the same
    fields, so the same values, or an error (a blank line is an empty field), and then the
    piece is read a line at a time."""
    if b"," not in piece:
        with contextlib.suppress(ValueError, OverflowError):
            rows = _whole_lines(piece, ROW_OF_FIELDS_BYTES)  # its reader's own memory: ~10x
            fields = [_loadtxt(_lines_as_fields(row), numbers).reshape(-1) for row in rows]
            return np.concatenate(fields).reshape(-1, 1)
    return _loadtxt(piece, numbers)


def _loadtxt(text: bytes, numbers: np.dtype) -> np.ndarray:
    return np.loadtxt(io.BytesIO(text), delimiter=",", comments=None, ndmin=2, dtype=numbers)


def _lines_as_fields(piece: bytes) -> bytes:
    """The lines of ``piece`` (each ending with a line end but maybe the last) as fields."""
    end = len(piece) - (2 if piece.endswith(b"\r\n") else 1 if piece.endswith(b"\n") else 0)
    return piece[:end].replace(b"\r\n", b",").replace(b"\n", b",")


def _only_bytes(body: bytes, allowed: np.ndarray) -> bool:
    return all(
        allowed[np.frombuffer(body, np.uint8, min(SCAN_BYTES, len(body) - offset), offset)].all()
        for offset in range(0, len(body), SCAN_BYTES)
    )


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
