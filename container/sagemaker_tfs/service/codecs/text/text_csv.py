"""CSV bodies of numbers read into an input's array as the REST path (``text_rest``, then
the model server's JSON reader) would read them, for ``text_tensors`` (issues 36 and 53).

NumPy's C reader (``np.loadtxt``) reads a piece of whole lines at a time into the array,
without a Python object per number. Where the REST path reads a value otherwise than the
double of its text, the difference is recorded and applied (``-0``: see
``_unsign_integer_zeros``); an integer input given a point, an exponent or a value beyond
its range is refused with the REST path's 400 (``_integer_refusal``). Anything else (bytes
that are not numbers, CSV's ``NaN`` and ``inf`` among them, rows of several widths, a lone
``\r``, values beyond a double) is None: text_rest's or the model server's error.
"""

from __future__ import annotations

import contextlib
import io
import re
import warnings
from collections.abc import Iterator

import numpy as np

from sagemaker_tfs.service.codecs.text import text_refusals
from sagemaker_tfs.service.codecs.text.text_json import PARSE_BYTES
from sagemaker_tfs.service.codecs.text.text_numbers import (
    NUMBER_CHARS,
    fits,
    is_integral,
)
from sagemaker_tfs.service.codecs.text.text_refusals import Refusal
from sagemaker_tfs.service.codecs.text.text_scan import WHITESPACE

# Bytes checked and read at a time (boolean masks of this size; NumPy's reader holds ~6x a
# piece in doubles and its own buffers: 1 MB reads as fast as 4 MB, and holds a quarter).
SCAN_BYTES = 1 << 20
# One value a line: lines read by NumPy as one row of fields, this many bytes of them a row.
ROW_OF_FIELDS_BYTES = 256 << 10

_A_DIGIT = re.compile(rb"[0-9]")
_A_POINT_OR_EXPONENT = re.compile(rb"[.eE]")
_CSV_SEPARATOR = re.compile(rb"[,\n]")
_CSV_ALLOWED = np.zeros(256, dtype=bool)  # a table of the bytes a CSV body is read with
_CSV_ALLOWED[list(NUMBER_CHARS + b"," + WHITESPACE)] = True
# A CSV body with its blanks made separators and exponents lower case (_negative_zeros_in).
_ZEROS_DELETED = bytes.maketrans(WHITESPACE + b"E", b"," * len(WHITESPACE) + b"e")
_NEGATIVE_ZERO_ENDINGS = (b"-,", b"-e", b"-.,", b"-.e")


def read_csv(body: bytes, dtype: np.dtype) -> np.ndarray | Refusal | None:
    """The input's array the REST path reads from a CSV of numbers (see the module), its
    refusal of an integer input given another number, or None."""
    if not _only_bytes(body, _CSV_ALLOWED) or _A_DIGIT.search(body) is None:
        return None
    if body.count(b"\r") != body.count(b"\r\n"):  # a lone \r: one line to text_rest
        return None
    if not is_integral(dtype):
        return _csv_array(body, dtype)
    with_points = b"." in body or b"e" in body or b"E" in body
    array = None if with_points else _csv_array(body, dtype)
    return _integer_refusal(body, dtype) if array is None else array


def _csv_array(body: bytes, dtype: np.dtype) -> np.ndarray | None:
    """Rows of numbers -> (rows,) for one field per row (text_rest sends each row's value as
    an instance), else (rows, fields). Read a piece of whole lines at a time into the
    input's array, so that NumPy's reader (which grows its doubles as it goes) holds a
    piece's values, not the body's."""
    out: np.ndarray | None = None
    filled = 0
    for values in _pieces_values(body, dtype):
        if values is None:
            return None
        if out is None:
            out = np.empty((body.count(b"\n") + 1, values.shape[1]), dtype)
        with np.errstate(over="ignore"):  # beyond the dtype: infinity, on the REST path too
            out[filled : filled + len(values)] = values
        filled += len(values)
    if out is None:
        return None
    return out[:filled, 0] if out.shape[1] == 1 else out[:filled]


def _pieces_values(body: bytes, dtype: np.dtype) -> Iterator[np.ndarray | None]:
    """Each piece's rows (pieces of blank lines only are skipped), or a last None: a piece
    the REST path reads otherwise, or rows of another width than the first's."""
    width = None
    for piece in _whole_lines(body):
        values = _csv_values(piece, dtype)
        if values is not None and values.size == 0:  # blank lines only
            continue
        if values is not None and width not in (None, values.shape[1]):
            values = None
        yield values
        if values is None:
            return
        width = values.shape[1]


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
    numbers = np.dtype(np.int64 if is_integral(dtype) else np.float64)
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
    in place: text_rest copies ``-0`` as JSON's integer ``-0``, which the model server reads
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


# --------------------------------------------------------------------------- refusal


def _integer_refusal(body: bytes, dtype: np.dtype) -> Refusal | None:
    """The REST path's 400 for the first field (in row order) that an integer input refuses:
    one written with a point or an exponent, or beyond the range the REST path gives the
    input. None when the body is not a CSV of numbers the REST path reads (its own error
    comes first). Pieces without such a field are skipped by NumPy's reader; the piece that
    holds one is read a field at a time up to it."""
    read = False
    for values in _pieces_values(body, np.dtype(np.float64)):
        if values is None:
            return None
        read = True
    if not read:
        return None
    row = 0
    for piece in _whole_lines(body):
        pointed = _A_POINT_OR_EXPONENT.search(piece)
        at = len(piece) if pointed is None else piece.rfind(b"\n", 0, pointed.start()) + 1
        head, tail = piece[:at], piece[at:]
        values = _csv_values(head, dtype) if head else None
        if values is not None:  # the lines before any point, all accepted: NumPy's reader
            row += len(values)
        for text in (tail,) if values is not None else (head, tail):
            found = _first_refused(text, dtype, row)
            if isinstance(found, Refusal):
                return found
            row = found
    return None


def _first_refused(text: bytes, dtype: np.dtype, row: int) -> Refusal | int:
    """The refusal of the first field the input refuses in ``text`` (whole lines, the first
    being row ``row``), or the row after them."""
    for line in text.split(b"\n"):
        if not line.strip():
            continue
        for field in line.split(b","):
            value = _rest_value(field.strip())
            if not text_refusals.taken(value, dtype):
                return text_refusals.refusal(value, dtype, row)
        row += 1
    return row


def _rest_value(text: bytes) -> int | float:
    """A CSV number as the REST path gives it to the model server's reader (text_rest
    writes an integer without its sign or leading zeros; the reader makes one beyond an
    int64's or a uint64's range a double)."""
    if b"." in text or b"e" in text or b"E" in text:
        return float(text)
    integer = int(text)
    if len(str(abs(integer))) <= 20 and -(2**63) <= integer < 2**64:
        return integer
    return float(integer)
