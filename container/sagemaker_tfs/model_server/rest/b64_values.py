"""The ``{"b64": ...}`` values of a body decoded straight into one array (no document, no
list of bytes objects): what ``json_strings`` gives for a list of b64 objects.

Values of the standard alphabet are decoded by NumPy a block at a time (a table from
characters to 6-bit values, four of them to three bytes), the general reader's padding rules
(``json_reader.decode_b64``: padding optional, at most two ``=``) checked on the same arrays.
A block with any other value (URL-safe, refused, decoding to a trailing NUL byte, which an
``S`` array drops) sends the values one at a time through ``decode_b64`` itself; a value it
refuses, or one with an escape or a byte beyond ASCII, raises ``NotDecoded`` and the general
reader reads the body and words the error. The bytes go into a fixed-width ``S`` array (3
bytes per 4 characters of the longest text), or an object array when the widths would waste
memory or a value ends in a NUL byte.
"""

from __future__ import annotations

import binascii
from collections.abc import Iterator

import numpy as np

from sagemaker_tfs.model_server.errors import ServingError
from sagemaker_tfs.model_server.rest.json_reader import decode_b64

_STANDARD_ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
_PAD, _INVALID = 64, 255
_SEXTETS = np.full(256, _INVALID, dtype=np.uint8)
_SEXTETS[np.frombuffer(_STANDARD_ALPHABET, dtype=np.uint8)] = np.arange(64)
_SEXTETS[[ord("="), 0]] = _PAD  # a value's bytes are copied into zeros: past its end, padding
ROW_BLOCK_BYTES = 1 << 18  # bytes of values decoded (or copied) at a time


# A fixed-width array may hold up to this many times its values' bytes (plus one MB): beyond,
# the values are bytes objects in an object array.
MAX_WIDTH_WASTE = 4


def width_wastes(count: int, width: int, total: int) -> bool:
    """Whether ``count`` values of ``total`` bytes in all would waste memory as an ``S``
    array ``width`` bytes wide (one much longer than the rest)."""
    return count * width > MAX_WIDTH_WASTE * total + (1 << 20)


class NotDecoded(Exception):
    """A value the general reader refuses or reads otherwise: it reads the body."""


def decode_b64_spans(body: bytes | bytearray, data: np.ndarray, starts: np.ndarray,
                     ends: np.ndarray) -> np.ndarray:  # fmt: skip
    """The values between ``starts`` and ``ends`` decoded, as a flat array."""
    lengths = ends - starts
    width = (int(lengths.max()) + 3) // 4 * 4 if lengths.size else 0
    if width_wastes(starts.size, width, int(lengths.sum())):
        return _decoded_one_by_one(body, starts, ends, np.empty(starts.size, dtype=object))
    values = np.zeros(starts.size, dtype=f"S{max(width // 4 * 3, 1)}")
    if width == 0:
        return values  # every value empty
    rows = max(1, ROW_BLOCK_BYTES // max(width, 1))
    for first in range(0, starts.size, rows):
        block = slice(first, first + rows)
        if not _decode_block(data, starts[block], lengths[block], values[block], width):
            return _decoded_one_by_one(body, starts, ends, values)
    return values


def _decode_block(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray,
                  target: np.ndarray, width: int) -> bool:  # fmt: skip
    """Values of the standard alphabet, as ``decode_b64`` pads and checks them, decoded by
    NumPy into ``target``; False for a block with any other value (or one that decodes to a
    trailing NUL byte, which an ``S`` array would drop)."""
    chars = np.zeros((starts.size, width), dtype=np.uint8)
    copy_spans(data, starts, lengths, chars)
    sextets = _SEXTETS[chars]  # padding (and the zeros past a value) 64, others 255
    pads = sextets == _PAD
    if (sextets == _INVALID).any():
        return False
    first_pad = np.where(pads.any(axis=1), pads.argmax(axis=1), width)
    padded_length = (lengths + 3) // 4 * 4
    valid = (pads.sum(axis=1) == width - first_pad) & (padded_length - first_pad <= 2)
    if not valid.all():
        return False
    sextets[pads] = 0
    quads = sextets.reshape(starts.size, -1, 4).astype(np.uint32)
    words = quads[..., 0] << 18 | quads[..., 1] << 12 | quads[..., 2] << 6 | quads[..., 3]
    decoded = np.stack([words >> 16, words >> 8, words], axis=-1).astype(np.uint8)
    decoded = decoded.reshape(starts.size, -1)
    sizes = first_pad * 3 // 4
    decoded[np.arange(decoded.shape[1]) >= sizes[:, None]] = 0
    ends_in_nul = (sizes > 0) & (decoded[np.arange(starts.size), np.maximum(sizes - 1, 0)] == 0)
    if ends_in_nul.any():
        return False
    target.view(np.uint8).reshape(starts.size, -1)[:] = decoded
    return True


def _decoded_one_by_one(body: bytes | bytearray, starts: np.ndarray, ends: np.ndarray,
                        values: np.ndarray) -> np.ndarray:  # fmt: skip
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


_PADDINGS = (b"", b"===", b"==", b"=")  # by the length modulo 4, as decode_b64 pads


def _decoded(span: memoryview) -> bytes:
    """``decode_b64``'s result: for the standard alphabet, its checks (``b64decode``'s
    ``validate``: the alphabet, then at most two ``=``) made on bytes, then binascii's
    decoding, as it does (~3x faster a value); otherwise ``decode_b64`` itself."""
    raw = bytes(span)
    padded = raw + _PADDINGS[len(raw) % 4]
    data = padded.rstrip(b"=")
    if len(padded) - len(data) <= 2 and not data.translate(None, _STANDARD_ALPHABET):
        try:
            return binascii.a2b_base64(padded)
        except binascii.Error:
            raise NotDecoded from None
    if b"\\" in raw:
        raise NotDecoded
    try:
        return decode_b64(str(raw, "ascii"))
    except (UnicodeDecodeError, ServingError):
        raise NotDecoded from None


def copy_spans(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray,
                target: np.ndarray) -> None:  # fmt: skip
    """Row i of ``target`` gets ``data[starts[i]:starts[i] + lengths[i]]``, a block of rows
    at a time (an index per byte of a block only)."""
    width = target.shape[1]
    columns = np.arange(width)
    rows_per_block = max(1, ROW_BLOCK_BYTES // 8 // width)
    for first in range(0, starts.size, rows_per_block):
        block = slice(first, first + rows_per_block)
        within = columns < lengths[block, None]
        index = np.where(within, starts[block, None] + columns, 0)
        target[block] = np.where(within, data[index], 0)
