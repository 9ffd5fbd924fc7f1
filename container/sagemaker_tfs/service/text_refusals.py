"""The REST path's refusal of a JSON body that gives an integer input another number, worded
as the model server's JSON reader words it, so that such a body is refused on the bounded
path instead of going the unbounded REST way only to be refused there (issue 53).

An integer input refuses a value written with a point or an exponent (``1.0``, ``1e2``), a
NaN, an infinity, and an integer beyond its dtype's range. The REST path reports the first
such value of the first input it reads, in the order of the input's elements: as
``Failed to process element: <i> [key: <name> ]of 'instances' list. Error:
INVALID_ARGUMENT: JSON Value: <value> Type: Number is not of expected type: <dtype>`` for
rows (``i``: the row), and the last part alone for ``inputs``. The inputs are read in the
order of the signature's map, which the service's metadata and the model server's
SavedModel need not give alike, so a body that gives more than one input such a value is
left to the REST path; so is any body whose numbers the bounded reader cannot read.

The values are found a piece at a time, one flag per number; the value quoted is parsed
again from its piece alone.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import NamedTuple

import numpy as np

from sagemaker_tfs.service import text_json
from sagemaker_tfs.service.text_json import Document, Layout
from sagemaker_tfs.wire.tfs_json import rapidjson_double


class Refusal(NamedTuple):
    """A body the REST path refuses with 400 and this message."""

    message: str


def integer_refusal(document: Document, names: list[str], dtype: np.dtype) -> Refusal | None:
    """The REST path's refusal of a body that gives one integer input another number, or
    None (no such value, or not a body this module words: see the module)."""
    if not text_json.is_integral(
        dtype
    ):  # before the skeleton's pass: a float input has no such refusal
        return None
    read = text_json.pieces_and_layout(document, names)
    if read is None:
        return None
    pieces, layout = read
    refused = _refused_flags(pieces, layout.numbers, dtype)
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
    text = f"JSON Value: {value} Type: Number is not of expected type: {dtype.name}"
    if document.key == "inputs":
        return Refusal(text)
    row = first // max(1, flags.size // len(by_input[name]))
    key = f" key: {name}" if layout.rows is not None else ""
    return Refusal(
        f"Failed to process element: {row}{key} of 'instances' list. "
        f"Error: INVALID_ARGUMENT: {text}"
    )


def _refused_flags(pieces: Iterable[bytes | None], count: int,
                   dtype: np.dtype) -> np.ndarray | None:  # fmt: skip
    """For each number in order, whether the input refuses it; None when a piece is not
    numbers or the count is not the layout's."""
    flags = np.empty(count, bool)
    filled = 0
    for piece in pieces:
        values = text_json.piece_values(piece)
        if values is None or filled + len(values) > count:
            return None
        accepted = text_json.numbers_as(values, dtype) is not None  # the usual piece: C loops
        flags[filled : filled + len(values)] = False if accepted else _refused(values, dtype)
        filled += len(values)
    return flags if filled == count and flags.any() else None


def _refused(values: list, dtype: np.dtype) -> np.ndarray:
    low, high = text_json.REST_INT_RANGES[dtype]
    return np.fromiter(
        (type(value) is not int or not low <= value <= high for value in values),
        bool,
        len(values),
    )


def _position(layout: Layout, names: list[str], name: str, index: int) -> int:
    """Where element ``index`` of input ``name`` is among the body's numbers."""
    if not layout.order:
        return index
    sizes = [math.prod(shape) for shape in layout.shapes]
    member = layout.order.index(names.index(name))
    row, within = divmod(index, sizes[member])
    return row * sum(sizes) + sum(sizes[:member]) + within


def _value_at(pieces: Iterable[bytes | None], position: int) -> str:
    """The number at ``position`` as TF Serving quotes it (rapidjson's text of its double,
    an integer as it is)."""
    seen = 0
    for piece in pieces:
        values = text_json.piece_values(piece) or []
        if position < seen + len(values):
            value = values[position - seen]
            return str(value) if type(value) is int else rapidjson_double(float(value))
        seen += len(values)
    raise AssertionError("a position beyond the numbers counted")
