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
import math
import re
import struct
from collections.abc import Iterator, Mapping
from decimal import Decimal
from typing import Any

import numpy as np

try:  # ships with TensorFlow; bfloat16 tensors need it
    from ml_dtypes import bfloat16 as _BFLOAT16
except ImportError:  # pragma: no cover
    _BFLOAT16 = None

INDENT = "    "
B64_KEY = "b64"
BYTES_SUFFIX = "_bytes"  # string outputs with an alias ending so are written as b64 objects
# Elements formatted at a time by predict_answer_pieces (a block's strings, then its text).
PIECE_ELEMENTS = 1 << 16
# Float arrays up to this size are printed a value at a time (:func:`_few_float_texts`): NumPy's
# ~60 array operations cost ~50 us whatever the size, a value in Python ~0.6 us.
FEW_FLOATS = 64


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
    ``%.17g`` (double); then ``.0`` when the text has neither ``.`` nor ``e``. Which format
    each value takes is decided by NumPy from its 6-digit rounding (:func:`_short_reads_back`)
    where that is certain, and all values are then printed by one ``%`` over a format string
    with one conversion per value (in C, not one Python step per value). The few values that
    cannot be decided so (a rounding too close to call, a subnormal, an exponent beyond an
    exact power of ten) are printed and read back one by one (:func:`_printed_texts`).
    """
    if values.size == 0:
        return []
    if values.size <= FEW_FLOATS:
        return _few_float_texts(values)
    conversions, arguments = _float_conversions(values)
    return (_SEPARATOR.join(conversions.tolist()) % arguments).split(_SEPARATOR)


def joined_floats(vector: np.ndarray) -> str:
    """``", ".join(format_floats(vector))``, printed by one ``%`` whose format string holds the
    commas: no text per value to split and join again (a sixth less time for a large vector
    answer; for arrays of rows the nesting costs what it saves, so they are not done so)."""
    if vector.size == 0:
        return ""
    if vector.size <= FEW_FLOATS:
        return ", ".join(_few_float_texts(vector))
    conversions, arguments = _float_conversions(vector)
    return ", ".join(conversions.tolist()) % arguments


def _few_float_texts(values: np.ndarray) -> list[str]:
    """The rule applied literally in plain Python, for a few values (a small answer's whole
    cost would otherwise be the array operations that decide the format of thousands)."""
    if values.dtype == np.float64:
        python_values = values.reshape(-1).tolist()
        return [_float_text(value, _same_double, ".17g") for value in python_values]
    python_values = values.astype(np.float32).astype(np.float64).reshape(-1).tolist()
    return [_float_text(value, _same_float, ".9g") for value in python_values]


def _float_text(value: float, reads_back: Any, long_format: str) -> str:
    if value - value != 0.0:  # NaN or an infinity
        return _non_finite_text(value)
    text = f"{value:.6g}"
    if not reads_back(text, value):
        text = format(value, long_format)
    return text if "." in text or "e" in text else text + ".0"


def _same_double(text: str, value: float) -> bool:
    return float(text) == value


def _same_float(text: str, value: float) -> bool:
    """Whether ``text`` parsed and cast to float32, as TF Serving parses it, is ``value``."""
    try:
        return _FLOAT32.unpack(_FLOAT32.pack(float(text)))[0] == value
    except OverflowError:  # beyond float32's range: it does not read back
        return False


_FLOAT32 = struct.Struct("f")


def _float_conversions(values: np.ndarray) -> tuple[np.ndarray, tuple[Any, ...]]:
    """One ``%`` conversion per value (flattened) and the arguments they take: the value, or
    the text already printed for a value NumPy could not decide."""
    flat = np.ascontiguousarray(values).reshape(-1)
    is_double = flat.dtype == np.float64
    exact = flat if is_double else flat.astype(np.float32)
    finite = np.isfinite(exact)
    short, decided = _short_reads_back(exact)
    decided &= finite
    digit_limit = np.where(short, 1e6, 1e17 if is_double else 1e9)
    with np.errstate(invalid="ignore"):
        integral = decided & (np.floor(exact) == exact) & (np.abs(exact) < digit_limit)
    conversions = _CONVERSIONS_DOUBLE if is_double else _CONVERSIONS_FLOAT
    choice = np.where(decided, short * 2 + integral, 4)
    arguments = exact.astype(np.float64).astype(object)
    others = np.flatnonzero(~decided)
    if others.size:
        arguments[others] = _printed_texts(exact[others])
    return conversions[choice], tuple(arguments.tolist())


def _printed_texts(exact: np.ndarray) -> list[str]:
    """The rule applied literally, a value at a time: ``%.6g`` printed and read back, else the
    long format; ``.0`` where the text is integral and shorter than the format's precision
    (it then lacks ``.`` and ``e``)."""
    is_double = exact.dtype == np.float64
    finite = np.isfinite(exact)
    python_values = exact.astype(np.float64).tolist()
    texts = np.array([f"{value:.6g}" for value in python_values], dtype=object)
    parsed = np.array(list(map(float, texts.tolist())), dtype=np.float64).astype(exact.dtype)
    retry = finite & (parsed != exact)
    long_format = "%.17g" if is_double else "%.9g"
    texts[retry] = [long_format % python_values[i] for i in np.flatnonzero(retry).tolist()]
    if not finite.all():
        texts[~finite] = [_non_finite_text(python_values[i]) for i in np.flatnonzero(~finite)]
    digit_limit = np.where(retry, 1e17 if is_double else 1e9, 1e6)
    with np.errstate(invalid="ignore"):
        integral = finite & (np.floor(exact) == exact) & (np.abs(exact) < digit_limit)
    texts[integral] += ".0"
    return texts.tolist()


_SEPARATOR = "\0"  # in no float's text
# By (6 digits read back) * 2 + (".0" appended); 4: a text printed already.
_CONVERSIONS_FLOAT = np.array(["%.9g", "%.9g.0", "%.6g", "%.6g.0", "%s"], dtype=object)
_CONVERSIONS_DOUBLE = np.array(["%.17g", "%.17g.0", "%.6g", "%.6g.0", "%s"], dtype=object)
_EXACT_POWERS = 22  # 10**k is exact in a double for k <= 22


def _short_reads_back(exact: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Whether each value's ``%.6g`` text reads back as it, and where that is certain.

    ``%.6g`` rounds the exact binary value to 6 significant digits, to nearest, ties to
    even. Scaled by an exact power of ten (one float64 product or quotient, within half its
    spacing of the exact one), a value not that close to a half rounds to the same integer
    ``digits``; a carry to 10**6 moves the exponent. ``digits * 10**(exponent - 5)`` is then
    again one exact operation: the double that parsing the text gives, which is cast as TF
    Serving casts it and compared. Zeros read back; subnormals, ties too close to call and
    exponents beyond an exact power of ten are left undecided.
    """
    magnitude = np.abs(exact.astype(np.float64))
    normal = np.isfinite(magnitude) & (magnitude >= np.finfo(exact.dtype).tiny)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        exponent = np.floor(np.log10(np.where(normal, magnitude, 1.0))).astype(np.int64)
        shift = 5 - exponent
        certain = normal & (np.abs(shift) <= _EXACT_POWERS)
        shift = np.where(certain, shift, 0)
        scaled = np.where(shift >= 0, magnitude * 10.0 ** np.maximum(shift, 0),
                          magnitude / 10.0 ** np.maximum(-shift, 0))  # fmt: skip
        certain &= np.abs(scaled - np.floor(scaled) - 0.5) > 2 * np.spacing(scaled)
        digits = np.where(certain, np.rint(scaled), 1e5)
        carried = digits == 1e6
        digits = np.where(carried, 1e5, digits)
        power = np.where(carried, 1 - shift, -shift)
        certain &= (digits >= 1e5) & (digits < 1e6) & (np.abs(power) <= _EXACT_POWERS)
        power = np.where(certain, power, 0)
        back = np.where(power >= 0, digits * 10.0 ** np.maximum(power, 0),
                        digits / 10.0 ** np.maximum(-power, 0))  # fmt: skip
    reads_back = back.astype(exact.dtype) == magnitude.astype(exact.dtype)
    zero = exact == 0
    return (certain & reads_back) | zero, certain | zero


def _non_finite_text(value: float) -> str:
    if value != value:
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


def element_texts(array: np.ndarray, as_b64: bool) -> list[str]:
    """Every element of ``array`` as JSON text (b64 objects are rendered later)."""
    kind = array.dtype.kind
    if kind == "f":
        return format_floats(array)
    if _BFLOAT16 is not None and array.dtype == _BFLOAT16:
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
                  close: str | None = None) -> Iterator[str]:  # fmt: skip
    """``render_array(array, depth, single, b64)`` in pieces of whole rows; ``close``
    replaces its closing bracket (the row answer's ``\\n    ]``)."""
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
    float_vector = single and array.ndim == 1 and array.dtype.kind == "f"
    for start in range(0, array.shape[0], step):
        piece = array[start : start + step]
        if float_vector:
            yield (joiner if start else "") + joined_floats(piece)
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
        yield _utf8(piece)
    yield b"\n}"


def _columnar_pieces(outputs: Mapping[str, np.ndarray], aliases: list[str]) -> Iterator[str]:
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
                batch_size: int) -> Iterator[str]:  # fmt: skip
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
