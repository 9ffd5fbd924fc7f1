"""TF Serving's REST JSON: request parsing and byte-exact response writing.

Pure functions, no I/O. Responses reproduce rapidjson's ``PrettyWriter`` as TF Serving uses
it: 4-space indent, arrays on one line inside rows (``kFormatSingleLineArray``) while the
outer ``predictions`` array closes on its own line, objects always multi-line. Floats follow
TF Serving's rule: ``%.6g``, else ``%.9g`` (float) / ``%.17g`` (double) when ``%.6g`` does
not round-trip, then ``.0`` appended when there is neither ``.`` nor ``e``.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

import numpy as np
from google.protobuf import json_format
from google.protobuf.message import Message
from tensorflow.core.example import example_pb2, feature_pb2
from tensorflow.core.framework import types_pb2
from tensorflow_serving.apis import classification_pb2, input_pb2, regression_pb2

from sagemaker_tfs.model_server.errors import ServingError, invalid_argument

try:  # ships with TensorFlow; bfloat16 tensors need it
    from ml_dtypes import bfloat16 as _BFLOAT16
except ImportError:  # pragma: no cover
    _BFLOAT16 = None

try:  # several times faster on large numeric payloads; the standard parser remains the judge
    import orjson
except ImportError:  # pragma: no cover - orjson ships with the model-server extra
    orjson = None
from sagemaker_tfs.model_server.servable import Signature

INDENT = "    "
MAX_DEBUG_VALUE_BYTES = 256
MAX_DIMS = 64  # NumPy's limit on the number of array dimensions
INSTANCES_KEY = "instances"
INPUTS_KEY = "inputs"
B64_KEY = "b64"
BYTES_SUFFIX = "_bytes"

_FLOAT_TYPES = (
    types_pb2.DT_FLOAT,
    types_pb2.DT_DOUBLE,
    types_pb2.DT_HALF,
    types_pb2.DT_BFLOAT16,
)
_INT_RANGES = {
    types_pb2.DT_INT8: (-(2**31), 2**31 - 1),
    types_pb2.DT_INT16: (-(2**31), 2**31 - 1),
    types_pb2.DT_INT32: (-(2**31), 2**31 - 1),
    types_pb2.DT_INT64: (-(2**63), 2**63 - 1),
    types_pb2.DT_UINT8: (0, 2**32 - 1),
    types_pb2.DT_UINT16: (0, 2**32 - 1),
    types_pb2.DT_UINT32: (0, 2**32 - 1),
    types_pb2.DT_UINT64: (0, 2**64 - 1),
}
_NUMPY_TYPES = {
    types_pb2.DT_FLOAT: np.float32,
    types_pb2.DT_DOUBLE: np.float64,
    types_pb2.DT_HALF: np.float16,
    types_pb2.DT_INT8: np.int8,
    types_pb2.DT_INT16: np.int16,
    types_pb2.DT_INT32: np.int32,
    types_pb2.DT_INT64: np.int64,
    types_pb2.DT_UINT8: np.uint8,
    types_pb2.DT_UINT16: np.uint16,
    types_pb2.DT_UINT32: np.uint32,
    types_pb2.DT_UINT64: np.uint64,
    types_pb2.DT_BOOL: np.bool_,
    types_pb2.DT_STRING: object,
}
if _BFLOAT16 is not None:
    _NUMPY_TYPES[types_pb2.DT_BFLOAT16] = _BFLOAT16

# --------------------------------------------------------------------------- JSON parsing

_PYTHON_TO_RAPIDJSON_ERRORS = {
    "Expecting value": "Invalid value.",
    "Expecting property name enclosed in double quotes": "Missing a name for object member.",
    "Expecting ':' delimiter": "Missing a colon after a name of object member.",
    "Unterminated string starting at": "Missing a closing quotation mark in string.",
    "Invalid control character at": "Invalid encoding in string.",
    "Invalid \\escape": "Invalid escape character in string.",
    "Invalid \\uXXXX escape": "Incorrect hex digit after \\u escape in string.",
}


class _NumberTooBig(ValueError):
    """A number beyond a double's range: rapidjson refuses the whole document."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


