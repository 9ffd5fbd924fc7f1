"""A predict body of strings read straight into one array, without a Python object per string.

``{"instances": [...]}`` or ``{"inputs": [...]}`` whose value is a rectangular (nested) list
of JSON strings, and nothing else: the strings' bytes are copied from the body into a NumPy
fixed-width ``S`` array (one buffer; TensorFlow feeds it as a string tensor), found by the
positions of the body's quotes. The general reader (orjson, then a list of bytes objects)
holds ~12x the body for short strings; this one the body, the quotes' offsets (4 bytes
each) and the array.

Only bodies the general reader would read without error, and to the same bytes, are taken:
anything else (other keys, ``{"b64": ...}`` objects, empty lists, scalars, ragged lists,
bytes after the root object, control characters in a string, ``\\uD800``-like escapes, an
escape the standard parser refuses) returns None, and the caller reads the body the general
way, which words the error as TF Serving does. Strings with a backslash are decoded one by
one by the standard parser; bytes that are not UTF-8 are kept as they came, as the general
reader keeps them. Strings of very unequal lengths (a fixed width that would waste memory)
and strings ending in a NUL byte (which an ``S`` array drops) become an object array of
bytes instead.

The offsets let go of once a large body is read are handed back to the kernel
(``trim_heap``): under glibc's mmap threshold (which grows to 32 MB as large arrays are
freed) they stay in the heap, below the array, and TensorFlow's tensors of the run came
on top of them. Measured in process on ``dtype_echo``, a 10 MB body's peak growth
(docs/performance.md): 6.05x the body before, 4.41x after.
"""

from __future__ import annotations

import json
import math
import re

import numpy as np

from sagemaker_tfs.model_server.rest.b64_values import (
    NotDecoded,
    copy_spans,
    decode_b64_spans,
    spans,
    width_wastes,
)
from sagemaker_tfs.model_server.serving.garbage import trim_heap

KEYS = (b"instances", b"inputs")
# Bytes of the body looked at a block at a time when its structure is taken out.
BLOCK_BYTES = 1 << 18
# A body this large has its reading's freed offsets handed back before the run.
TRIM_BYTES = 1 << 20
_QUOTE, _BACKSLASH, _STRING_MARK = ord('"'), ord("\\"), ord("s")
_WHITESPACE = b" \t\n\r"
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_STRICT = json.JSONDecoder()


class _NotPlain(Exception):
    """The body is not one this reader takes: the general reader reads it."""


def read_string_tensor(
    body: bytes | bytearray, alias: str | None = None
) -> tuple[str, np.ndarray] | None:
    """(``"instances"`` or ``"inputs"``, the strings as an array of their nested lists'
    shape), or None when the body is not a plain list of strings under one of those keys;
    with ``alias`` (the one input's), also a list of ``{alias: string}`` rows under
    ``instances`` (what the service sends for JSON lines of one string each)."""
    try:
        return _read(body, alias)
    except _NotPlain:
        return None
    finally:
        if len(body) >= TRIM_BYTES:
            trim_heap()


def _read(body: bytes | bytearray, alias: str | None) -> tuple[str, np.ndarray]:
    data = np.frombuffer(body, dtype=np.uint8)
    if not data.size or b'"' not in body:
        raise _NotPlain
    quotes = _string_quotes(body, data)
    if quotes.size < 4 or quotes.size % 2:
        raise _NotPlain
    skeleton = _skeleton(data, quotes)
    starts, ends = quotes[0::2] + 1, quotes[1::2].copy()
    del quotes  # half of it kept (ends) rather than all of it
    _refuse_controls_in_strings(data, starts, ends)
    key = bytes(body[int(starts[0]) : int(ends[0])])
    if key not in KEYS or not skeleton.startswith(b"{s:") or not skeleton.endswith(b"}"):
        raise _NotPlain
    value = skeleton[3:-1]
    if b"{" in value:
        if (
            alias is not None
            and key == b"instances"
            and _named_rows(data, value, starts, ends, alias)
        ):
            return key.decode(), _string_array(body, data, starts[2::2], ends[2::2])
        return key.decode(), _b64_values(body, data, value, starts[1:], ends[1:])
    shape = _rectangular_shape(value, starts.size - 1)
    values = _string_array(body, data, starts[1:], ends[1:])
    return key.decode(), values.reshape(shape)


