"""The REST path's 400 for a ragged list of numbers, worded as the model server's JSON reader
words it, so that such a body is refused on the bounded path instead of going the unbounded
REST way only to be refused there (issue 53).

The reader walks a nested list depth first and stops at the first of: a list at the level
of the values or below (``Encountered list at level: <L> when expecting a value``), a list
of another size than the first list of its level (``Encountered list at unexpected size:
<n> at level: <L> expected size: <m>``), a value above the level of the first value, or at
another level (``Encountered scalar element at level: <L> expecting a list``). Here the same
walk is done on the body's skeleton (``text_json``: a ``0`` per number) with NumPy, over
its list openings and numbers in the order they come, without a Python object per number.

A JSON document giving one input a list (under ``instances`` or ``inputs``, or bare, which
text_rest wraps into one instance unless it is a list of lists) is worded here, and so are
named inputs, in rows (``instances``, JSON lines: each input's values of every row walked as
one list) or columns (each input's value walked alone), where exactly one input is ragged
(the REST path reads them in its signature map's order) and every row names every input
once; always when the inputs all accept their numbers. Anything else (empty lists, numbers
an input refuses, more than 64 levels) is left to the REST path.
"""

from __future__ import annotations

import re

import numpy as np

from sagemaker_tfs.service.codecs.text import text_json, text_numbers
from sagemaker_tfs.service.codecs.text.text_json import Document, Pieces
from sagemaker_tfs.service.codecs.text.text_layout import MAX_DIMS
from sagemaker_tfs.service.codecs.text.text_refusals import Refusal

_OPEN, _CLOSE, _COMMA, _NUMBER = b"[],0"
_A_NAME = re.compile(rb"([\x80-\xff])")  # text_json's marker bytes, one per input name
# What may follow each byte of a well-formed skeleton of nested lists.
_FOLLOWERS = {_OPEN: b"[0]", _NUMBER: b",]", _COMMA: b"[0", _CLOSE: b",]"}


def ragged_refusal(document: Document, names: list[str], dtype: np.dtype) -> Refusal | None:
    """The REST path's refusal of a ragged list given to the one input, or None (see the
    module)."""
    read = text_json.pieces_and_skeleton(document, names)
    if read is None:
        return None
    pieces, skeleton = read[0], bytes(read[1])  # its parts are keys below: bytes
    del read
    if b"{" in skeleton:
        return _named_refusal(pieces, skeleton, len(names), dtype)
    if len(names) != 1 or document.lines:
        return None
    depth = _depth_if_well_formed(skeleton)
    if depth is None or not _numbers_accepted(pieces, skeleton.count(b"0"), dtype):
        return None
    if document.key is None and not _list_of_lists(skeleton, depth):
        skeleton = b"[" + skeleton + b"]"  # text_rest's one instance
        depth = np.concatenate(([1], depth + 1, [0])).astype(np.int8)
    message = _walk_error(np.frombuffer(skeleton, np.uint8), depth)
    return None if message is None else Refusal(message)


def _named_refusal(pieces: Pieces, skeleton: bytes, inputs: int,
                   dtype: np.dtype) -> Refusal | None:  # fmt: skip
    """The refusal of named inputs of which exactly one is ragged (see the module)."""
    values = _values_by_input(skeleton, inputs)
    if values is None or not _numbers_accepted(pieces, skeleton.count(b"0"), dtype):
        return None
    errors = [_list_error(value) for value in values]
    found = [error for error in errors if error is not None]
    return Refusal(found[0]) if len(found) == 1 else None


def _values_by_input(skeleton: bytes, inputs: int) -> list[bytes] | None:
    """Each input's value as one skeleton: in rows, its values of every row in a list; in
    columns, its value. None unless every row (or the one object) names every input once,
    in the same order."""
    if skeleton.startswith(b"[{") and skeleton.endswith(b"}]"):
        rows, in_rows = skeleton[2:-2].split(b"},{"), True
    elif skeleton.startswith(b"{") and skeleton.endswith(b"}"):
        rows, in_rows = [skeleton[1:-1]], False
    else:
        return None
    columns: list[list[bytes]] | None = None
    for row in rows:
        parts = _A_NAME.split(row)
        names, members = parts[1::2], parts[2::2]
        if parts[0] or len(names) != inputs or len(set(names)) != inputs:
            return None
        members = [member.removesuffix(b",") for member in members]
        if not all(members) or any(b"{" in member or b"}" in member for member in members):
            return None
        if columns is None:
            order, columns = names, [[] for _ in names]
        if names != order:
            return None
        for column, member in zip(columns, members, strict=True):
            column.append(member)
    assert columns is not None
    if not in_rows:
        return [column[0] for column in columns]
    return [b"[" + b",".join(column) + b"]" for column in columns]


def _list_error(value: bytes) -> str | None:
    """The REST path's walk's first error on one input's value, if any."""
    if value == b"0":
        return None
    depth = _depth_if_well_formed(value)
    return None if depth is None else _walk_error(np.frombuffer(value, np.uint8), depth)


