"""TF Serving's REST JSON for tensors, byte for byte: float text, quoting, layout, and Predict's
answer (``{"predictions": ...}`` / ``{"outputs": ...}``) written in pieces.

Shared by the model server's REST API (``model_server/rest/json_writer.py``, ``predict_json.py``)
and the service, which answers JSON and CSV bodies it sent over gRPC with the same bytes the
REST API would have written. The layout is rapidjson's ``PrettyWriter`` as TF Serving uses it:
4-space indent, arrays on one line inside rows (``kFormatSingleLineArray``) while the outer
``predictions`` array closes on its own line, objects always multi-line. Floats follow TF
Serving's rule: ``%.6g``, else ``%.9g`` (float) / ``%.17g`` (double) when ``%.6g`` does not
round-trip, then ``.0`` appended when there is neither ``.`` nor ``e``.

A large answer is written a block of rows at a time (:func:`predict_answer_pieces`): its
text is never held as one string beside the per-element strings it is made of.
"""

from __future__ import annotations

import base64
import functools
import math
import re
from collections.abc import Iterator, Mapping
from decimal import Decimal
from typing import Any

import numpy as np

from sagemaker_tfs.wire.float_texts import joined_texts, printed_texts

INDENT = "    "
B64_KEY = "b64"
BYTES_SUFFIX = "_bytes"  # string outputs with an alias ending so are written as b64 objects
# Elements formatted at a time by predict_answer_pieces (a block's strings, then its text).
# A float block's byte matrix and index arrays are ~180 bytes a value while it is laid out:
# 3 MB for 16,384 values (65,536 held 12 MB: 0.12x a 100 MB body), and as fast or faster.
PIECE_ELEMENTS = 1 << 14
# Float arrays up to this size are printed a value at a time (:func:`printed_texts`): NumPy's
# ~60 array operations cost ~50 us whatever the size, a value in Python ~0.6 us.
FEW_FLOATS = 64
# Rows of floats of up to this many elements are laid out with their brackets as separators
# (:func:`_joined_row_bytes`); longer ones a row at a time.
ROW_SEPARATORS = 4096


class TensorJsonError(ValueError):
    """A tensor that TF Serving's JSON answer cannot hold (the model server answers it as an
    INVALID_ARGUMENT with this message)."""


_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r"}
_ESCAPES["\t"] = "\\t"
_NEEDS_ESCAPE = re.compile(r'["\\\x00-\x1f]')


def _escape_char(match: re.Match) -> str:
    char = match.group(0)
    return _ESCAPES.get(char) or f"\\u{ord(char):04X}"


def quote(text: str) -> str:
    """A JSON string as rapidjson writes it (only quote, backslash and controls escaped)."""
    return '"' + _NEEDS_ESCAPE.sub(_escape_char, text) + '"'


def render_object(members: list[tuple[str, str]], depth: int) -> str:
    """An object whose member values are already rendered; ``depth`` = containers open."""
    if not members:
        return "{}"
    indent = "\n" + INDENT * (depth + 1)
    body = ",".join(f"{indent}{quote(key)}: {value}" for key, value in members)
    return "{" + body + "\n" + INDENT * depth + "}"


def render_document(key: str, rendered: str) -> bytes:
    """A response: ``{"<key>": <rendered>}`` as UTF-8 (request bytes kept as they came)."""
    return _utf8(render_object([(key, rendered)], 0))


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", errors="surrogateescape")


# --------------------------------------------------------------------------- elements


def format_floats(values: np.ndarray) -> list[str]:
    """TF Serving's float text for every element of a float array (flattened).

    The rule: ``%.6g``; if that does not read back as the value, ``%.9g`` (float) or
    ``%.17g`` (double); then ``.0`` when the text has neither ``.`` nor ``e``. The texts are
    laid out by NumPy for all values at once (``wire/float_texts``), a few values one by one.
    """
    if values.size <= FEW_FLOATS:
        return printed_texts(values)
    return joined_texts(values, b", ").decode("ascii").split(", ")


