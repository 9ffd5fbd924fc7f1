"""The ``{"b64": ...}`` values of a body decoded straight into one array, a value at a time
(no document, no list of bytes objects): what ``json_strings`` gives for a list of b64
objects.

Each value is decoded by ``json_reader.decode_b64``, the general reader's own rules (standard
or URL-safe alphabet, padding optional); a value it refuses, or one with an escape or a byte
beyond ASCII, raises ``NotDecoded`` and the general reader reads the body and words the
error. The bytes go into a fixed-width ``S`` array (its width from the longest text: 3 bytes
per 4 characters), or an object array when the widths would waste memory or a value ends in
a NUL byte (which an ``S`` array drops: decoded binary often does).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from sagemaker_tfs.model_server.errors import ServingError
from sagemaker_tfs.model_server.rest.json_reader import decode_b64


class NotDecoded(Exception):
    """A value the general reader refuses or reads otherwise: it reads the body."""


def decode_b64_spans(body: bytes | bytearray, starts: np.ndarray, ends: np.ndarray,
                     max_waste: int) -> np.ndarray:  # fmt: skip
    """The values between ``starts`` and ``ends`` decoded, as a flat array."""
    lengths = ends - starts
    width = (int(lengths.max()) + 3) // 4 * 3 if lengths.size else 0
    decoded_bytes = int(lengths.sum()) // 4 * 3
    values: np.ndarray
    if starts.size * width > max_waste * decoded_bytes + (1 << 20):
        values = np.empty(starts.size, dtype=object)
    else:
        values = np.zeros(starts.size, dtype=f"S{max(width, 1)}")
    view = memoryview(body)
    for index, start, end in spans(starts, ends):
        decoded = _decoded(view[start:end])
        if decoded.endswith(b"\x00") and values.dtype != object:
            values = values.astype(object)  # the values so far end in no NUL: kept whole
        values[index] = decoded
    return values


SPANS_AT_A_TIME = 1 << 14


def spans(starts: np.ndarray, ends: np.ndarray) -> Iterator[tuple[int, int, int]]:
    """(index, start, end) of each span, as Python ints made a block at a time (not two
    lists of them: 36 bytes an offset)."""
    for first in range(0, starts.size, SPANS_AT_A_TIME):
        block = slice(first, first + SPANS_AT_A_TIME)
        pairs = zip(starts[block].tolist(), ends[block].tolist(), strict=True)
        for index, (start, end) in enumerate(pairs, first):
            yield index, start, end


def _decoded(span: memoryview) -> bytes:
    raw = bytes(span)
    if b"\\" in raw:
        raise NotDecoded
    try:
        return decode_b64(str(raw, "ascii"))
    except (UnicodeDecodeError, ServingError):
        raise NotDecoded from None
