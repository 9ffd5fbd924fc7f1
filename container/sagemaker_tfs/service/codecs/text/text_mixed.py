"""Named inputs of different dtypes (a float feature beside an integer one) read into their
arrays as the REST path reads them, for ``text_tensors`` (issue 53).

``text_json`` finds the document's layout once (which number belongs to which input); the
numbers are then parsed a piece at a time (orjson, as ``text_json`` does), and each piece's
numbers are cast by the dtype of the input that owns them (``text_numbers.numbers_as``: doubles
cast to float inputs, integers checked against an integer input's range and wrapped into
it, ``true``/``false`` for bool inputs) straight into that input's array, at the place the
layout gives them (no array of all the numbers). A value an input does not take, or
anything the single-dtype reader would not read, is None: the caller has ``text_refusals``
word the REST path's 400 (``Owners`` tells it each value's input, whose dtype judges it), else
writes the REST request, whose answer and errors are the REST path's.
"""

from __future__ import annotations

import numpy as np

from sagemaker_tfs.service.codecs.text import text_json, text_numbers
from sagemaker_tfs.service.codecs.text.text_json import Document, JsonInputs
from sagemaker_tfs.service.codecs.text.text_layout import Layout

_WORD_LETTERS = text_numbers.WORD_CHARS  # of true, false and null


def read_mixed(document: Document, names: list[str],
               dtypes: dict[str, np.dtype]) -> JsonInputs | None:  # fmt: skip
    """The arrays of inputs ``names`` of ``dtypes`` (by name; more than one dtype) that the
    REST path reads from the document, or None (see the module)."""
    read = text_json.pieces_and_layout(document, names)
    if read is None:
        return None
    pieces, layout = read
    if not layout.order:  # a plain list: one input, one dtype
        return None
    member_dtypes = [dtypes[names[index]] for index in layout.order]
    owners = Owners(layout)
    flat = [np.empty((layout.rows or 1) * size, dtype)
            for size, dtype in zip(owners.sizes, member_dtypes, strict=True)]  # fmt: skip
    booleans = any(dtype.kind == "b" for dtype in member_dtypes)
    filled = 0
    for piece in pieces:
        values = text_numbers.piece_values(piece, booleans=booleans)
        if values is None or filled + len(values) > layout.numbers:
            return None
        if not values:
            continue
        assert piece is not None  # piece_values reads no None
        words = any(letter in piece for letter in _WORD_LETTERS)
        if not _cast_piece(values, owners, filled, flat, words):
            return None
        filled += len(values)
    if filled != layout.numbers:
        return None
    rows = (layout.rows,) if layout.rows else ()
    arrays = {
        names[index]: numbers.reshape(rows + shape)
        for index, numbers, shape in zip(layout.order, flat, layout.shapes, strict=True)
    }
    return JsonInputs(arrays, document.key == "inputs")  # fmt: skip


class Owners:
    """Where each number of the layout goes: a row's numbers are its members' blocks one
    after another."""

    def __init__(self, layout: Layout) -> None:
        self.sizes = np.array([int(np.prod(shape)) for shape in layout.shapes], np.int64)
        self.ends = np.cumsum(self.sizes)
        self.row_size = int(self.ends[-1])

    def members(self, start: int, count: int) -> tuple[np.ndarray, np.ndarray]:
        """The member (in ``layout.order``) of numbers ``start`` to ``start + count`` and
        each one's index in its member's flat array."""
        row, within = np.divmod(np.arange(start, start + count, dtype=np.int64), self.row_size)
        member = np.searchsorted(self.ends, within, side="right")
        size = self.sizes[member]
        return member, row * size + within - (self.ends[member] - size)


def _cast_piece(values: list, owners: Owners, filled: int, flat: list[np.ndarray],
                words: bool) -> bool:  # fmt: skip
    """Each of the piece's values cast by its input's dtype into that input's flat array;
    False for a value the input does not take."""
    objects = np.empty(len(values), object)
    objects[:] = values
    member, index = owners.members(filled, len(values))
    for number, numbers in enumerate(flat):
        at = np.flatnonzero(member == number)
        if not at.size:
            continue
        mine = objects[at]
        kind = numbers.dtype
        if words and kind.kind != "b" and any(v is None or type(v) is bool for v in mine):
            return False  # a word given a number's input: the REST path's error
        cast = text_numbers.numbers_as(list(mine), kind)
        if cast is None:
            return False
        numbers[index[at]] = cast
    return True
