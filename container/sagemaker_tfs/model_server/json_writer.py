"""TF Serving's REST JSON written byte for byte: values, tensors, whole response documents.

Pure functions, no I/O. Responses reproduce rapidjson's ``PrettyWriter`` as TF Serving uses
it: 4-space indent, arrays on one line inside rows (``kFormatSingleLineArray``) while the
outer ``predictions`` array closes on its own line, objects always multi-line. Floats follow
TF Serving's rule: ``%.6g``, else ``%.9g`` (float) / ``%.17g`` (double) when ``%.6g`` does
not round-trip, then ``.0`` appended when there is neither ``.`` nor ``e``.
"""

from __future__ import annotations

import base64
import json
import math
import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

import numpy as np
from google.protobuf import json_format
from google.protobuf.message import Message

from sagemaker_tfs.model_server.errors import ServingError, invalid_argument

try:  # ships with TensorFlow; bfloat16 tensors need it
    from ml_dtypes import bfloat16 as _BFLOAT16
except ImportError:  # pragma: no cover
    _BFLOAT16 = None

INDENT = "    "
MAX_DEBUG_VALUE_BYTES = 256
B64_KEY = "b64"

# --------------------------------------------------------------------------- value rendering


def json_value_error(value: Any, message: str) -> ServingError:
    """TF Serving's ``JSON Value: <value> <message>`` error."""
    return invalid_argument(f"JSON Value: {debug_string(value)} {message}")


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
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return "null"
    if isinstance(value, str):
        return quote(value)
    if isinstance(value, int):
        return str(value)
    return rapidjson_double(value)


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


# --------------------------------------------------------------------------- tensors


def format_floats(values: np.ndarray) -> list[str]:
    """TF Serving's float text for every element of a float array (flattened).

    Only the ``%`` formatting is per element; the round-trip test and the choice of where
    ``.0`` goes are NumPy operations: a printed value lacks ``.`` and ``e`` exactly when it
    is integral and shorter than the format's precision (the text round-trips).
    """
    flat = np.ascontiguousarray(values).reshape(-1)
    if flat.size == 0:
        return []
    is_double = flat.dtype == np.float64
    exact = flat if is_double else flat.astype(np.float32)
    python_values = exact.astype(np.float64).tolist()
    texts = np.array([f"{value:.6g}" for value in python_values], dtype=object)
    parsed = np.array(list(map(float, texts.tolist())), dtype=exact.dtype)
    finite = np.isfinite(exact)
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


def _non_finite_text(value: float) -> str:
    if value != value:
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


def format_float(value: float, is_double: bool = False) -> str:
    """One float in TF Serving's layout (see :func:`format_floats`)."""
    return format_floats(np.array([value], dtype=np.float64 if is_double else np.float32))[0]


def _tokens(array: np.ndarray, as_b64: bool) -> list[str]:
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
    raise invalid_argument(f"Tensor of type {array.dtype} is not supported in JSON responses")


def _as_bytes(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    return str(value).encode("utf-8", errors="surrogateescape")


def _b64_object(encoded: str, depth: int) -> str:
    return render_object([(B64_KEY, '"' + encoded + '"')], depth)


def render_array(array: np.ndarray, depth: int, single_line: bool, as_b64: bool = False) -> str:
    """An n-d array; ``depth`` = containers open around it; single-line or one per line."""
    tokens = _tokens(array, as_b64)
    return _nest(tokens, array.shape, depth, single_line, as_b64)


def render_array_rows(array: np.ndarray, depth: int, as_b64: bool = False) -> list[str]:
    """Each row (first-dimension slice) of ``array`` rendered single-line at ``depth``."""
    tokens = _tokens(array, as_b64)
    inner = array.shape[1:]
    step = int(np.prod(inner)) if inner else 1
    return [
        _nest(tokens[i * step : (i + 1) * step], inner, depth, True, as_b64)
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


# --------------------------------------------------------------------------- documents


def render_document(key: str, rendered: str) -> bytes:
    """A response: ``{"<key>": <rendered>}`` as UTF-8 (request bytes kept as they came)."""
    return render_object([(key, rendered)], 0).encode("utf-8", errors="surrogateescape")


def format_error(message: str) -> bytes:
    """``{"error": "..."}`` as TF Serving writes errors, except that bytes of the request
    that are not UTF-8 (quoted in the message) become U+FFFD: the answer stays valid JSON."""
    text = message.encode("utf-8", errors="surrogatepass").decode("utf-8", errors="replace")
    return render_document("error", quote(text))


def proto_json(message: Message) -> dict[str, Any]:
    """A proto as JSON values with default fields, as TF Serving's printer emits them."""
    return json_format.MessageToDict(
        message,
        always_print_fields_with_no_presence=True,
        preserving_proto_field_name=True,
    )


def format_proto_document(document: Mapping[str, Any]) -> bytes:
    """Protobuf's JSON printer layout: 1-space indent and a trailing newline."""
    return (json.dumps(document, indent=1, ensure_ascii=False) + "\n").encode("utf-8")