def _named_rows(data: np.ndarray, value: bytes, starts: np.ndarray, ends: np.ndarray,
                alias: str) -> bool:  # fmt: skip
    """``[{s:s},...]``: one list of objects, each of one string named ``alias`` (not
    ``b64``: such objects are b64 values), checked without a copy of the skeleton."""
    name = alias.encode()
    if name == b"b64" or starts.size % 2 == 0:
        return False
    key_starts = starts[1::2]
    named = ends[1::2] - key_starts == len(name)
    for offset, byte in enumerate(name):
        if not named.all():
            return False
        named &= data[np.minimum(key_starts + offset, data.size - 1)] == byte
    if not named.all():
        return False
    rows = key_starts.size
    counts = (value.count(b"{s:s}"), value.count(b","), value.count(b"["), len(value))
    if counts != (rows, rows - 1, 1, 6 * rows + 1) or value[:1] + value[-1:] != b"[]":
        return False
    return not any(pair in value for pair in (b"}{", b",,", b"[,", b",]"))


def _b64_values(body: bytes | bytearray, data: np.ndarray, value: bytes, starts: np.ndarray,
                ends: np.ndarray) -> np.ndarray:  # fmt: skip
    """Lists of ``{"b64": ...}`` objects only (each ``{s:s}`` in the skeleton), decoded."""
    if starts.size % 2:
        raise _NotPlain
    shape = _rectangular_shape(value.replace(b"{s:s}", b"s"), starts.size // 2)
    key_starts, key_ends = starts[0::2], ends[0::2]
    is_b64 = (key_ends - key_starts == 3) & (data[key_starts] == ord("b"))
    is_b64 &= (data[key_starts + 1] == ord("6")) & (data[key_starts + 2] == ord("4"))
    if not is_b64.all():
        raise _NotPlain
    try:
        values = decode_b64_spans(body, data, starts[1::2], ends[1::2])
    except NotDecoded:
        raise _NotPlain from None
    return values.reshape(shape)


def _string_quotes(body: bytes | bytearray, data: np.ndarray) -> np.ndarray:
    """Offsets of the quotes that open or close a string (not the escaped ones), found a
    block at a time, 4 bytes each for a body under 2 GB."""
    offset_type = np.int32 if data.size < 2**31 else np.int64
    quotes = np.concatenate([
        (np.flatnonzero(data[block : block + BLOCK_BYTES] == _QUOTE) + block).astype(offset_type)
        for block in range(0, data.size, BLOCK_BYTES)
    ])  # fmt: skip
    if b"\\" not in body:
        return quotes
    after_backslash = quotes[(quotes > 0) & (data[np.maximum(quotes - 1, 0)] == _BACKSLASH)]
    escaped = [q for q in after_backslash.tolist() if _backslashes_before(body, q) % 2]
    return np.setdiff1d(quotes, np.array(escaped, dtype=offset_type), assume_unique=True)


def _backslashes_before(body: bytes | bytearray, offset: int) -> int:
    count = 0
    while offset - count > 0 and body[offset - count - 1] == _BACKSLASH:
        count += 1
    return count


def _refuse_controls_in_strings(data: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> None:
    """A control character inside a string is an error: the general reader words it."""
    for block in range(0, data.size, BLOCK_BYTES):
        controls = np.flatnonzero(data[block : block + BLOCK_BYTES] < 0x20) + block
        controls = controls.astype(starts.dtype)  # searched without a cast of starts
        if not controls.size:
            continue
        owner = np.searchsorted(starts, controls, side="right") - 1
        inside = (owner >= 0) & (controls < ends[np.maximum(owner, 0)])
        if inside.any():
            raise _NotPlain


def _skeleton(data: np.ndarray, quotes: np.ndarray) -> bytes:
    """The body outside its strings, whitespace removed, each string written ``s``."""
    pieces = []
    for block in range(0, data.size, BLOCK_BYTES):
        chunk = data[block : block + BLOCK_BYTES].copy()
        bounds = np.array([block, block + chunk.size], dtype=quotes.dtype)  # no cast of quotes
        first, last = np.searchsorted(quotes, bounds)
        inside_at_start = first % 2 == 1
        marks = np.zeros(chunk.size + 1, dtype=np.int8)
        local = quotes[first:last] - block
        opening = local[(np.arange(first, last) % 2) == 0]
        closing = local[(np.arange(first, last) % 2) == 1]
        marks[0] = 1 if inside_at_start else 0
        np.add.at(marks, opening, 1)
        np.add.at(marks, closing, -1)
        outside = np.cumsum(marks[:-1], dtype=np.int8) == 0
        chunk[closing] = _STRING_MARK
        outside[opening] = False
        pieces.append(chunk[outside].tobytes())
    return b"".join(pieces).translate(None, _WHITESPACE)


def _rectangular_shape(value: bytes, count: int) -> tuple[int, ...]:
    """The shape of a skeleton such as ``[[s,s],[s,s]]`` holding ``count`` strings; raises
    _NotPlain unless every list of a level has the same, non-zero length."""
    leading = re.match(rb"\[*", value)
    depth = leading.end() if leading else 0
    if depth == 0:
        raise _NotPlain
    shape: list[int] = []
    row = b"s"
    for level in range(depth, 0, -1):
        end = value.find(b"]" * (depth - level + 1))
        if end < 0:
            raise _NotPlain
        items = end + (depth - level) - level  # the first list of this level, unbracketed
        size = (items + 1) // (len(row) + 1)
        if size == 0:
            raise _NotPlain
        shape.insert(0, size)
        row = b"[" + row + (b"," + row) * (size - 1) + b"]"
    if row != value or math.prod(shape) != count:
        raise _NotPlain
    return tuple(shape)


def _string_array(body: bytes | bytearray, data: np.ndarray, starts: np.ndarray,
                  ends: np.ndarray) -> np.ndarray:  # fmt: skip
    """The strings between ``starts`` and ``ends``, escapes decoded, as a flat array."""
    lengths = ends - starts  # an escaped string's text is shorter: the width may be wider
    decoded = _escaped_strings(body, data, starts, ends)
    width = int(lengths.max()) if lengths.size else 0
    nul_ended = any(text.endswith(b"\x00") for text in decoded.values())
    if nul_ended or width_wastes(lengths.size, width, int(lengths.sum())):
        return _object_array(body, starts, ends, decoded)
    values = np.zeros(starts.size, dtype=f"S{max(width, 1)}")
    copy_spans(data, starts, lengths, values.view(np.uint8).reshape(starts.size, -1))
    for index, text in decoded.items():
        values[index] = text
    return values


def _escaped_strings(body: bytes | bytearray, data: np.ndarray, starts: np.ndarray,
                     ends: np.ndarray) -> dict[int, bytes]:  # fmt: skip
    """The strings that hold a backslash, decoded by the standard parser."""
    if b"\\" not in body:
        return {}
    decoded: dict[int, bytes] = {}
    backslashes = np.flatnonzero(data == _BACKSLASH)
    owners = np.unique(np.searchsorted(starts, backslashes, side="right") - 1)
    for index in owners.tolist():
        if index < 0:
            continue
        raw = bytes(body[int(starts[index]) : int(ends[index])])
        if b"\\" not in raw:
            continue  # a backslash outside strings: the skeleton refuses it
        if _SURROGATE_ESCAPE.search(raw):
            raise _NotPlain
        try:
            text = _STRICT.decode('"' + raw.decode("utf-8", errors="surrogateescape") + '"')
        except json.JSONDecodeError:
            raise _NotPlain from None
        decoded[index] = text.encode("utf-8", errors="surrogateescape")
    return decoded


def _object_array(body: bytes | bytearray, starts: np.ndarray, ends: np.ndarray,
                  decoded: dict[int, bytes]) -> np.ndarray:  # fmt: skip
    values = np.empty(starts.size, dtype=object)
    view = memoryview(body)
    for index, start, end in spans(starts, ends):
        text = decoded.get(index)
        values[index] = bytes(view[start:end]) if text is None else text
    return values
