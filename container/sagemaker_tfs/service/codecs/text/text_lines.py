"""JSON lines -> TF Serving's REST request (``{"instances": [<value>,<value>,...]}``) without a
Python object per value of the whole body, for ``text_verbatim`` (issue 53).

The values are found by their marks (``text_scan``: an opening bracket at depth 0, the
closing one that brings the depth back to 0), a window at a time; each is checked as
``text_rest.split_json_lines`` reads it (``json.JSONDecoder.raw_decode`` from its first
byte ends exactly at its last: a window's values by one ``json.loads`` of them joined in a
list; one larger than a window by ``large_value``, a run of members at a time), and what
lies between two values must be JSON whitespace. The request is the values' bytes joined
by commas: the body is checked whole and the request's length counted first, then the
request is written a window's values at a time as it is sent (``text_rest.RestRequest``),
never whole. Anything else is ``Unsure`` (``text_rest`` then reads the body, with its
errors in its words).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from functools import partial

import numpy as np

from sagemaker_tfs.service.codecs.text import text_scan
from sagemaker_tfs.service.codecs.text.text_rest import RestRequest
from sagemaker_tfs.service.codecs.text.text_scan import WHITESPACE, Marks, Unsure, marks

_OPENING, _CLOSING = np.frombuffer(b"[{", np.uint8), np.frombuffer(b"]}", np.uint8)
_OPEN, _CLOSE = b'{"instances": [', b"]}"

LargeValue = Callable[[int, int], None]  # checks body[start:stop] is one value
Joined = bytes | bytearray  # values joined by commas


def instances(body: bytes, view: np.ndarray, bounds: tuple[int, int], large_value: LargeValue,
              at_least: int) -> RestRequest:  # fmt: skip
    """The request for the JSON lines of ``body`` between ``bounds`` (its first byte that is
    not whitespace, one past its last), when it has ``at_least`` values (a JSON body is
    read as lines only when it holds two or more): checked whole first, its length counted,
    then written a window's values at a time as it is sent (the windows found again)."""
    length, count = len(_OPEN) + len(_CLOSE), 0
    for joined, values in _windows(body, view, bounds, large_value):
        length += len(joined) + (1 if count else 0)
        count += values
    if count < at_least:
        raise Unsure
    return RestRequest(partial(_written, body, view, bounds), length)


def _written(body: bytes, view: np.ndarray, bounds: tuple[int, int]) -> Iterator[bytes]:
    """The request of a body ``_windows`` checked: the values' bytes joined by commas."""
    yield _OPEN
    separator = b""
    for joined, _ in _windows(body, view, bounds, None):
        yield separator
        yield bytes(joined)  # a window's values, as ``Iterable[bytes]`` (the same ``bytes``)
        separator = b","
    yield _CLOSE


def _windows(body: bytes, view: np.ndarray, bounds: tuple[int, int],
             large_value: LargeValue | None) -> Iterator[tuple[Joined, int]]:  # fmt: skip
    """Each window's values joined by commas and how many they are; with ``large_value``,
    what lies between them and the values themselves checked (``Unsure`` if not JSON
    lines), else taken as checked before."""
    start, stop = bounds
    pending, previous_end = -1, start
    for window in marks(view, start, stop):
        starts, ends, pending = _spans(window, pending)
        if len(ends):
            joined = _joined(body, starts, ends)
            if large_value is not None:
                _check_gaps(body, starts, ends, previous_end)
                _check_values(body, starts, ends, joined, large_value)
            yield joined, len(ends)
            previous_end = int(ends[-1])
    if pending >= 0 or previous_end != stop:
        raise Unsure


def _spans(window: Marks, pending: int) -> tuple[np.ndarray, np.ndarray, int]:
    """The values that end in this window (their first and one past their last byte), and
    the first byte of one that ends later (else -1)."""
    if window.depths.size and int(window.depths.min()) < 0:
        raise Unsure
    top = window.depths == 0
    if not np.isin(window.chars[top], _OPENING).all():
        raise Unsure  # a comma, a colon or a closing bracket between values
    starts = window.positions[top]
    ends = window.positions[(window.depths == 1) & np.isin(window.chars, _CLOSING)] + 1
    if pending >= 0:
        starts = np.concatenate(([pending], starts))
    pending = -1
    if len(starts) == len(ends) + 1:
        pending, starts = int(starts[-1]), starts[:-1]
    elif len(starts) != len(ends):
        raise Unsure
    if len(ends) and not ((starts < ends).all() and (ends[:-1] <= starts[1:]).all()):
        raise Unsure
    return starts, ends, pending


def _check_gaps(body: bytes, starts: np.ndarray, ends: np.ndarray, previous_end: int) -> None:
    """What lies before each value, after the one before it, is JSON whitespace."""
    gap_starts = np.concatenate(([previous_end], ends[:-1]))
    lengths = starts - gap_starts
    long = np.flatnonzero(lengths > 1)
    single = np.frombuffer(body, np.uint8)[gap_starts[lengths == 1]]
    if not np.isin(single, np.frombuffer(WHITESPACE, np.uint8)).all():
        raise Unsure
    for index in long.tolist():
        if body[int(gap_starts[index]) : int(starts[index])].strip(WHITESPACE):
            raise Unsure


def _joined(body: bytes, starts: np.ndarray, ends: np.ndarray) -> bytes | bytearray:
    """The values' bytes joined by commas: when one byte lies between each two (a newline),
    the bytes from the first to the last with those bytes made commas."""
    if not (starts[1:] == ends[:-1] + 1).all():
        values = zip(starts.tolist(), ends.tolist(), strict=True)
        return b",".join(body[first:last] for first, last in values)
    base, stop = int(starts[0]), int(ends[-1])
    joined = bytearray(memoryview(body)[base:stop])
    np.frombuffer(joined, np.uint8)[ends[:-1] - base] = ord(",")
    return joined


def _check_values(body: bytes, starts: np.ndarray, ends: np.ndarray, joined: bytes | bytearray,
                  large_value: LargeValue) -> None:  # fmt: skip
    """Each value is one JSON value as ``raw_decode`` reads it from its first byte: each
    begins and ends with a bracket that the marks match, so one ``json.loads`` of them
    joined in a list, with as many members, says so of all (a window holding a value larger
    than itself: ``large_value`` reads each)."""
    if int((ends - starts).max()) > text_scan.WINDOW:
        for first, last in zip(starts.tolist(), ends.tolist(), strict=True):
            large_value(first, last)
        return
    try:
        parsed = json.loads(b"".join((b"[", joined, b"]")).decode())
    except (ValueError, RecursionError):
        raise Unsure from None
    if len(parsed) != len(ends):
        raise Unsure