def _depth_if_well_formed(skeleton: bytes) -> np.ndarray | None:
    """The depth after each byte (int8), for nested lists of numbers closed once at the end,
    at most ``MAX_DIMS - 1`` deep, every byte followed by one that may follow it; else None."""
    chars = np.frombuffer(skeleton, np.uint8)
    if chars.size < 2 or chars[0] != _OPEN or chars[-1] != _CLOSE:
        return None
    before, after = chars[:-1], chars[1:]
    for char, followers in _FOLLOWERS.items():
        at = before == char
        for other in set(_FOLLOWERS) - set(followers):
            if (at & (after == np.uint8(other))).any():
                return None
    step = (chars == _OPEN).view(np.int8) - (chars == _CLOSE).view(np.int8)
    # int16: a depth past 32767 wraps to a negative one, which is refused below
    depth = np.cumsum(step, dtype=np.int16)
    if depth[-1] != 0 or depth[:-1].min() <= 0 or depth.max() >= MAX_DIMS:
        return None
    return depth.astype(np.int8)


def _numbers_accepted(pieces: Pieces, count: int, dtype: np.dtype) -> bool:
    """Whether every number is one the input takes (else the REST path's first error may be
    a value's), and there are ``count`` of them."""
    seen = 0
    for piece in pieces:
        values = text_numbers.piece_values(piece, booleans=dtype.kind == "b")
        if values is None:
            return False
        if values and text_numbers.numbers_as(values, dtype) is None:
            return False
        seen += len(values)
    return seen == count


def _list_of_lists(skeleton: bytes, depth: np.ndarray) -> bool:
    """Whether every member of the outer list is a list (text_rest sends it as the
    instances)."""
    chars = np.frombuffer(skeleton, np.uint8)
    is_list = chars == _OPEN
    members = (is_list | (chars == _NUMBER)) & (depth - is_list == 1)
    return bool(is_list[members].all())


def _walk_error(chars: np.ndarray, depth: np.ndarray) -> str | None:
    """The first error of the REST path's walk over the skeleton, or None (no error, or an
    empty list: left to the REST path)."""
    is_list = chars == _OPEN
    events = np.flatnonzero(is_list | (chars == _NUMBER)).astype(np.int32)  # in order
    levels = depth[events] - is_list[events]  # the outer list's level is 0
    lists = is_list[events]
    del is_list
    sizes = _list_sizes(levels, lists)
    if sizes is None:
        return None
    first_value = int(np.argmin(lists))
    value_level = int(levels[first_value])
    too_deep = lists & (levels >= value_level)
    too_deep[: first_value + 1] = False
    errors = [
        (at, f"Encountered list at level: {levels[at]} when expecting a value")
        for at in _first(too_deep)
    ]
    errors += [
        (at, f"Encountered scalar element at level: {levels[at]} expecting a list")
        for at in _first(~lists & (levels != value_level))
    ]
    if lists[:first_value].any() and value_level <= levels[:first_value][lists[:first_value]].max():
        errors.append((first_value, f"Encountered scalar element at level: {value_level} "
                                    "expecting a list"))  # fmt: skip
    errors += _size_errors(levels, lists & ~too_deep, sizes)
    return min(errors)[1] if errors else None


def _first(mask: np.ndarray) -> list[int]:
    """The index of the first true, if any."""
    found = np.flatnonzero(mask)
    return [int(found[0])] if found.size else []


def _list_sizes(levels: np.ndarray, lists: np.ndarray) -> np.ndarray | None:
    """Each event's list size (0 for a number): its members are the events one level down
    after it and before the next list of its level. None for an empty list."""
    sizes = np.zeros(levels.size, np.int32)
    for level in range(int(levels.max())):
        owners = np.flatnonzero(lists & (levels == level))
        members = np.flatnonzero(levels == level + 1)
        counts = np.bincount(np.searchsorted(owners, members) - 1, minlength=owners.size)
        if not counts.all():
            return None
        sizes[owners] = counts
    if (lists & (levels == levels.max())).any():  # a list holding nothing
        return None
    return sizes


def _size_errors(levels: np.ndarray, lists: np.ndarray,
                 sizes: np.ndarray) -> list[tuple[int, str]]:  # fmt: skip
    """Per level, the first of ``lists`` of another size than the first list of the level
    (the one the reader's shape takes)."""
    errors = []
    for level in range(int(levels.max()) + 1):
        at_level = np.flatnonzero(lists & (levels == level))
        if not at_level.size:
            continue
        expected = sizes[at_level[0]]
        other = at_level[sizes[at_level] != expected]
        if other.size:
            at = int(other[0])
            errors.append((at, f"Encountered list at unexpected size: {sizes[at]} at level: "
                               f"{level} expected size: {expected}"))  # fmt: skip
    return errors
