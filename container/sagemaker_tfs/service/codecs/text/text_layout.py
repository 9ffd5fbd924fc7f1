"""The layout of a JSON document's numbers, read from its skeleton (``text_json``: a ``0`` per
number, brackets, braces, commas and a marker byte per input name): which of the numbers, in
order, make which input, and in what shape (issues 36 and 53).

A rectangular list, or rows that repeat the first row's layout, have exactly the skeleton
their shapes make. That skeleton is as long as the one read (two bytes a number), so it is
never built whole: the one read is compared with the repeated unit (the first row, the
outer list's first member) a block of ``REPEAT_BYTES`` at a time, and values inside a
skeleton are read where they are, by their bounds, not cut out of it.
"""

from __future__ import annotations

import math
import re
from typing import NamedTuple

import numpy as np

MAX_DIMS = 64  # the model server's limit on a JSON tensor's dimensions
MAX_INPUTS = 64  # names get one marker byte each, from 0x80 (bytes never outside a string)
MARKERS = bytes(range(0x80, 0x80 + MAX_INPUTS))
_A_MARKER = re.compile(b"[" + re.escape(MARKERS) + b"]")
REPEAT_BYTES = 1 << 16  # a skeleton is compared with its repeated unit this much at a time

Skeleton = bytes | bytearray


class Layout(NamedTuple):
    """How the numbers, in order, make the inputs: rows of one block per input (the block's
    shape after the row's), ``rows`` None for one object (columns) or a plain list."""

    rows: int | None
    shapes: list[tuple[int, ...]]  # each input's, in the order the names come in a row
    order: list[int]  # the index of each of those names in the signature's list

    @property
    def numbers(self) -> int:
        return (self.rows or 1) * sum(math.prod(shape) for shape in self.shapes)

    def arrays(self, numbers: np.ndarray, names: list[str]) -> dict[str, np.ndarray]:
        if not self.order:  # a plain list: one input
            return {names[0]: numbers.reshape(self.shapes[0])}
        block = numbers.reshape(self.rows or 1, -1)
        arrays, offset = {}, 0
        for index, shape in zip(self.order, self.shapes, strict=True):
            size = math.prod(shape)
            part = block[:, offset : offset + size]
            arrays[names[index]] = part.reshape(((self.rows,) if self.rows else ()) + shape)
            offset += size
        return arrays


def layout(skeleton: Skeleton, key: str | None, lines: bool, inputs: int) -> Layout | None:
    """The layout the skeleton of a document (``key``: ``instances``, ``inputs`` or None for
    a bare list or, with ``lines``, JSON lines) is exactly made of, or None."""
    if skeleton[:1] == b"{":
        return _object_layout(skeleton, 0, len(skeleton), inputs) if key == "inputs" else None
    if b"{" not in skeleton:
        shape = rectangular_shape(skeleton)
        if shape is None or inputs != 1 or (lines and len(shape) < 2):
            return None
        if key is None and not lines and len(shape) == 1:
            shape = (1, *shape)  # a list of numbers: conversion's one instance
        return Layout(None, [shape], [])
    if key == "inputs" or skeleton[:2] != b"[{":
        return None
    row_end, rows = skeleton.find(b"}") + 1, skeleton.count(b"{")
    row = _object_layout(skeleton, 1, row_end, inputs)
    if row is None or not _repeated_rows(skeleton, bytes(skeleton[1:row_end]), rows):
        return None
    return Layout(rows, row.shapes, row.order)


def _repeated_rows(skeleton: Skeleton, one_row: bytes, rows: int) -> bool:
    """Whether the skeleton is ``[``, then ``one_row`` ``rows`` times between commas, ``]``."""
    unit = one_row + b","
    whole = len(skeleton) == 1 + rows * len(unit)
    return whole and repeats(skeleton, 1, unit, rows - 1) and skeleton.endswith(one_row + b"]")


def repeats(skeleton: Skeleton, start: int, unit: bytes, count: int) -> bool:
    """Whether ``unit`` comes ``count`` times from ``start`` on, compared a block of about
    ``REPEAT_BYTES`` at a time (no copy of the whole)."""
    per_block = max(1, min(count, REPEAT_BYTES // max(1, len(unit))))
    blocks, rest = divmod(count, per_block)
    block = unit * per_block
    for at in range(start, start + blocks * len(block), len(block)):
        if not skeleton.startswith(block, at):
            return False
    return rest == 0 or skeleton.startswith(unit * rest, start + blocks * len(block))


def _object_layout(skeleton: Skeleton, start: int, end: int, inputs: int) -> Layout | None:
    """``{`` marker value ``,`` marker value ... ``}`` at ``skeleton[start:end]``, every
    input named once: each value's shape, from its skeleton."""
    if skeleton[end - 1 : end] != b"}" or skeleton.count(b"}", start, end) != 1:
        return None
    members = _members(skeleton, start + 1, end - 1)
    if members is None or sorted(marker for marker, _, _ in members) != list(range(inputs)):
        return None
    shapes = []
    for _, low, high in members:
        number = high - low == 1 and skeleton[low] == ord("0")
        shape = () if number else rectangular_shape(skeleton, low, high)
        if shape is None:
            return None
        shapes.append(shape)
    return Layout(None, shapes, [marker for marker, _, _ in members])


def _members(skeleton: Skeleton, start: int, end: int) -> list[tuple[int, int, int]] | None:
    """An object's members, between its braces (``skeleton[start:end]``) -> (marker index,
    the value's start, its end) per member."""
    members = []
    for found in _A_MARKER.finditer(skeleton, start, end):  # one per input (a C scan)
        at = found.start()
        if at > start and skeleton[at - 1] != ord(","):
            return None
        members.append((skeleton[at] - 0x80, at + 1))
    result = []
    for index, (marker, low) in enumerate(members):
        high = members[index + 1][1] - 2 if index + 1 < len(members) else end
        if high <= low or skeleton[low] == ord(",") or skeleton[high - 1] == ord(","):
            return None
        result.append((marker, low, high))
    return result if members and start < end and skeleton[start] >= 0x80 else None


def rectangular_shape(skeleton: Skeleton, start: int = 0,
                      end: int | None = None) -> tuple[int, ...] | None:  # fmt: skip
    """The shape of a nested list of numbers, from its skeleton (``skeleton[start:end]``). A
    rectangular array's skeleton is the one its shape makes; anything else (ragged, empty,
    two numbers without a comma) is None. The lists inside the outer one are built from the
    shape (the first member's size); the outer list is compared with its repeated member."""
    end = len(skeleton) if end is None else end
    head = bytes(skeleton[start : min(end, start + MAX_DIMS + 1)])
    depth = len(head) - len(head.lstrip(b"["))
    if not 0 < depth <= MAX_DIMS:
        return None
    shape: list[int] = []
    child = b"0"
    for level in range(depth, 0, -1):  # innermost list first; level 1 is the outer list
        run = depth - level + 1  # "]" closing the first list of this level and those inside
        closing = skeleton.find(b"]" * run, start, end)
        if closing < 0:
            return None
        length = closing - start + run - (level - 1)  # from its "[" (at level - 1) to its "]"
        count, remainder = divmod(length - 1, len(child) + 1)
        if count < 1 or remainder:
            return None
        shape.insert(0, count)
        if level > 1:
            child = b"[" + (child + b",") * (count - 1) + child + b"]"  # no list of copies
    whole = end - start == count * (len(child) + 1) + 1
    unit = child + b","
    if not (whole and repeats(skeleton, start + 1, unit, count - 1)):
        return None
    return tuple(shape) if skeleton.startswith(child + b"]", end - len(child) - 1) else None
