"""JSON and JSON lines bodies read into a signature's input arrays without a Python object per
number, as the REST path (``text_rest.convert``, then the model server's JSON reader) would
read them; ``text_codecs`` is the family's entry point (issues 36 and 53).

A document is ``{"instances": V}`` or ``{"inputs": V}`` (with ``"signature_name"`` before or
after it, or not at all), a bare list (conversion's instances), or JSON lines (each line an
instance). V is a rectangular list of numbers (``NaN``, ``Infinity`` and ``-Infinity`` among
them for float inputs, as the REST path's reader takes them; ``true`` and ``false`` for bool
inputs), or, for named inputs, a list of objects that each name every input once (rows), or one
such object (columns). The reading is done on the body's *skeleton*: its brackets, braces and
commas, each run of number characters (the words' letters among them) as one ``0``, and each
input's name (``"a":``) as one marker byte. A rectangular list, or rows that repeat the first
row's layout, have exactly the skeleton their shapes make, which ``text_layout`` checks a block
at a time (the skeleton is made once, in one buffer); the numbers are then parsed by orjson a
piece at a time (what the model server's reader uses) and cut into the inputs by that layout.

Anything else is None and goes the REST way, so that its answer and its errors are the REST
path's (or refused as it refuses them, by ``text_refusals`` and ``text_ragged``): strings,
booleans for other inputs, null, other keys, input names that need escapes, ragged lists, other
spellings of a NaN or an infinity (``-NaN``, ``Inf``: the REST path refuses them too), an
integer input given a NaN, an infinity, a fraction or a value beyond its range, inputs of
different dtypes, and names written with a blank before their colon.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import NamedTuple

import numpy as np

from sagemaker_tfs.service.codecs.text import text_layout
from sagemaker_tfs.service.codecs.text.text_layout import MARKERS, MAX_INPUTS, Layout
from sagemaker_tfs.service.codecs.text.text_numbers import (
    NON_FINITE_CHARS,
    NUMBER_CHARS,
    WORD_CHARS,
    numbers_as,
    piece_values,
)
from sagemaker_tfs.service.codecs.text.text_scan import (
    WHITESPACE,
    first_not_whitespace,
    last_not_whitespace,
)

# Bytes scanned and numbers parsed at a time (a piece ends at a comma, or a line's end). orjson
# holds ~16x a piece while it reads one (its reader's buffer, then a Python number per value):
# 4 MB for 256 KB, 17 MB for 1 MB (0.17x a 100 MB body); smaller pieces read as fast.
PARSE_BYTES = 256 << 10

_NUMBER_MARK = ord("0")
_SIMPLE_NAME = re.compile(r"[A-Za-z0-9_./-]+")
_RESERVED_NAMES = {"instances", "inputs", "signature_name", "examples"}
_BLANK = rb"[ \t\n\r]*"
_NAME = rb'"([A-Za-z0-9_./-]+)"'
_HEAD = re.compile(
    _BLANK + rb"\{" + _BLANK + rb'(?:"signature_name"' + _BLANK + rb":" + _BLANK + _NAME
    + _BLANK + rb"," + _BLANK + rb')?"(instances|inputs)"' + _BLANK + rb":" + _BLANK
)  # fmt: skip
_TAIL = re.compile(
    rb'(?:,[ \t\n\r]*"signature_name"' + _BLANK + rb":" + _BLANK + _NAME + _BLANK + rb")?\}"
    + _BLANK + rb"\Z"
)  # fmt: skip
_TAIL_BYTES = 1024


_RUN_CHARS = NUMBER_CHARS + NON_FINITE_CHARS + WORD_CHARS
_OUTSIDE = 0x01  # a byte the skeleton does not take (strings' quotes, letters of other words)
# A piece's bytes classed: a run's character is 0, a blank one space, structure and markers
# stay as they are, any other byte is _OUTSIDE.
_SKELETON_CLASSES = bytes(
    _NUMBER_MARK if byte in _RUN_CHARS else ord(" ") if byte in WHITESPACE
    else byte if byte in b",[]{}" + MARKERS else _OUTSIDE
    for byte in range(256)
)  # fmt: skip
_LINES_AS_COMMAS = bytes.maketrans(b"\n", b",")


class Document(NamedTuple):
    """Where a body's value is (``body[start:end]``), how to read it, under which signature."""

    body: bytes
    start: int
    end: int
    key: str | None  # "instances", "inputs", or None: a bare list or JSON lines
    lines: bool  # JSON lines: the value is the instances, one a line, without brackets
    signature_name: str | None


class JsonInputs(NamedTuple):
    """The inputs' arrays by name, and whether the request was columnar (``inputs``)."""

    arrays: dict[str, np.ndarray]
    columnar: bool


