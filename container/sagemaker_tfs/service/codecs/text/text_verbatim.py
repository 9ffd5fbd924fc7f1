"""TF Serving's REST request for a large JSON body, without a Python object per value (issue
53): the body that already is that request is posted as it is, one that becomes it by a
textual wrap (a list of lists -> ``{"instances": ...}``, a list or an object -> one instance)
is wrapped; nothing is rewritten.

What ``text_rest.convert_json`` decides from ``json.loads`` of the whole body, this decides
from its structure (``text_scan``: the marks outside strings) and from parsing it a piece of
about ``text_scan.WINDOW`` bytes at a time: a container is cut at its own commas into runs
of members, and each run, put between the container's brackets, is parsed by ``json.loads``
and let go of (a member larger than a window is read the same way, a level down). The
document is valid exactly when every run is (a JSON array or object is its members,
separated by commas), so the pieces' verdict is the whole's. JSON lines (and a JSON body
that holds two values or more, as ``convert`` reads it) are read by ``text_lines``. Anything
else (a body that is not valid, a bare scalar, nesting deeper than ``MAX_DEPTH``) is
``Unsure``: ``text_rest.convert`` reads it, with its errors in its words.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from sagemaker_tfs.service.codecs.text import text_lines, text_scan
from sagemaker_tfs.service.codecs.text.text_rest import TFS_REQUEST_KEYS
from sagemaker_tfs.service.codecs.text.text_scan import (
    COLON,
    COMMA,
    Unsure,
    first_not_whitespace,
    last_not_whitespace,
    marks,
)

MIN_BYTES = 1 << 20  # smaller bodies: text_rest.convert (its objects are as bounded)
MAX_DEPTH = 100  # deeper: text_rest.convert (json.loads' own limit is the recursion limit's)
_CLOSING = {ord("["): ord("]"), ord("{"): ord("}")}

Seen = Callable[[object], None]  # told of each run parsed (a list or a dict) and large member


class Large(NamedTuple):
    """A member larger than a window: its key (an object's) and its value's first byte."""

    key: str | None
    opening: int


def _loads(body: bytes, start: int, stop: int, prefix: str = "", suffix: str = "") -> object:
    """``json.loads`` of a piece of the body; a piece it does not take: ``Unsure``."""
    try:
        return json.loads(prefix + body[start:stop].decode("utf-8") + suffix)
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
        if stop - start > text_scan.WINDOW and int(self.view[start]) in _CLOSING:
            if _CLOSING[int(self.view[start])] != self.view[stop - 1]:
                raise Unsure
            self.container(start, stop, _ignore)
        else:  # a string or a number, whatever its size: one value, the input's own bytes
            _loads(self.body, start, stop)

    def container(self, start: int, stop: int, seen: Seen) -> None:
        """``body[start:stop]``, from its opening bracket to its closing one, is one valid
        list or object: its members, between its commas (depth 1), parsed a run at a time."""
        run_start = start + 1
        for window in marks(self.view, start, stop - 1):
            if window.depths.size and int(window.depths.max()) > MAX_DEPTH:
                raise Unsure
            commas = window.positions[(window.chars == COMMA) & (window.depths == 1)]
            if commas.size:
                self.members(start, run_start, commas, seen)
                run_start = int(commas[-1]) + 1
        self.members(start, run_start, np.array([stop - 1]), seen)

    def members(self, opening: int, run_start: int, ends: np.ndarray, seen: Seen) -> None:
        """The members from ``run_start`` to each of ``ends`` (the commas after them, the
        last the end of the run): the first, which may have begun windows before, alone when
        it is larger than a window, the rest as one run."""
        first_end = int(ends[0])
        if first_end - run_start > text_scan.WINDOW:
            self.member(opening, run_start, first_end, seen)
            if len(ends) == 1:
                return
            run_start = first_end + 1
        brackets = chr(self.body[opening]) + chr(_CLOSING[self.body[opening]])
        parsed = _loads(self.body, run_start, int(ends[-1]), brackets[0], brackets[1])
        if not parsed:  # only whitespace before a comma or the closing bracket
            raise Unsure
        seen(parsed)

    def member(self, opening: int, start: int, stop: int, seen: Seen) -> None:
        """One member larger than a window: a list's value, or an object's key and value."""
        key = None
        if self.body[opening] == ord("{"):
            colon = self.first_mark(start, stop, COLON)
            parsed = _loads(self.body, start, colon)
            if not isinstance(parsed, str):
                raise Unsure
            key, start = parsed, colon + 1
        value_start = first_not_whitespace(self.view, start, stop)
        self.value(value_start, stop)
        seen(Large(key, int(self.view[value_start])))

    def first_mark(self, start: int, stop: int, expected: int) -> int:
        """The position of the first mark after ``start``, which must be ``expected``."""
        for window in marks(self.view, start, stop):
            if window.positions.size:
                if window.chars[0] != expected:
                    raise Unsure
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
            self.all_lists &= all(isinstance(member, list) for member in parsed)


def rest_request(body: bytes, lines: bool = False) -> bytes:
    """TF Serving's REST request for a JSON body of a list or an object, as
    ``text_rest.convert_json`` writes it: the body, or the body wrapped; for JSON lines
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
        document.container(start, stop, top)
    except Unsure:  # JSON lines, if it is not one document (json.loads fails on two values)
        return text_lines.instances(body, document.view, (start, stop), document.value, 2)
    if body[start] == ord("{"):
        if top.keys.intersection(TFS_REQUEST_KEYS):
            return body
    elif top.members and top.all_lists:
        return b"".join((b'{"instances": ', body, b"}"))
    return b"".join((b'{"instances": [', body, b"]}"))