def _json_integer(text: str) -> int | float:
    """Integers outside int64/uint64 become doubles, as in rapidjson (and orjson). Long ones
    are read as doubles from the text: Python refuses int() of over 4300 digits."""
    if len(text.lstrip("-")) <= 20:
        value = int(text)
        if -(2**63) <= value < 2**64:
            return value
    return _json_double(text)


def _json_double(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise _NumberTooBig(text)
    return value


_DECODER = json.JSONDecoder(parse_int=_json_integer, parse_float=_json_double)
_WHITESPACE = re.compile(r"[ \t\n\r]*")
_MAYBE_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")
# A \uD800-\uDBFF escape must be followed by a \uDC00-\uDFFF one; a low one must follow a
# high one. Runs of backslashes are matched from their start, so "\\\\ud800" (a backslash, then
# the text "ud800") is not an escape.
_SURROGATE_ESCAPES = re.compile(
    r"(?<!\\)(?:\\\\)*\\u(?:[dD][89abAB][0-9a-fA-F]{2}(?P<low>\\u[dD][c-fC-F][0-9a-fA-F]{2})?"
    r"|[dD][c-fC-F][0-9a-fA-F]{2})"
)


def parse_json_object(body: bytes) -> dict[str, Any]:
    """Parse a request body the way TF Serving's rapidjson does; the root must be an object.

    NaN/Infinity/-Infinity are accepted and bytes after the root value are ignored.
    """
    document = _strict_fast_parse(body)
    if document is None:
        document = _lenient_parse(body)
    if not isinstance(document, dict):
        raise json_value_error(document, "Is not object")
    return document


def _strict_fast_parse(body: bytes) -> Any | None:
    """orjson for plain JSON; None when it refuses (NaN, trailing bytes, errors...)."""
    if orjson is None:
        return None
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return None


def _lenient_parse(body: bytes) -> Any:
    """The standard parser: NaN/Infinity, trailing bytes ignored, rapidjson's error words."""
    text = body.decode("utf-8", errors="surrogateescape")
    start = _WHITESPACE.match(text).end()
    if start == len(text):
        raise invalid_argument(f"JSON Parse error: The document is empty. at offset: {start}")
    try:
        document, _ = _DECODER.raw_decode(text, start)
    except json.JSONDecodeError as error:
        message = _rapidjson_message(error, text)
        raise invalid_argument(f"JSON Parse error: {message} at offset: {error.pos}") from None
    except RecursionError:
        raise invalid_argument(
            "JSON Parse error: Terminate parsing due to Handler error."
        ) from None
    except _NumberTooBig as error:
        offset = text.find(error.text, start)
        raise invalid_argument(
            f"JSON Parse error: Number too big to be stored in double. at offset: {offset}"
        ) from None
    _refuse_lone_surrogates(text)
    return document


def _refuse_lone_surrogates(text: str) -> None:
    """rapidjson refuses ``"\\ud800"`` (a lone surrogate cannot be UTF-8); Python's parser
    keeps it, and it would fail later when encoded. orjson refuses it too, so only documents
    that reach the lenient parser need this check."""
    if not _MAYBE_SURROGATE.search(text):
        return
    for match in _SURROGATE_ESCAPES.finditer(text):
        escape = match.group(0).lstrip("\\")
        if match.group("low") is None:
            offset = match.end() - len(escape) - 1
            raise invalid_argument(
                f"JSON Parse error: The surrogate pair in string is invalid. at offset: {offset}"
            )


def _rapidjson_message(error: json.JSONDecodeError, text: str) -> str:
    if error.msg == "Expecting ',' delimiter":
        if _innermost_open_container(text[: error.pos]) == "[":
            return "Missing a comma or ']' after an array element."
        return "Missing a comma or '}' after an object member."
    return _PYTHON_TO_RAPIDJSON_ERRORS.get(error.msg, "Unspecific syntax error.")


def _innermost_open_container(prefix: str) -> str:
    """``[`` or ``{``: the container still open at the end of ``prefix`` (strings skipped)."""
    stack: list[str] = []
    in_string = escaped = False
    for char in prefix:
        if in_string:
            escaped = not escaped and char == "\\"
            in_string = escaped or char != '"'
        elif char == '"':
            in_string = True
        elif char in "[{":
            stack.append(char)
        elif char in "]}" and stack:
            stack.pop()
    return stack[-1] if stack else "{"


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


# --------------------------------------------------------------------------- numbers out


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


# --------------------------------------------------------------------------- predict in


class _ShapeError(Exception):
    """A list of the wrong size: reported as is, not per element."""


class _ValueError(Exception):
    """A value of the wrong type: reported with the element that holds it."""


def parse_signature_name(document: Mapping[str, Any]) -> str:
    """The request's ``signature_name`` ("" if absent)."""
    name = document.get("signature_name", "")
    if not isinstance(name, str):
        raise invalid_argument("'signature_name' key must be a string value.")
    return name


def parse_predict_request(
    document: Mapping[str, Any], signature: Signature
) -> tuple[dict[str, np.ndarray], bool]:
    """Inputs of a predict request as arrays, and whether the request was columnar."""
    has_instances = INSTANCES_KEY in document
    if has_instances and INPUTS_KEY in document:
        raise json_value_error(
            document,
            "Not formatted correctly expecting only one of 'inputs' or 'instances' keys to exist ",
        )
    if has_instances:
        return _parse_instances(document, signature), False
    if INPUTS_KEY in document:
        return _parse_inputs(document[INPUTS_KEY], signature), True
    raise invalid_argument("Missing 'inputs' or 'instances' key")


def _is_b64(value: Any) -> bool:
    return isinstance(value, dict) and len(value) == 1 and B64_KEY in value


def _is_named_object(value: Any) -> bool:
    return isinstance(value, dict) and not _is_b64(value)


def _parse_instances(document: Mapping[str, Any], signature: Signature) -> dict[str, np.ndarray]:
    instances = document[INSTANCES_KEY]
    if not isinstance(instances, list):
        raise json_value_error(document, "Expecting 'instances' to be an list/array")
    if not instances:
        raise json_value_error(document, "No values in 'instances' array")
    if not signature.inputs:
        return {}  # e.g. a counter's "get_counter": nothing to feed
    if _is_named_object(instances[0]):
        return _parse_named_instances(instances, signature)
    if len(signature.inputs) > 1:
        raise invalid_argument(
            "instances is a plain list, but expecting list of objects as multiple input "
            "tensors required as per tensorinfo_map"
        )
    alias, spec = next(iter(signature.inputs.items()))
    try:
        return {alias: build_tensor(instances, spec.dtype)}
    except _ValueError as error:
        index, message = error.args
        raise invalid_argument(
            f"Failed to process element: {index} of 'instances' list. "
            f"Error: INVALID_ARGUMENT: {message}"
        ) from None


def _parse_named_instances(instances: list[Any], signature: Signature) -> dict[str, np.ndarray]:
    columns: dict[str, list[Any]] = {alias: [] for alias in signature.inputs}
    for index, instance in enumerate(instances):
        if not _is_named_object(instance):
            raise invalid_argument(f"Expecting object but got list at item {index} of input list")
        for key, value in instance.items():
            if key not in columns:
                raise invalid_argument(
                    f"Failed to process element: {index} key: {key} of 'instances' list. "
                    f"Error: INVALID_ARGUMENT: JSON object: does not have named input: {key}"
                )
            columns[key].append(value)
        if len(instance) != len(columns):
            raise invalid_argument(
                f"Failed to process element: {index} of 'instances' list. JSON object: "
                f"{debug_string(instance)} keys must be equal to: {len(columns)}"
            )
    tensors = {}
    for alias, values in columns.items():
        try:
            tensors[alias] = build_tensor(values, signature.inputs[alias].dtype)
        except _ValueError as error:
            index, message = error.args
            raise invalid_argument(
                f"Failed to process element: {index} key: {alias} of 'instances' list. "
                f"Error: INVALID_ARGUMENT: {message}"
            ) from None
    return tensors


def _parse_inputs(value: Any, signature: Signature) -> dict[str, np.ndarray]:
    if not signature.inputs:
        return {}
    if _is_named_object(value):
        named = value
        for alias in signature.inputs:
            if alias not in named:
                raise invalid_argument(f"Missing named input: {alias} in 'inputs' object.")
    elif len(signature.inputs) > 1:
        raise invalid_argument(
            "inputs is a plain value/list, but expecting an object as multiple input "
            "tensors required as per tensorinfo_map"
        )
    else:
        named = {next(iter(signature.inputs)): value}
    tensors = {}
    for alias, spec in signature.inputs.items():
        try:
            tensors[alias] = build_tensor(named[alias], spec.dtype)
        except _ValueError as error:
            raise invalid_argument(error.args[1]) from None
    return tensors


def build_tensor(value: Any, dtype: int) -> np.ndarray:
    """A (nested) JSON value as an array of ``dtype``; raises ServingError on a ragged list.

    Type errors raise ``_ValueError(index_in_outer_list, message)`` for the caller to wrap.
    """
    if dtype not in _NUMPY_TYPES:
        name = types_pb2.DataType.Name(dtype)[3:].lower()
        raise invalid_argument(f"Type {name} is not supported in JSON requests")
    fast = _numeric_fast_path(value, dtype)
    if fast is not None:
        return fast
    state = _WalkState()
    try:
        _walk(value, 0, state, dtype)
    except _ShapeError as error:
        raise invalid_argument(str(error)) from None
    except RecursionError:
        raise _too_many_dims(len(state.shape)) from None
    if len(state.shape) > MAX_DIMS:
        raise _too_many_dims(len(state.shape))
    if dtype == types_pb2.DT_STRING:
        array = np.empty(len(state.flat), dtype=object)
        array[:] = state.flat
        return array.reshape(state.shape)
    return np.array(state.flat, dtype=_NUMPY_TYPES[dtype]).reshape(state.shape)


def _too_many_dims(count: int) -> ServingError:
    return invalid_argument(f"Tensor has at least {count} dimensions; at most {MAX_DIMS} allowed")


def _numeric_fast_path(value: Any, dtype: int) -> np.ndarray | None:
    """Plain lists of numbers go through NumPy in C; anything unusual returns None."""
    if dtype in (types_pb2.DT_STRING, types_pb2.DT_BOOL):
        return None
    try:
        objects = np.array(value, dtype=object)
    except ValueError:
        return None
    types = set(map(type, objects.reshape(-1).tolist()))
    if dtype in _FLOAT_TYPES:
        if not types <= {float, int}:
            return None
        try:
            return objects.astype(_NUMPY_TYPES[dtype]) if objects.size else _empty(objects, dtype)
        except (OverflowError, TypeError, ValueError):
            return None
    if types - {int}:
        return None
    if not objects.size:
        return _empty(objects, dtype)
    try:
        wide = objects.astype(np.int64)
    except OverflowError:
        return None
    low, high = _INT_RANGES[dtype]
    if wide.min() < low or wide.max() > high:
        return None
    return wide.astype(_NUMPY_TYPES[dtype])


def _empty(objects: np.ndarray, dtype: int) -> np.ndarray:
    return np.zeros(objects.shape, dtype=_NUMPY_TYPES[dtype])


class _WalkState:
    """Shape seen so far (recorded on first sight of each level) and the level of values."""

    def __init__(self) -> None:
        self.shape: list[int] = []
        self.value_level: int | None = None
        self.flat: list[Any] = []


def _walk(value: Any, level: int, state: _WalkState, dtype: int) -> None:
    """Depth-first walk checking every list against the shape TF Serving infers."""
    if isinstance(value, list):
        if state.value_level is not None and level >= state.value_level:
            raise _ShapeError(f"Encountered list at level: {level} when expecting a value")
        if level == len(state.shape):
            state.shape.append(len(value))
        elif state.shape[level] != len(value):
            raise _ShapeError(
                f"Encountered list at unexpected size: {len(value)} at level: {level} "
                f"expected size: {state.shape[level]}"
            )
        for index, item in enumerate(value):
            try:
                _walk(item, level + 1, state, dtype)
            except _ValueError as error:
                if level == 0:
                    raise _ValueError(index, error.args[1]) from None
                raise
        return
    if state.value_level is None:
        if level < len(state.shape):
            raise _ShapeError(f"Encountered scalar element at level: {level} expecting a list")
        state.value_level = level
    elif level != state.value_level:
        raise _ShapeError(f"Encountered scalar element at level: {level} expecting a list")
    state.flat.append(_checked_scalar(value, dtype))


def _checked_scalar(value: Any, dtype: int) -> Any:
    if dtype == types_pb2.DT_STRING:
        if isinstance(value, str):
            return value.encode("utf-8", errors="surrogateescape")
        if _is_b64(value) and isinstance(value[B64_KEY], str):
            return _b64_decode(value[B64_KEY])
    elif dtype == types_pb2.DT_BOOL:
        if isinstance(value, bool):
            return value
    elif _is_number(value) and (dtype in _FLOAT_TYPES or _int_fits(value, dtype)):
        return value
    raise _ValueError(0, _type_error_message(value, dtype))


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _int_fits(value: Any, dtype: int) -> bool:
    low, high = _INT_RANGES[dtype]
    return isinstance(value, int) and low <= value <= high


def _type_error_message(value: Any, dtype: int) -> str:
    name = types_pb2.DataType.Name(dtype)[3:].lower()
    kind = _json_type(value)
    return f"JSON Value: {debug_string(value)} Type: {kind} is not of expected type: {name}"


def _json_type(value: Any) -> str:
    if value is None:
        return "Null"
    if value is True:
        return "True"
    if value is False:
        return "False"
    if isinstance(value, dict):
        return "Object"
    if isinstance(value, list):
        return "Array"
    if isinstance(value, str):
        return "String"
    return "Number"


def _b64_decode(text: str) -> bytes:
    try:
        padded = text + "=" * (-len(text) % 4)
        if "-" in text or "_" in text:
            return base64.urlsafe_b64decode(padded)
        return base64.b64decode(padded, validate=True)
    except (binascii.Error, ValueError):
        raise invalid_argument(f"Unable to base64 decode: {text[:64]}") from None


# --------------------------------------------------------------------------- predict out


def format_predict_response(outputs: Mapping[str, np.ndarray], columnar: bool) -> bytes:
    """``{"predictions": ...}`` (row request) or ``{"outputs": ...}`` (columnar request)."""
    aliases = sorted(outputs)
    if columnar:
        body = _columnar_outputs(outputs, aliases)
        return _top_object("outputs", body)
    return _top_object("predictions", _row_predictions(outputs, aliases))


def _as_b64(alias: str, array: np.ndarray) -> bool:
    return alias.endswith(BYTES_SUFFIX) and array.dtype.kind in "OSU"


def _top_object(key: str, rendered: str) -> bytes:
    return render_object([(key, rendered)], 0).encode("utf-8", errors="surrogateescape")


def _columnar_outputs(outputs: Mapping[str, np.ndarray], aliases: list[str]) -> str:
    if len(aliases) == 1:
        alias = aliases[0]
        return render_array(outputs[alias], 1, False, _as_b64(alias, outputs[alias]))
    members = [
        (alias, render_array(outputs[alias], 2, False, _as_b64(alias, outputs[alias])))
        for alias in aliases
    ]
    return render_object(members, 1)


def _row_predictions(outputs: Mapping[str, np.ndarray], aliases: list[str]) -> str:
    batch_size = _row_batch_size(outputs, aliases)
    if len(aliases) == 1:
        alias = aliases[0]
        single = render_array(outputs[alias], 1, True, _as_b64(alias, outputs[alias]))
        return single[:-1] + "\n" + INDENT + "]"
    columns = {
        alias: _row_items(outputs[alias], _as_b64(alias, outputs[alias])) for alias in aliases
    }
    rows = [
        render_object([(alias, columns[alias][row]) for alias in aliases], 2)
        for row in range(batch_size)
    ]
    return "[" + ", ".join(rows) + "\n" + INDENT + "]"


def _row_items(array: np.ndarray, as_b64: bool) -> list[str]:
    """Each row (first-dimension slice) of ``array`` rendered single-line inside a row object."""
    tokens = _tokens(array, as_b64)
    inner = array.shape[1:]
    step = int(np.prod(inner)) if inner else 1
    return [
        _nest(tokens[i * step : (i + 1) * step], inner, 3, True, as_b64)
        for i in range(array.shape[0])
    ]


def _row_batch_size(outputs: Mapping[str, np.ndarray], aliases: list[str]) -> int:
    batch_size = None
    for alias in aliases:
        array = outputs[alias]
        if array.ndim == 0:
            raise invalid_argument(f"Tensor name: {alias} has no shape information ")
        if batch_size is None:
            batch_size = array.shape[0]
        elif array.shape[0] != batch_size:
            raise invalid_argument(
                f"Tensor name: {alias} has inconsistent batch size: {array.shape[0]} "
                f"expecting: {batch_size}"
            )
    return batch_size or 0


# --------------------------------------------------------------------------- classify/regress


def parse_examples_request(document: Mapping[str, Any]) -> input_pb2.Input:
    """``examples`` (+ optional ``context``) as a tensorflow.serving.Input."""
    if "examples" not in document:
        raise invalid_argument("Missing 'examples' key")
    examples = document["examples"]
    if not isinstance(examples, list):
        raise json_value_error(document, "Expecting 'examples' to be an list/array")
    request_input = input_pb2.Input()
    if "context" in document:
        context = document["context"]
        if not isinstance(context, dict):
            raise json_value_error(document, "Expecting 'context' to be an object")
        target = request_input.example_list_with_context
        _fill_example(context, target.context)
    else:
        target = request_input.example_list
    for example in examples:
        if not isinstance(example, dict):
            raise json_value_error(example, "Example must be JSON object but got JSON ")
        _fill_example(example, target.examples.add())
    return request_input


def _fill_example(features: Mapping[str, Any], example: example_pb2.Example) -> None:
    for name, value in features.items():
        _fill_feature(name, value, example.features.feature[name])


def _fill_feature(name: str, value: Any, feature: feature_pb2.Feature) -> None:
    values = value if isinstance(value, list) else [value]
    if not values:
        return
    if all(isinstance(v, str) or _is_b64(v) for v in values):
        feature.bytes_list.value.extend(_feature_bytes(v) for v in values)
    elif all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        feature.int64_list.value.extend(values)
    elif all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        feature.float_list.value.extend(values)
    else:
        raise json_value_error(value, f"Feature: {name} has values of unsupported or mixed types")


def _feature_bytes(value: Any) -> bytes:
    if isinstance(value, str):
        return value.encode("utf-8", errors="surrogateescape")
    return _b64_decode(value[B64_KEY])


def format_regress_response(result: regression_pb2.RegressionResult) -> bytes:
    """``{"results": [v, ...]}`` with every value on one line."""
    values = np.array([r.value for r in result.regressions], dtype=np.float32)
    return _top_object("results", "[" + ", ".join(format_floats(values)) + "]")


def format_classify_response(result: classification_pb2.ClassificationResult) -> bytes:
    """``{"results": [[["label", score], ...], ...]}`` with every list on one line."""
    rows = []
    for classifications in result.classifications:
        scores = format_floats(np.array([c.score for c in classifications.classes], np.float32))
        pairs = [
            f"[{quote(c.label)}, {score}]"
            for c, score in zip(classifications.classes, scores, strict=True)
        ]
        rows.append("[" + ", ".join(pairs) + "]")
    return _top_object("results", "[" + ", ".join(rows) + "]")


# --------------------------------------------------------------------------- status, errors


def format_error(message: str) -> bytes:
    """``{"error": "..."}`` as TF Serving writes errors, except that bytes of the request
    that are not UTF-8 (quoted in the message) become U+FFFD: the answer stays valid JSON."""
    text = message.encode("utf-8", errors="surrogatepass").decode("utf-8", errors="replace")
    return _top_object("error", quote(text))


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