Parts = list[bytes | int]  # a skeleton's, a piece's each (a flat piece's: its count of numbers)
Read = tuple[Parts, np.ndarray]


def find_document(body: bytes, lines: bool) -> Document | None:
    """The value of a JSON body (or JSON lines) to read, or None for another document."""
    view = np.frombuffer(body, np.uint8)
    head = None if lines else _HEAD.match(body)
    if head is None:
        start = first_not_whitespace(view, 0, len(body))
        end = last_not_whitespace(view, start, len(body))
        return Document(body, start, end, None, lines, None) if start < end or not lines else None
    tail = _TAIL.search(body, max(head.end(), len(body) - _TAIL_BYTES))
    if tail is None or (head.group(1) and tail.group(1)):  # a name given twice
        return None
    name = (head.group(1) or tail.group(1) or b"").decode() or None
    end = last_not_whitespace(view, head.end(), tail.start())
    return Document(body, head.end(), end, head.group(2).decode(), False, name)


def read_document(document: Document, names: list[str], dtype: np.dtype) -> JsonInputs | None:
    """The arrays of inputs ``names`` (all of ``dtype``) that the REST path reads from the
    document, or None (see the module). A list of numbers is read in one pass that makes
    both its skeleton (as counts: never whole) and its numbers; other values' skeleton is
    made and checked first, so that it is never held beside the numbers."""
    body = document.body
    at = first_not_whitespace(np.frombuffer(body, np.uint8), document.start + 1, len(body))
    listed = body[document.start : document.start + 1] == b"[" and body[at : at + 1] not in b"[{"
    if document.lines or not listed:  # its skeleton first: never beside the numbers
        found = pieces_and_layout(document, names)
        layout = None if found is None else found[1]
        read = None if found is None else found[0].skeleton_and_numbers(dtype, kept=False)
    else:
        pieces = _pieces(document, names)
        read = None if pieces is None else pieces.skeleton_and_numbers(dtype)
        layout = None if read is None else _list_layout(read[0], document, len(names))
    if read is None or layout is None or layout.numbers != read[1].size:
        return None
    return JsonInputs(layout.arrays(read[1], names), document.key == "inputs")


def pieces_and_layout(document: Document, names: list[str]) -> tuple[Pieces, Layout] | None:
    """The document's pieces and the layout of its numbers (see the module), or None."""
    read = pieces_and_skeleton(document, names)
    if read is None:
        return None
    layout = text_layout.layout(read[1], document.key, document.lines, len(names))
    return None if layout is None else (read[0], layout)


def pieces_and_skeleton(document: Document,
                        names: list[str]) -> tuple[Pieces, bytearray] | None:  # fmt: skip
    """The document's pieces and its skeleton (JSON lines' in brackets), or None."""
    pieces = _pieces(document, names)
    skeleton = None if pieces is None else pieces.skeleton(brackets=document.lines)
    return None if pieces is None or skeleton is None else (pieces, skeleton)


def _pieces(document: Document, names: list[str]) -> Pieces | None:
    """The document's value a piece at a time, or None: a value or names not read here."""
    body, start, end = document.body, document.start, document.end
    if start >= end or body[start : start + 1] not in (b"[", b"{") or len(names) > MAX_INPUTS:
        return None
    if any(not _SIMPLE_NAME.fullmatch(name) or name in _RESERVED_NAMES for name in names):
        return None
    named = document.key is not None or document.lines
    tokens = [b'"%s":' % name.encode() for name in names] if named else []
    return Pieces(body, start, end, tokens, document.lines)


# --------------------------------------------------------------------------- the pieces


