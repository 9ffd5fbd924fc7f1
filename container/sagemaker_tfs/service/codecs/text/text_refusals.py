"""The REST path's refusal of a JSON body that gives an input a value of the wrong type, worded
as the model server's JSON reader words it, so that such a body is refused on the bounded
path instead of going the unbounded REST way only to be refused there (issue 53).

Every input refuses ``null``; an input other than bool refuses ``true`` and ``false``, a bool
input any number; an integer input refuses a value written with a point or an exponent
(``1.0``, ``1e2``), a NaN, an infinity, and an integer beyond its dtype's range. The REST
path reports the first such value of the first input it reads, in the order of the input's
elements: as ``Failed to process element: <i> [key: <name> ]of 'instances' list. Error:
INVALID_ARGUMENT: JSON Value: <value> Type: <Number|Null|True|False> is not of expected
type: <dtype>`` for rows (``i``: the row), and the last part alone for ``inputs``. The
inputs are read in the order of the signature's map, which the service's metadata and the
model server's SavedModel need not give alike, so a body that gives more than one input
such a value is left to the REST path; so is any body whose layout the bounded reader cannot
read (a ragged list: ``text_ragged``).

The values are found a piece at a time, one flag per value (a piece without a word and with
numbers the input takes is one NumPy cast); the value quoted is parsed again from its piece
alone.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import NamedTuple

import numpy as np

from sagemaker_tfs.service.codecs.text import text_json, text_mixed, text_numbers
from sagemaker_tfs.service.codecs.text.text_json import Document
from sagemaker_tfs.service.codecs.text.text_layout import Layout
from sagemaker_tfs.wire import tensors
from sagemaker_tfs.wire.tfs_json import rapidjson_double


class Refusal(NamedTuple):
    """A body the REST path refuses with 400 and this message."""

    message: str


def value_refusal(document: Document, names: list[str],
                  dtypes: np.dtype | Mapping[str, np.dtype]) -> Refusal | None:  # fmt: skip
    """The REST path's refusal of a body that gives one input a value it does not take, or
    None (no such value, or not a body this module words: see the module). ``dtypes``: the
    inputs' one dtype, or each input's by name."""
    read = text_json.pieces_and_layout(document, names)
    if read is None:
        return None
    pieces, layout = read
    if isinstance(dtypes, np.dtype):
        dtypes = dict.fromkeys(names, dtypes)
    refused = _refused_flags(pieces, layout, names, dtypes)
    if refused is None:
        return None
    by_input = layout.arrays(refused, names)
    refusing = [name for name in names if by_input[name].any()]
    if len(refusing) != 1:
        return None
    name = refusing[0]
    flags = by_input[name].reshape(-1)
    first = int(np.argmax(flags))
    value = _value_at(pieces, _position(layout, names, name, first))
    if document.key == "inputs":
        return refusal(value, dtypes[name], None)
    row = first // max(1, flags.size // len(by_input[name]))
    return refusal(value, dtypes[name], row, f" key: {name}" if layout.rows is not None else "")


def refusal(value: object, dtype: np.dtype, row: int | None, key: str = "") -> Refusal:
    """The REST path's 400 for ``value`` (``piece_values``' or a CSV field's) given to an input
    of ``dtype``: in ``row`` of the instances (``key``: `` key: <name>`` in named rows), or
    under ``inputs`` (None)."""
    shown, kind = _quoted(value)
    text = f"JSON Value: {shown} Type: {kind} is not of expected type: {_type_name(dtype)}"
    if row is None:
        return Refusal(text)
    return Refusal(
        f"Failed to process element: {row}{key} of 'instances' list. "
        f"Error: INVALID_ARGUMENT: {text}"
    )


def _type_name(dtype: np.dtype) -> str:
    """TF's short name of the dtype, as TF Serving's messages give it (``float``, ``int64``)."""
    return tensors.dtype_name(tensors.tf_dtype(dtype)).removeprefix("DT_").lower()


def _refused_flags(pieces: Iterable[bytes | None], layout: Layout, names: list[str],
                   dtypes: Mapping[str, np.dtype]) -> np.ndarray | None:  # fmt: skip
    """For each value in order, whether its input refuses it (inputs of several dtypes: each
    value judged by its input's); None when a piece is not values or the count is not the
    layout's."""
    several = len(set(dtypes.values())) > 1
    if several and not layout.order:
        return None
    owners = text_mixed.Owners(layout) if several else None
    member_dtypes = [dtypes[names[index]] for index in layout.order]
    dtype = dtypes[names[0]]
    flags = np.empty(layout.numbers, bool)
    filled = 0
    for piece in pieces:
        values = text_numbers.piece_values(piece, booleans=True)
        if values is None or filled + len(values) > layout.numbers:
            return None
        assert piece is not None  # piece_values reads no None
        refused: bool | np.ndarray = False
        if owners is not None:
            at = owners.members(filled, len(values))[0].tolist()
            pairs = zip(values, at, strict=True)
            refused = np.array([not taken(value, member_dtypes[m]) for value, m in pairs], bool)
        elif not _all_taken(piece, values, dtype):
            refused = _refused(values, dtype)
        flags[filled : filled + len(values)] = refused
        filled += len(values)
    return flags if filled == layout.numbers and flags.any() else None


def _all_taken(piece: bytes, values: list, dtype: np.dtype) -> bool:
    """Whether the input takes every value of the piece, by C loops (the usual piece)."""
    if dtype.kind != "b" and any(letter in piece for letter in text_numbers.WORD_CHARS):
        return False  # a true, false or null
    return dtype.kind == "f" or text_numbers.numbers_as(values, dtype) is not None


def _refused(values: list, dtype: np.dtype) -> np.ndarray:
    return np.fromiter((not taken(value, dtype) for value in values), bool, len(values))


def taken(value: object, dtype: np.dtype) -> bool:
    """Whether the REST path's reader gives an input of ``dtype`` this value (``piece_values``'
    Python value: the non-finite words are strings)."""
    if dtype.kind == "b":
        return type(value) is bool
    if value is None or type(value) is bool:
        return False
    if dtype.kind == "f":
        return True
    low, high = text_numbers.REST_INT_RANGES[dtype]
    return type(value) is int and low <= value <= high


def _position(layout: Layout, names: list[str], name: str, index: int) -> int:
    """Where element ``index`` of input ``name`` is among the body's numbers."""
    if not layout.order:
        return index
    sizes = [math.prod(shape) for shape in layout.shapes]
    member = layout.order.index(names.index(name))
    row, within = divmod(index, sizes[member])
    return row * sum(sizes) + sum(sizes[:member]) + within


def _value_at(pieces: Iterable[bytes | None], position: int) -> object:
    """The value at ``position``, as ``piece_values`` reads it."""
    seen = 0
    for piece in pieces:
        values = text_numbers.piece_values(piece, booleans=True) or []
        if position < seen + len(values):
            return values[position - seen]
        seen += len(values)
    raise AssertionError("a position beyond the numbers counted")


_WORDS = {None: ("null", "Null"), True: ("true", "True"), False: ("false", "False")}


def _quoted(value: object) -> tuple[str, str]:
    """A value's text and JSON type as TF Serving quotes them: rapidjson's text of its double,
    an integer as it is, the words as they are."""
    if value is None or isinstance(value, bool):
        return _WORDS[value]
    if isinstance(value, int):
        return str(value), "Number"
    assert isinstance(value, (float, str))  # a number, or a non-finite word's string
    return rapidjson_double(float(value)), "Number"
