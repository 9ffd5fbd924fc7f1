"""The numbers of a JSON or CSV body as the REST path's reader takes them: which characters
spell a number (``NaN``, ``Infinity`` and ``-Infinity`` among them), a piece of a body's
numbers parsed by orjson, and values cast to an input's dtype with TF Serving's ranges
(``text_json`` cuts a body into pieces; ``text_csv`` reads its fields).
"""

from __future__ import annotations

import array

import numpy as np
import orjson

NUMBER_CHARS = b"0123456789.eE+-"
# The letters of NaN, Infinity and -Infinity: JSON number runs in the skeleton, as the REST
# path's JSON reader takes them (for float inputs; an integer input refuses them).
NON_FINITE_CHARS = b"NaIinfty"
# The letters of true, false and null besides those: in runs too, which only a bool input
# reads (``piece_values``; a null goes the REST way).
WORD_CHARS = b"ruls"
# Each non-finite word as a string orjson reads and NumPy casts to its value; the longer
# word first, so that ``-Infinity`` is not read as ``-`` then ``Infinity``.
_NON_FINITE_WORDS = ((b"-Infinity", b'"-inf"'), (b"Infinity", b'"inf"'), (b"NaN", b'"nan"'))
_WORD_LETTERS = [bytes((letter,)) for letter in WORD_CHARS]
# Brackets, braces and the skeleton's name markers (``text_json``: the only bytes beyond
# ASCII a piece holds) as blanks, between the numbers.
_TO_SPACES = bytes.maketrans(b"[]{}" + bytes(range(0x80, 0x100)), b" " * (4 + 0x80))


def piece_values(piece: bytes | None, booleans: bool = False, flat: bool = False) -> list | None:
    """A piece's numbers (Python's, by orjson), or None: not a piece of numbers. With
    ``booleans``, its values whatever they are (a bool input's reader checks them); without,
    a piece with a letter of true, false or null is None too. ``flat``: the piece has no
    brackets, braces or markers to make spaces (``_is_flat``)."""
    if piece is None:
        return None
    if not booleans and any(letter in piece for letter in _WORD_LETTERS):
        return None
    try:
        spaced = piece if flat else piece.translate(_TO_SPACES)
        return orjson.loads(b"[" + _non_finite_as_strings(spaced) + b"]")
    except orjson.JSONDecodeError:
        return None


def _non_finite_as_strings(piece: bytes) -> bytes:
    """``NaN``, ``Infinity`` and ``-Infinity`` (which orjson refuses) as the strings ``"nan"``,
    ``"inf"`` and ``"-inf"``, which NumPy casts to the values the REST path's reader gives
    (a NaN without a sign bit). Any other spelling (``-NaN``, ``Inf``, ``nan``, a word against
    a digit) stays unreadable to orjson: the body goes the REST way, whose reader refuses it
    too. Pieces without a capital, the usual ones, are returned as they are."""
    if b"N" not in piece and b"I" not in piece:
        return piece
    for word, string in _NON_FINITE_WORDS:
        piece = piece.replace(word, string)
    return piece


# The integers the REST path's reader gives each integer input (TF Serving's: an int8 or
# an int16 takes an int32's range, an unsigned input a uint32's), cast to it with wrapping.
_INT32_RANGE, _UINT32_RANGE = (-(2**31), 2**31 - 1), (0, 2**32 - 1)
REST_INT_RANGES = {
    np.dtype(np.int8): _INT32_RANGE,
    np.dtype(np.int16): _INT32_RANGE,
    np.dtype(np.int32): _INT32_RANGE,
    np.dtype(np.int64): (-(2**63), 2**63 - 1),
    np.dtype(np.uint8): _UINT32_RANGE,
    np.dtype(np.uint16): _UINT32_RANGE,
    np.dtype(np.uint32): _UINT32_RANGE,
    np.dtype(np.uint64): (0, 2**64 - 1),
}


def is_integral(dtype: np.dtype) -> bool:
    return dtype.kind in "iu"


def numbers_as(values: list, dtype: np.dtype) -> np.ndarray | None:
    """What ``build_tensor`` makes of a list of values: a bool input's booleans; numbers cast
    by NumPy (a double to a float32 or float16 rounds once more); integer inputs given only
    integers in ``REST_INT_RANGES``, wrapped into the dtype; ``_non_finite_as_strings``'s."""
    if dtype.kind == "b":  # true and false only, as the REST path's reader takes them
        return np.array(values, bool) if all(type(value) is bool for value in values) else None
    if is_integral(dtype):
        if not all(type(value) is int for value in values):
            return None
        try:
            wide_type = np.uint64 if dtype == np.uint64 else np.int64
            wide = np.array(values, dtype=object).astype(wide_type)
        except OverflowError:
            return None
        return wide.astype(dtype) if fits(wide, dtype) else None
    with np.errstate(over="ignore"):  # beyond the dtype: infinity, on the REST path too
        return _doubles(values).astype(dtype)


def _doubles(values: list) -> np.ndarray:
    """Python numbers each made a double (as NumPy casts objects) by the array module's C
    loop (~25% faster than NumPy's); the strings of ``_non_finite_as_strings`` by NumPy."""
    try:
        return np.frombuffer(array.array("d", values), np.float64)
    except TypeError:  # a string among them
        return np.array(values, np.float64)


def fits(values: np.ndarray, dtype: np.dtype) -> bool:
    """Values the REST path gives the same input: finite, integers in ``REST_INT_RANGES``."""
    if values.size == 0:
        return False
    if is_integral(dtype):
        low, high = REST_INT_RANGES[dtype]
        return bool(low <= values.min() and values.max() <= high)
    return bool(np.isfinite(values).all())
