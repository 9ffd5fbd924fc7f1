"""The structure of a JSON document read from its bytes, a window at a time (issue 53): the
brackets, braces, commas and colons that lie outside strings, with their depth, for
``text_verbatim``. A string is found by its quotes, a quote that follows an odd run of
backslashes being part of the string; nothing here decides whether the document is valid
(``text_verbatim`` parses every byte that is not one of these marks).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

import numpy as np

WINDOW = 1 << 18  # bytes read at a time
QUOTE, BACKSLASH = ord('"'), ord("\\")
COMMA, COLON = ord(","), ord(":")
WHITESPACE = b" \t\n\r"  # JSON's (and Python's json module's) whitespace
MAX_BACKSLASH_RUN = 64  # a longer run before a quote: not read here (Unsure)


class Unsure(Exception):
    """The bytes are not read here: the caller takes the way that parses the whole body."""


def _table(members: bytes, value: int, dtype: type) -> np.ndarray:
    table: np.ndarray = np.zeros(256, dtype)
    table[list(members)] = value
    return table


_MARKS = _table(b"[]{},:", True, np.bool_)
_DELTA = _table(b"[{", 1, np.int8)
_DELTA[list(b"]}")] = -1
_NOT_WHITESPACE = ~_table(WHITESPACE, True, np.bool_)


class Marks(NamedTuple):
    """One window's marks outside strings: where they are, which byte, and the depth before
    each (the depth at the start of the scan being 0)."""

    positions: np.ndarray
    chars: np.ndarray
    depths: np.ndarray


def marks(view: np.ndarray, start: int, stop: int) -> Iterator[Marks]:
    """The marks of ``view[start:stop]`` a window at a time; ``start`` lies outside a string."""
    in_string, depth = 0, 0
    for low in range(start, stop, WINDOW):
        window = view[low : min(low + WINDOW, stop)]
        quotes = (window == QUOTE).view(np.uint8)
        if low > start and view[low - 1] == BACKSLASH or BACKSLASH in window:
            found = np.flatnonzero(quotes) + low
            quotes[found[_escaped(view, found, start)] - low] = 0
        inside = np.bitwise_xor.accumulate(quotes)
        inside ^= in_string
        positions = np.flatnonzero(_MARKS.take(window) > inside) + low
        chars = view[positions]
        delta = _DELTA[chars]
        after = np.cumsum(delta, dtype=np.int64) + depth
        yield Marks(positions, chars, after - delta)
        depth = int(after[-1]) if len(after) else depth
        in_string = int(inside[-1])


def _escaped(view: np.ndarray, quotes: np.ndarray, start: int) -> np.ndarray:
    """Which of the quotes follow an odd run of backslashes (that began at ``start`` or
    after)."""
    escaped = np.zeros(len(quotes), np.bool_)
    active = np.flatnonzero(quotes - 1 >= start)
    run = 0
    while len(active):
        before = quotes[active] - run - 1
        more = before >= start
        more[more] = view[before[more]] == BACKSLASH
        escaped[active[~more]] = run & 1
        active = active[more]
        run += 1
        if run > MAX_BACKSLASH_RUN and len(active):
            raise Unsure
    return escaped


def first_not_whitespace(view: np.ndarray, start: int, stop: int) -> int:
    """The first position in ``[start, stop)`` that is not JSON whitespace, else ``stop``."""
    if start < stop and _NOT_WHITESPACE[view[start]]:
        return start
    for low in range(start, stop, WINDOW):
        found = np.flatnonzero(_NOT_WHITESPACE[view[low : min(low + WINDOW, stop)]])
        if len(found):
            return low + int(found[0])
    return stop


def last_not_whitespace(view: np.ndarray, start: int, stop: int) -> int:
    """One past the last position in ``[start, stop)`` that is not JSON whitespace, else
    ``start``."""
    if start < stop and _NOT_WHITESPACE[view[stop - 1]]:
        return stop
    for high in range(stop, start, -WINDOW):
        low = max(start, high - WINDOW)
        found = np.flatnonzero(_NOT_WHITESPACE[view[low:high]])
        if len(found):
            return low + int(found[-1]) + 1
    return start