class Pieces:
    """``body[start:end]`` a piece at a time, cut at commas (and line ends for JSON lines),
    each input name's ``"name":`` made its marker byte and a line end a comma."""

    def __init__(self, body: bytes, start: int, end: int, tokens: list[bytes],
                 lines: bool) -> None:  # fmt: skip
        self.body, self.start, self.end = body, start, end
        self.tokens = tokens
        self.lines = lines
        self.cut = re.compile(rb"[,\n]" if lines else rb",")

    def __iter__(self) -> Iterator[bytes | None]:
        """Each piece made ready, or None for one with bytes beyond ASCII (the markers')."""
        start = self.start
        while start < self.end:
            found = self.cut.search(self.body, min(start + PARSE_BYTES, self.end), self.end)
            cut = self.end if found is None else found.start()
            yield self._ready(self.body[start:cut])
            start = cut + 1

    def _ready(self, piece: bytes) -> bytes | None:
        if not piece.isascii():  # bytes beyond ASCII are in strings only: not read here
            return None
        if self.lines:
            piece = piece.translate(_LINES_AS_COMMAS)
        if not self.tokens or b'"' not in piece:  # a name is in quotes: none in this piece
            return piece
        for marker, token in zip(MARKERS, self.tokens, strict=False):
            piece = piece.replace(token, bytes((marker,)))
        return piece

    def skeleton(self, brackets: bool = False) -> bytearray | None:
        """The skeleton of the value (see the module), in brackets with ``brackets`` (JSON
        lines'), or None for a byte outside it. Made in one growing buffer: the pieces' parts
        in a list, then joined, would hold it twice."""
        skeleton = bytearray(b"[" if brackets else b"")
        for index, piece in enumerate(self):
            classes = _classes(piece)
            if classes is None:
                return None
            skeleton += b"," + _part(classes) if index else _part(classes)
        if brackets:
            skeleton += b"]"
        return skeleton

    def skeleton_and_numbers(self, dtype: np.dtype, kept: bool = True) -> Read | None:
        """The skeleton's parts (unless not ``kept``) and the numbers, each piece's by orjson
        (made an array as the model server's reader does), in one pass; None for a byte
        outside the skeleton or a piece that is not numbers."""
        cuts = self.body.count(b",", self.start, self.end)
        if self.lines:
            cuts += self.body.count(b"\n", self.start, self.end)
        out = np.empty(cuts + 1, dtype)  # each number but the last is followed by a cut
        parts, filled = [], 0
        for piece in self:
            classes = _classes(piece)
            flat = classes is not None and _is_flat(classes)
            values = None if classes is None else piece_values(piece, dtype.kind == "b", flat)
            if classes is None or values is None:
                return None
            if kept:  # a flat piece that orjson read: one number (one run) between two commas
                parts.append(len(values) if flat else _part(classes))
            if not values:  # blanks between two cuts: the skeleton's check finds any error
                continue
            array = numbers_as(values, dtype)
            if array is None or filled + len(array) > out.size:
                return None
            out[filled : filled + len(array)] = array
            filled += len(array)
        return parts, out[:filled]


def _list_layout(parts: Parts, document: Document, inputs: int) -> Layout | None:
    """The layout of a skeleton's parts (``text_layout``): a plain list's from its counts
    (as the skeleton ``[0,...,0]`` reads)."""
    count = _plain_list(parts)
    if count is not None:
        shape = (count,) if document.key is not None else (1, count)
        return Layout(None, [shape], []) if inputs == 1 else None
    skeleton = bytearray()  # a flat piece's part: 0,0,...,0
    for index, part in enumerate(parts):
        skeleton += b"," if index else b""
        skeleton += part if isinstance(part, bytes) else (b",0" * part)[1:]
    return text_layout.layout(skeleton, document.key, document.lines, inputs)


def _plain_list(parts: Parts) -> int | None:
    """How many numbers the skeleton's parts (a flat piece's as its count) hold when they
    join into a plain list, ``[0,0,...,0]``; otherwise None."""
    first, last, middle = parts[0], parts[-1], parts[1:-1]
    counts = [part for part in middle if isinstance(part, int) and part > 0]
    if not isinstance(first, bytes) or not isinstance(last, bytes) or len(counts) < len(middle):
        return None
    ends = [first[1:-1]] if len(parts) == 1 else [first[1:], last[:-1]]
    flat = all(end and end == (b",0" * ((len(end) + 1) // 2))[1:] for end in ends)
    plain = flat and first[:1] == b"[" and last[-1:] == b"]"
    return sum(counts) + sum((len(end) + 1) // 2 for end in ends) if plain else None


def _classes(piece: bytes | None) -> bytes | None:
    """A piece's bytes classed (``_SKELETON_CLASSES``), or None for a byte outside them."""
    if piece is None:
        return None
    classes = piece.translate(_SKELETON_CLASSES)  # C speed: ~6x NumPy's table lookups
    return None if bytes((_OUTSIDE,)) in classes else classes


def _is_flat(classes: bytes) -> bool:
    """Whether a piece is runs, blanks and commas only (no brackets, braces or markers)."""
    return classes.isascii() and not any(byte in classes for byte in (b"[", b"]", b"{", b"}"))


def _part(classes: bytes) -> bytes:
    """The skeleton of a piece's classes: each run's first byte, structure and markers."""
    chunk = np.frombuffer(classes, np.uint8)
    number = chunk == _NUMBER_MARK
    keep = chunk != ord(" ")  # a run's first character, structure and markers
    keep[1:] &= ~(number[1:] & number[:-1])
    return chunk[keep].tobytes()
