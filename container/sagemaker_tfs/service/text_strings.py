"""A JSON body giving a string input (DT_STRING) its strings, read into the input's array as
the REST path (``conversion``, then the model server's JSON reader) would read it, for
``text_tensors`` (issue 53).

The value (under ``instances`` or ``inputs``, or a bare list, which conversion wraps into
one instance unless it is a list of lists) is parsed by the standard library's parser: for
many short strings it peaks at 7x the body where orjson (the model server reader's) peaks at
18x, and both read the same strings from a document both take. It must be a rectangular
nested list of strings and ``{"b64": ...}`` objects, or rows or a column that name the
input and hold such a list: a string is its UTF-8 bytes, a ``b64`` object the bytes it
encodes (the standard or the URL-safe alphabet, padding optional, as the reader decodes
it). Each value is necessarily a Python object here, as on the REST path; the lists are
walked once and let go of.

Anything else is None and goes the REST way, so that its answer and its errors are the REST
path's: JSON lines, ragged or empty lists, numbers or other values among the strings, a
``b64`` that does not decode, lone surrogates, documents the parser refuses, and one value
that is not in a list (the model server's REST path answers it with a 500 of its own).
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

import numpy as np

from sagemaker_tfs.service.text_json import MAX_DIMS, Document

B64_KEY = "b64"
CHUNK = 1 << 16  # strings made bytes at a time


def read_strings(document: Document, name: str) -> np.ndarray | None:
    """Input ``name``'s array (objects: bytes), or None (see the module)."""
    if document.lines:
        return None
    try:
        text = str(memoryview(document.body)[document.start : document.end], "utf-8")
        value = json.loads(text)
    except (ValueError, RecursionError):  # UnicodeDecodeError and JSONDecodeError among them
        return None
    del text
    if document.key is None:
        if not isinstance(value, list):
            return None
        if not (value and all(isinstance(member, list) for member in value)):
            value = [value]  # conversion's one instance
    elif document.key == "instances" and not isinstance(value, list):
        return None
    level = [_unnamed(value, name, document.key == "inputs")]
    del value  # the lists are let go of as the walk goes down (see _values_in_place)
    shape = _values_in_place(level)
    if not shape:  # None, or one value: the model server's REST answer is a 500 (its bug)
        return None
    array = np.empty(len(level), dtype=object)
    array[:] = level
    return array.reshape(shape)


def _unnamed(value: Any, name: str, columnar: bool) -> Any:
    """The input's value, out of rows (``[{"x": ...}, ...]``) or a column (``{"x": ...}``)
    that name it; the value as it is otherwise."""
    if name == B64_KEY:  # a row would be a b64 object
        return value
    if columnar:
        return value[name] if type(value) is dict and value.keys() == {name} else value
    rows = type(value) is list and value and all(type(row) is dict for row in value)
    if rows and all(row.keys() == {name} for row in value):
        return [row[name] for row in value]
    return value


def _values_in_place(level: list) -> tuple[int, ...] | None:
    """The shape of the rectangular nested list of strings that ``level`` holds, ``level``
    made its values' bytes in order (each string let go of as its bytes are made), or None.
    A level at a time: every member of a level is a list of the first one's length, or
    every member a value; each level's lists are let go of once the next is listed."""
    shape: list[int] = []
    while level and type(level[0]) is list:
        size = len(level[0])
        if size == 0 or len(shape) == MAX_DIMS:
            return None
        if not all(type(member) is list and len(member) == size for member in level):
            return None
        shape.append(size)
        level[:] = [item for member in level for item in member]
    for start in range(0, len(level), CHUNK):
        if not _strings_as_bytes(level, start, min(start + CHUNK, len(level))):
            for index in range(start, min(start + CHUNK, len(level))):
                data = _bytes_of(level[index])
                if data is None:
                    return None
                level[index] = data
    return tuple(shape)


def _strings_as_bytes(level: list, start: int, end: int) -> bool:
    """``level[start:end]`` made its strings' UTF-8 bytes with C loops (joined by NUL,
    encoded, split), when it holds strings only, none with a NUL; else False, ``level`` as
    it was. A chunk at a time, so that a chunk's strings are let go of before the next's
    bytes are made."""
    chunk = level[start:end]
    if set(map(type, chunk)) != {str}:
        return False
    joined = "\0".join(chunk)
    del chunk
    if joined.count("\0") != end - start - 1:
        return False
    try:
        encoded = joined.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: the REST path's error
        return False
    del joined
    level[start:end] = encoded.split(b"\0")
    return True


def _bytes_of(value: Any) -> bytes | None:
    """A string's UTF-8 bytes, a ``b64`` object's bytes, or None for anything else."""
    if type(value) is str:
        try:
            return value.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: the REST path's error
            return None
    if type(value) is dict and len(value) == 1 and type(value.get(B64_KEY)) is str:
        return _decoded_b64(value[B64_KEY])
    return None


def _decoded_b64(text: str) -> bytes | None:
    """The bytes of a ``b64`` value as the model server's reader decodes them, or None."""
    padded = text + "=" * (-len(text) % 4)
    try:
        if "-" in text or "_" in text:
            return base64.urlsafe_b64decode(padded)
        return base64.b64decode(padded, validate=True)
    except (binascii.Error, ValueError):
        return None
