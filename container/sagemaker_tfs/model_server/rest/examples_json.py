"""Classify and regress over REST: ``examples`` as serialized tf.Examples, results as JSON.

Each example is an object of features, serialized by ``example_bytes`` (a window of
one-float examples at once by ``float_examples``). An optional ``context`` object is one
more example, shared by all (``context_bytes``).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from sagemaker_tfs.model_server.errors import invalid_argument
from sagemaker_tfs.model_server.rest.json_reader import decode_b64, is_b64_object
from sagemaker_tfs.model_server.rest.json_writer import json_value_error
from sagemaker_tfs.model_server.serving.classify_regress import label_text
from sagemaker_tfs.wire.float_texts import joined_texts
from sagemaker_tfs.wire.tfs_json import (
    B64_KEY,
    format_floats,
    joined_floats,
    quote,
)


def context_bytes(document: Mapping[str, Any]) -> bytes:
    """The serialized context of a classify/regress document (b"" without one), after the
    checks TF Serving makes before it reads the examples: an ``examples`` list, a ``context``
    object."""
    if "examples" not in document:
        raise invalid_argument("Missing 'examples' key")
    if not isinstance(document["examples"], list):
        raise json_value_error(document, "Expecting 'examples' to be an list/array")
    context = document.get("context", {})
    if not isinstance(context, dict):
        raise json_value_error(document, "Expecting 'context' to be an object")
    return example_bytes(context)


_BYTES, _FLOAT, _INT64 = 1, 2, 3  # Feature's fields: bytes_list, float_list, int64_list


def _feature_kind(name: str, value: Any, values: list[Any]) -> int:
    if all(
        isinstance(v, str) or (is_b64_object(v) and isinstance(v[B64_KEY], str)) for v in values
    ):
        return _BYTES
    if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return _INT64
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return _FLOAT
    raise json_value_error(value, f"Feature: {name} has values of unsupported or mixed types")


def _feature_bytes(value: Any) -> bytes:
    if isinstance(value, str):
        return value.encode("utf-8", errors="surrogateescape")
    return decode_b64(value[B64_KEY])


def example_bytes(features: Mapping[str, Any]) -> bytes:
    """The serialized tf.Example of a JSON object: each feature a bytes list (strings,
    ``{"b64": ...}`` objects), an int64 list (integers) or a float list (numbers), in the
    object's order, each map entry's value written before its key (protobuf and
    TensorFlow's example parser read a message's fields in any order). So a serialized
    example ends with a feature's name, not with a value that may end in a NUL byte (an
    ``S`` array drops it). Protobuf's own order is its hash table's, which varies from one
    process to the next. A lone float or string is written without the type checks of a
    list. Measured on 10 MB of one-feature examples: 1.3 s where filling and serializing
    Example protos took 2.9 s."""
    if not features:
        return b""
    entries = []
    for name, value in features.items():
        kind = type(value)
        if kind is float and -_FLOAT32_MAX <= value <= _FLOAT32_MAX:
            feature = _ONE_FLOAT + _FLOAT32.pack(value)
        elif kind is str:
            text = _delimited(_ENTRY_TAG, value.encode("utf-8", errors="surrogateescape"))
            feature = _delimited(_KEY_TAG, _delimited(_ENTRY_TAG, text))
        else:
            feature = _delimited(_KEY_TAG, _encoded_feature(name, value))
        key = _NAMES.get(name) or _name(name)
        entries.append(_delimited(_ENTRY_TAG, feature + key))
    return _delimited(_ENTRY_TAG, b"".join(entries))


_NAMES: dict[str, bytes] = {}  # a feature name's key field, for the first names seen
_FLOAT32 = struct.Struct("<f")
_FLOAT32_MAX = float(np.finfo(np.float32).max)


def _name(name: str) -> bytes:
    key = _delimited(_ENTRY_TAG, name.encode())
    if len(_NAMES) < 4096:
        _NAMES[name] = key
    return key


_ENTRY_TAG, _KEY_TAG = 0x0A, 0x12  # field 1 (length-delimited), field 2 (the map value)
_INT64_MIN, _INT64_MAX, _MASK = -(2**63), 2**63 - 1, 2**64 - 1


def _encoded_feature(name: str, value: Any) -> bytes:
    values = value if isinstance(value, list) else [value]
    if not values:
        return b""
    kind = _feature_kind(name, value, values)
    if kind == _BYTES:
        listed = b"".join(_delimited(_ENTRY_TAG, _feature_bytes(v)) for v in values)
    elif kind == _INT64:
        if min(values) < _INT64_MIN or max(values) > _INT64_MAX:
            beyond = next(v for v in values if not _INT64_MIN <= v <= _INT64_MAX)
            raise json_value_error(value, f"Feature: {name} has {beyond}, outside int64")
        listed = _delimited(_ENTRY_TAG, b"".join(_varint(v & _MASK) for v in values))
    else:
        listed = _delimited(_ENTRY_TAG, _packed_floats(values))
    return _delimited(kind << 3 | 2, listed)


def _delimited(tag: int, payload: bytes) -> bytes:
    size = len(payload)
    return bytes((tag, size)) + payload if size < 0x80 else bytes((tag,)) + _varint(size) + payload


def _varint(number: int) -> bytes:
    if number < 0x80:
        return bytes((number,))
    out = bytearray()
    while number >= 0x80:
        out.append(number & 0x7F | 0x80)
        number >>= 7
    out.append(number)
    return bytes(out)


def float_examples(examples: list[Any]) -> np.ndarray | None:
    """Objects of the same names, each a float, serialized at once: a row of bytes each,
    what ``example_bytes`` gives (~0.3 s per 10 MB where one at a time takes ~1.3 s); None
    for any other list."""
    first = examples[0] if examples else None
    if not isinstance(first, dict) or not first:
        return None
    names = first.keys()
    if not all(type(e) is dict and e.keys() == names for e in examples):
        return None
    columns = []
    for name in names:
        values = [example[name] for example in examples]
        if set(map(type, values)) != {float}:
            return None
        with np.errstate(over="ignore"):
            columns.append(np.array(values, dtype=np.float64).astype("<f4"))
    pieces: list[bytes | np.ndarray] = []
    for name, column in zip(names, columns, strict=True):
        key = _delimited(_ENTRY_TAG, name.encode())
        pieces += [bytes((_ENTRY_TAG,)) + _varint(10 + len(key)) + _ONE_FLOAT, column, key]
    size = sum(4 if isinstance(piece, np.ndarray) else len(piece) for piece in pieces)
    pieces.insert(0, bytes((_ENTRY_TAG,)) + _varint(size))
    table = np.empty((len(examples), size + len(pieces[0])), dtype=np.uint8)
    offset = 0
    for piece in pieces:
        if isinstance(piece, np.ndarray):
            table[:, offset : offset + 4] = piece.view(np.uint8).reshape(-1, 4)
            offset += 4
        else:
            table[:, offset : offset + len(piece)] = np.frombuffer(piece, dtype=np.uint8)
            offset += len(piece)
    return table


_ONE_FLOAT = b"\x12\x08\x12\x06\x0a\x04"  # the map value: a Feature of a float list of one


def _packed_floats(values: list[Any]) -> bytes:
    """float32 as protobuf casts doubles (beyond float32: infinity)."""
    try:
        return struct.pack(f"<{len(values)}f", *values)
    except OverflowError:
        with np.errstate(over="ignore"):
            return np.array(values, dtype=np.float64).astype(np.float32).tobytes()


ROWS_AT_A_TIME = 1 << 14  # rows of an answer written at a time


def format_regress_response(values: np.ndarray) -> bytearray:
    """``{"results": [v, ...]}`` with every value on one line, written a block of values at
    a time from the output (no result proto, no string per value)."""
    blocks = (
        joined_floats(values[first : first + ROWS_AT_A_TIME])
        for first in range(0, values.size, ROWS_AT_A_TIME)
    )
    return _results(blocks)


def format_classify_response(
    classified: tuple[np.ndarray | None, np.ndarray | None],
) -> bytearray:
    """``{"results": [[["label", score], ...], ...]}`` with every list on one line, written
    a block of rows at a time from the outputs (``Classified``; a missing output: labels
    "", scores 0)."""
    classes, scores = classified
    rows = classes if classes is not None else scores
    assert rows is not None
    if scores is None:
        scores = np.zeros(rows.shape, dtype=np.float32)
    blocks = (
        _classified_rows(
            None if classes is None else classes[first : first + ROWS_AT_A_TIME],
            scores[first : first + ROWS_AT_A_TIME],
        )
        for first in range(0, rows.shape[0], ROWS_AT_A_TIME)
    )
    return _results(blocks)


def _results(blocks: Iterator[str]) -> bytearray:
    """``render_document("results", "[" + ", ".join(blocks) + "]")``, one block added to the
    answer at a time."""
    answer = bytearray(b'{\n    "results": [')
    separator = b""
    for block in blocks:
        answer += separator
        answer += block.encode("utf-8", errors="surrogateescape")
        separator = b", "
    answer += b"]\n}"
    return answer


def _classified_rows(classes: np.ndarray | None, scores: np.ndarray) -> str:
    """Rows joined by ", "; without labels, the scores' texts joined by the bytes between
    them (no string per row)."""
    count, width = scores.shape
    if classes is None and width:
        between = [b'], ["", '] * (width - 1) + [b']], [["", ']
        return '[["", ' + joined_texts(scores, between).decode("ascii") + "]]"
    texts = iter(format_floats(scores))
    labels = ['""'] * width
    rows = []
    for row in range(count):
        if classes is not None:
            labels = [quote(label_text(label)) for label in classes[row]]
        rows.append("[" + ", ".join(f"[{label}, {next(texts)}]" for label in labels) + "]")
    return ", ".join(rows)