def joined_floats(vector: np.ndarray) -> str:
    """``", ".join(format_floats(vector))``, without a string per value."""
    return _joined_float_bytes(vector).decode("ascii")


def _joined_row_bytes(rows: np.ndarray) -> bytes:
    """The rows of a float array of two or more dimensions on one line, laid out with the
    brackets between rows as separators."""
    inner = rows.shape[1:]
    return b"[" * len(inner) + joined_texts(rows, _row_separators(inner)) + b"]" * len(inner)


def _joined_float_bytes(vector: np.ndarray) -> bytes:
    """``joined_floats(vector)`` as ASCII, without a str of the text made on the way."""
    if vector.size <= FEW_FLOATS:
        return ", ".join(printed_texts(vector)).encode("ascii")
    return joined_texts(vector, b", ")


@functools.lru_cache(maxsize=64)
def _row_separators(inner: tuple[int, ...]) -> list[bytes]:
    """What follows each element of a row of shape ``inner`` on one line: ``, `` and the
    brackets of the lists that end there and begin after it."""
    separators = []
    for index in range(math.prod(inner)):
        closed, position = 0, index
        for size in reversed(inner):
            if position % size != size - 1:
                break
            closed, position = closed + 1, position // size
        separators.append(b"]" * closed + b", " + b"[" * closed)
    return separators


def element_texts(array: np.ndarray, as_b64: bool) -> list[str]:
    """Every element of ``array`` as JSON text (b64 objects are rendered later)."""
    kind = array.dtype.kind
    if kind == "f":
        return format_floats(array)
    if array.dtype.name == "bfloat16":  # ml_dtypes's, not imported here: see wire/tensors.py
        return format_floats(array.astype(np.float32))
    if kind in "iu":
        return list(map(str, array.reshape(-1).tolist()))
    if kind == "b":
        return ["true" if v else "false" for v in array.reshape(-1).tolist()]
    if kind in "OSU":
        items = [_as_bytes(v) for v in array.reshape(-1).tolist()]
        if as_b64:
            return [base64.b64encode(item).decode("ascii") for item in items]
        return [quote(item.decode("utf-8", errors="surrogateescape")) for item in items]
    raise TensorJsonError(f"Tensor of type {array.dtype} is not supported in JSON responses")


