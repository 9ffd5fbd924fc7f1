"""TF Serving's REST request for a large JSON body, without a Python object per value (issue
53): the body that already is that request is posted as it is, one that becomes it by a
textual wrap (a list of lists -> ``{"instances": ...}``, a list or an object -> one instance)
is wrapped; nothing is rewritten.

What ``text_rest.convert_json`` decides from ``json.loads`` of the whole body, this decides
from parsing it a piece of about ``text_scan.WINDOW`` bytes at a time: a container is cut at
its own commas into runs of members, and each run, put between the container's brackets, is
parsed by ``json.loads`` and let go of (a member larger than a window is read the same way,
a level down, and its container continues after it). The document is valid exactly when
every run is (a JSON array or object is its members, separated by commas), so the pieces'
verdict is the whole's. Where a run ends is guessed (the last comma in the window that
looks like the one between the two members before) and the guess is proven by the run
parsing (see ``_Document.run``); where there is nothing to guess from, or a guess does not
parse, the window is scanned (``text_scan``: the marks outside strings). So most bytes are
read once, by ``json.loads``. JSON lines (and a JSON body that holds two values or more, as
``convert`` reads it) are read by ``text_lines``. Anything else (a body that is not valid, a
bare scalar, containers larger than a window nested deeper than ``MAX_DEPTH``) is
``Unsure``: ``text_rest.convert`` reads it, with its errors in its words.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from sagemaker_tfs.service.codecs.text import text_lines, text_scan
from sagemaker_tfs.service.codecs.text.text_rest import TFS_REQUEST_KEYS, RestRequest
from sagemaker_tfs.service.codecs.text.text_scan import (
    COLON,
    COMMA,
    WHITESPACE,
    Unsure,
    first_not_whitespace,
    last_not_whitespace,
    marks,
)

MIN_BYTES = 1 << 20  # smaller bodies: text_rest.convert (its objects are as bounded)
MAX_DEPTH = 100  # containers larger than a window nested deeper: text_rest.convert
PAD = 16  # a run is parsed this many lists deeper than it lies in the document
MAX_MISSES = 2  # guessed runs that did not parse, after which a container is only scanned
_CLOSING = {ord("["): ord("]"), ord("{"): ord("}")}
_IS_CLOSING = np.zeros(256, np.bool_)
_IS_CLOSING[list(b"]}")] = True
_BEFORE_COMMA, _AFTER_COMMA = b'"]}', b'"[{'  # kept in a separator beside its comma

Seen = Callable[[object], None]  # told of each run parsed (a list or a dict) and large member


class Large(NamedTuple):
    """A member larger than a window: its key (an object's) and its value's first byte."""

    key: str | None
    opening: int


class Separator(NamedTuple):
    """The bytes around the comma between two members (``b'", "'``, ``b"}, {"``, ``b", "``):
    where the next run is guessed to end."""

    text: bytes
    comma: int  # the comma's offset in ``text``


def _loads(body: bytes, start: int, stop: int, prefix: bytes = b"", suffix: bytes = b"") -> object:
    """``json.loads`` of a piece of the body; a piece it does not take: ``Unsure``."""
    try:
        return json.loads(b"".join((prefix, memoryview(body)[start:stop], suffix)).decode())
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        raise Unsure from None


def _ignore(_: object) -> None:
    return None


class _Document:
    """The body, read as a view of its bytes."""

    def __init__(self, body: bytes) -> None:
        self.body = body
        self.view = np.frombuffer(body, np.uint8)

    def value(self, start: int, stop: int) -> None:
        """``body[start:stop]`` (JSON whitespace around it allowed) is one valid value."""
        start = first_not_whitespace(self.view, start, stop)
        stop = last_not_whitespace(self.view, start, stop)
        if stop - start > text_scan.WINDOW and self.body[start] in _CLOSING:
            if self.container(start, 1, _ignore) != stop - 1:
                raise Unsure
        else:  # a string or a number, whatever its size: one value, the input's own bytes
            _loads(self.body, start, stop)

    def container(self, opening: int, level: int, seen: Seen) -> int:
        """The list or object that opens at ``opening`` (``level`` deep: the document's is
        1) is valid, read a run of members at a time; returns where it closes. A run ends
        at the comma of the last separator like the one before it in the window (no scan),
        else (none yet, none found, or that run did not parse) where the marks of the
        window say."""
        if level > MAX_DEPTH:
            raise Unsure
        run_start, separator, misses = opening + 1, None, 0
        while True:
            if separator is not None and misses < MAX_MISSES:
                cut = self.guessed_cut(separator, run_start)
                if cut > run_start:
                    try:
                        seen(self.run(opening, run_start, cut, level))
                        run_start = cut + 1
                        continue
                    except Unsure:  # not the container's comma, or the body is not valid
                        misses += 1
            closing, run_start = self.scanned_run(opening, run_start, level, seen)
            if closing >= 0:
                return closing
            separator = self.separator(run_start - 1)

    def guessed_cut(self, separator: Separator, run_start: int) -> int:
        """The comma of the last ``separator`` in the window from ``run_start`` (-1: none)."""
        found = self.body.rfind(separator.text, run_start, run_start + text_scan.WINDOW)
        return found + separator.comma if found >= 0 else -1

    def separator(self, comma: int) -> Separator:
        """The bytes around a comma between two members: the closing quote or bracket
        before it, the whitespace after it and the opening quote or bracket after that."""
        low, high = comma, comma + 1
        if self.body[comma - 1] in _BEFORE_COMMA:
            low -= 1
        while high < len(self.body) and high - comma < 4 and self.body[high] in WHITESPACE:
            high += 1
        if high < len(self.body) and self.body[high] in _AFTER_COMMA:
            high += 1
        return Separator(self.body[low:high], comma - low)

    def run(self, opening: int, start: int, stop: int, level: int) -> object:
        """The members in ``body[start:stop]`` of the container that opens at ``opening``,
        parsed between its brackets: parsing is what proves ``stop`` ends a member (the run
        begins where one does, and JSON read from there reads the same bytes the same way),
        so a guessed end that is not the container's comma does not parse.

        The run is parsed as the one member of ``level - 1 + PAD`` nested lists: deeper than
        it lies in the document, so that a document too deep for ``json.loads`` (the
        recursion limit) is not read here either; a list that has more than one member
        (``], [`` taken for a comma between the container's members) is not this run."""
        depth = level - 1 + PAD
        prefix = b"[" * depth + self.body[opening : opening + 1]
        suffix = bytes((_CLOSING[self.body[opening]],)) + b"]" * depth
        parsed = _loads(self.body, start, stop, prefix, suffix)
        for _ in range(depth):
            if not isinstance(parsed, list) or len(parsed) != 1:
                raise Unsure
            parsed = parsed[0]
        if not parsed:  # only whitespace before a comma or the closing bracket
            raise Unsure
        return parsed

    def scanned_run(self, opening: int, run_start: int, level: int, seen: Seen) -> tuple[int, int]:
        """The members from ``run_start`` to the container's closing bracket or (else) its
        last comma among the marks of one window; a member larger than the window, alone.
        Returns where the container closes (-1: not yet) and where the next run starts."""
        stop = min(run_start + text_scan.WINDOW, len(self.body))
        window = next(marks(self.view, run_start, stop), None)
        if window is None:  # the body ends before the container does
            raise Unsure
        top = window.depths == 0
        closings = window.positions[top & _IS_CLOSING[window.chars]]
        if closings.size:
            closing = int(closings[0])
            if self.body[closing] != _CLOSING[self.body[opening]]:
                raise Unsure
            if (
                run_start > opening + 1
                or first_not_whitespace(self.view, run_start, closing) < closing
            ):
                seen(self.run(opening, run_start, closing, level))
            return closing, closing + 1  # else an empty container (a member that ends a window)
        commas = window.positions[top & (window.chars == COMMA)]
        if commas.size:
            seen(self.run(opening, run_start, int(commas[-1]), level))
            return -1, int(commas[-1]) + 1
        return self.large_member(opening, run_start, level, seen)

    def large_member(self, opening: int, start: int, level: int, seen: Seen) -> tuple[int, int]:
        """One member larger than a window (a list's value, or an object's key and value),
        then the comma or the closing bracket after it (returned as ``scanned_run`` does)."""
        key, end = None, len(self.body)
        start = first_not_whitespace(self.view, start, end)
        if self.body[opening] == ord("{"):
            colon = self.first_mark(start)
            parsed = _loads(self.body, start, colon)
            if self.body[colon] != COLON or not isinstance(parsed, str):
                raise Unsure
            key, start = parsed, first_not_whitespace(self.view, colon + 1, end)
        if start == end:
            raise Unsure
        if self.body[start] in _CLOSING:  # read a level down; this container goes on after it
            after = first_not_whitespace(
                self.view, self.container(start, level + 1, _ignore) + 1, end
            )
        else:  # a string or a number: its bytes up to the mark after it
            after = self.first_mark(start)
            _loads(self.body, start, after)
        seen(Large(key, self.body[start]))
        if after < end and self.body[after] == COMMA:
            return -1, after + 1
        if after < end and self.body[after] == _CLOSING[self.body[opening]]:
            return after, after + 1
        raise Unsure

    def first_mark(self, start: int) -> int:
        """The position of the first mark at or after ``start``."""
        for window in marks(self.view, start, len(self.body)):
            if window.positions.size:
                return int(window.positions[0])
        raise Unsure


class _TopLevel:
    """What ``text_rest.convert_json`` asks of the document, collected from its runs and
    large members: an object's keys; whether a list's members are all lists."""

    def __init__(self) -> None:
        self.keys: set[str] = set()
        self.members = 0
        self.all_lists = True

    def __call__(self, parsed: object) -> None:
        if isinstance(parsed, Large):
            self.members += 1
            self.all_lists &= parsed.opening == ord("[")
            if parsed.key is not None:
                self.keys.add(parsed.key)
        elif isinstance(parsed, dict):
            self.keys.update(parsed)
        elif isinstance(parsed, list):
            self.members += len(parsed)
            self.all_lists = self.all_lists and all(isinstance(item, list) for item in parsed)


def rest_request(body: bytes, lines: bool = False) -> RestRequest:
    """TF Serving's REST request for a JSON body of a list or an object, as
    ``text_rest.convert_json`` writes it: the body, or the body between the wrap's two
    parts (sent in turn, not copied into one); for JSON lines
    (``lines``, or a JSON body of two values or more), their values as the instances.
    ``Unsure``: a body smaller than ``MIN_BYTES``, or one this does not read (see the
    module)."""
    if len(body) < MIN_BYTES:
        raise Unsure
    document = _Document(body)
    start = first_not_whitespace(document.view, 0, len(body))
    stop = last_not_whitespace(document.view, start, len(body))
    if start == stop or _CLOSING.get(body[start]) != body[stop - 1]:
        raise Unsure
    if lines:
        return text_lines.instances(body, document.view, (start, stop), document.value, 1)
    top = _TopLevel()
    try:
        if document.container(start, 1, top) != stop - 1:
            raise Unsure
    except Unsure:  # JSON lines, if it is not one document (json.loads fails on two values)
        return text_lines.instances(body, document.view, (start, stop), document.value, 2)
    if body[start] == ord("{"):
        if top.keys.intersection(TFS_REQUEST_KEYS):
            return RestRequest.of(body)
    elif top.members and top.all_lists:
        return RestRequest.of(b'{"instances": ', body, b"}")
    return RestRequest.of(b'{"instances": [', body, b"]}")