def _as_bytes(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    return str(value).encode("utf-8", errors="surrogateescape")


def _b64_object(encoded: str, depth: int) -> str:
    return render_object([(B64_KEY, '"' + encoded + '"')], depth)


# --------------------------------------------------------------------------- arrays


def render_array(array: np.ndarray, depth: int, single_line: bool, as_b64: bool = False) -> str:
    """An n-d array; ``depth`` = containers open around it; single-line or one per line."""
    tokens = element_texts(array, as_b64)
    return _nest(tokens, array.shape, depth, single_line, as_b64)


def render_array_rows(
    array: np.ndarray, depth: int, as_b64: bool = False, single_line: bool = True
) -> list[str]:
    """Each row (first-dimension slice) of ``array`` rendered at ``depth``."""
    tokens = element_texts(array, as_b64)
    inner = array.shape[1:]
    if not inner:  # a vector's rows are its elements
        return [_b64_object(token, depth) for token in tokens] if as_b64 else tokens
    step = int(np.prod(inner))
    return [
        _nest(tokens[i * step : (i + 1) * step], inner, depth, single_line, as_b64)
        for i in range(array.shape[0])
    ]


def _nest(tokens: list[str], shape: tuple[int, ...], depth: int, single: bool, b64: bool) -> str:
    if not shape:
        return _b64_object(tokens[0], depth) if b64 else tokens[0]
    if shape[0] == 0:
        return "[]"
    inner = shape[1:]
    if not inner:
        items = [_b64_object(t, depth + 1) for t in tokens] if b64 else tokens
    else:
        step = int(np.prod(inner))
        items = [
            _nest(tokens[i * step : (i + 1) * step], inner, depth + 1, single, b64)
            for i in range(shape[0])
        ]
    if single:
        return "[" + ", ".join(items) + "]"
    separator = "\n" + INDENT * (depth + 1)
    return "[" + separator + ("," + separator).join(items) + "\n" + INDENT * depth + "]"


def _rows_per_piece(array: np.ndarray) -> int:
    row_size = int(np.prod(array.shape[1:])) if array.ndim > 1 else 1
    return max(1, PIECE_ELEMENTS // max(row_size, 1))


def _array_pieces(array: np.ndarray, depth: int, single: bool, b64: bool,
                  close: str | None = None) -> Iterator[str | bytes]:  # fmt: skip
    """``render_array(array, depth, single, b64)`` in pieces of whole rows; ``close``
    replaces its closing bracket (the row answer's ``\\n    ]``). Float texts come as ASCII
    bytes (a block's text is not copied into a str and back)."""
    if array.ndim == 0 or array.shape[0] == 0:
        text = render_array(array, depth, single, b64)
        yield text if close is None else text[:-1] + close
        return
    separator = "\n" + INDENT * (depth + 1)
    opening, joiner = ("[", ", ") if single else ("[" + separator, "," + separator)
    if close is None:
        close = "]" if single else "\n" + INDENT * depth + "]"
    yield opening
    step = _rows_per_piece(array)
    floats = single and not b64 and array.dtype.kind == "f"
    for start in range(0, array.shape[0], step):
        piece = array[start : start + step]
        if floats and array.ndim == 1:
            yield (joiner.encode() if start else b"") + _joined_float_bytes(piece)
            continue
        if floats and piece.size > FEW_FLOATS and 0 < piece[0].size <= ROW_SEPARATORS:
            yield (joiner.encode() if start else b"") + _joined_row_bytes(piece)
            continue
        rows = render_array_rows(piece, depth + 1, b64, single)
        yield (joiner if start else "") + joiner.join(rows)
    yield close


# --------------------------------------------------------------------------- Predict's answer


def _as_b64(alias: str, array: np.ndarray) -> bool:
    return alias.endswith(BYTES_SUFFIX) and array.dtype.kind in "OSU"


def predict_answer_pieces(outputs: Mapping[str, np.ndarray], columnar: bool) -> Iterator[bytes]:
    """Predict's REST answer, ``{"predictions": ...}`` for a row request (``instances``),
    ``{"outputs": ...}`` for a columnar one (``inputs``), as UTF-8 pieces of about
    ``PIECE_ELEMENTS`` elements each; raises TensorJsonError before the first piece for
    outputs the answer cannot hold."""
    aliases = sorted(outputs)
    batch_size = 0 if columnar else _row_batch_size(outputs, aliases)
    for alias in aliases:
        element_texts(outputs[alias][:0] if outputs[alias].ndim else outputs[alias], False)
    if columnar:
        yield _utf8("{\n" + INDENT + '"outputs": ')
        pieces = _columnar_pieces(outputs, aliases)
    else:
        yield _utf8("{\n" + INDENT + '"predictions": ')
        pieces = _row_pieces(outputs, aliases, batch_size)
    for piece in pieces:
        yield piece if isinstance(piece, bytes) else _utf8(piece)
    yield b"\n}"


def _columnar_pieces(outputs: Mapping[str, np.ndarray],
                     aliases: list[str]) -> Iterator[str | bytes]:  # fmt: skip
    if len(aliases) == 1:
        alias = aliases[0]
        yield from _array_pieces(outputs[alias], 1, False, _as_b64(alias, outputs[alias]))
        return
    yield "{"
    for alias in aliases:
        yield ("," if alias != aliases[0] else "") + "\n" + INDENT * 2 + quote(alias) + ": "
        yield from _array_pieces(outputs[alias], 2, False, _as_b64(alias, outputs[alias]))
    yield "\n" + INDENT + "}"


def _row_pieces(outputs: Mapping[str, np.ndarray], aliases: list[str],
                batch_size: int) -> Iterator[str | bytes]:  # fmt: skip
    close = "\n" + INDENT + "]"
    if len(aliases) == 1:
        alias = aliases[0]
        array = outputs[alias]
        yield from _array_pieces(array, 1, True, _as_b64(alias, array), close)
        return
    yield "["
    step = min(_rows_per_piece(outputs[alias]) for alias in aliases)
    for start in range(0, batch_size, step):
        columns = {
            alias: render_array_rows(outputs[alias][start : start + step], 3,
                                     _as_b64(alias, outputs[alias]))  # fmt: skip
            for alias in aliases
        }
        rows = [
            render_object([(alias, columns[alias][row]) for alias in aliases], 2)
            for row in range(len(columns[aliases[0]]))
        ]
        yield (", " if start else "") + ", ".join(rows)
    yield close


def _row_batch_size(outputs: Mapping[str, np.ndarray], aliases: list[str]) -> int:
    batch_size = None
    for alias in aliases:
        array = outputs[alias]
        if array.ndim == 0:
            raise TensorJsonError(f"Tensor name: {alias} has no shape information ")
        if batch_size is None:
            batch_size = array.shape[0]
        elif array.shape[0] != batch_size:
            raise TensorJsonError(
                f"Tensor name: {alias} has inconsistent batch size: {array.shape[0]} "
                f"expecting: {batch_size}"
            )
    return batch_size or 0


def rapidjson_double(value: float) -> str:
    """A double as rapidjson's Writer prints it (shortest round trip, its own layout)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    sign = "-" if math.copysign(1.0, value) < 0 else ""
    _, digit_tuple, exponent = Decimal(repr(abs(value))).normalize().as_tuple()
    assert isinstance(exponent, int)  # a finite value: not 'n', 'N' or 'F'
    digits = "".join(map(str, digit_tuple)) or "0"
    if digits == "0":
        return sign + "0.0"
    length = len(digits)
    point = length + exponent  # decimal point position relative to the digits (rapidjson kk)
    if exponent >= 0 and point <= 21:
        text = digits + "0" * exponent + ".0"
    elif 0 < point <= 21:
        text = digits[:point] + "." + digits[point:]
    elif -6 < point <= 0:
        text = "0." + "0" * -point + digits
    elif length == 1:
        text = f"{digits}e{point - 1}"
    else:
        text = f"{digits[0]}.{digits[1:]}e{point - 1}"
    return sign + text


# A value quoted in TF Serving's error messages is cut to this many bytes.
MAX_DEBUG_VALUE_BYTES = 256
_CONSTANTS = {None: "null", True: "true", False: "false"}


def debug_string(value: Any) -> str:
    """A JSON value as TF Serving quotes it in messages: pretty, one-line arrays, cut."""
    text = _render_value(value, 0).encode("utf-8", errors="surrogateescape")
    return text[:MAX_DEBUG_VALUE_BYTES].decode("utf-8", errors="surrogateescape")


def _render_value(value: Any, depth: int) -> str:
    """A parsed JSON value in PrettyWriter style with single-line arrays."""
    if isinstance(value, dict):
        return render_object(
            [(key, _render_value(v, depth + 1)) for key, v in value.items()], depth
        )
    if isinstance(value, list):
        return "[" + ", ".join(_render_value(item, depth + 1) for item in value) + "]"
    return _render_scalar(value)


def _render_scalar(value: Any) -> str:
    kind = json_kind(value)
    if kind == "string":
        return quote(value)
    if kind == "number":
        return str(value) if isinstance(value, int) else rapidjson_double(value)
    return kind  # true, false, null: the kind is its own text


def json_kind(value: Any) -> str:
    """A parsed JSON value's kind: null, true, false, object, array, string or number."""
    if value is None or isinstance(value, bool):
        return _CONSTANTS[value]
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    return "string" if isinstance(value, str) else "number"
