"""Request bodies read the way TF Serving's rapidjson reads them, with its error messages.

rapidjson accepts NaN/Infinity/-Infinity, ignores bytes after the root value, turns integers
beyond int64/uint64 into doubles and refuses numbers beyond a double and lone surrogates.
orjson reads plain JSON fast; the standard parser, set up for these rules, reads the rest
and words the errors. Strings may also carry bytes as ``{"b64": "..."}`` objects.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from types import ModuleType
from typing import Any

from sagemaker_tfs.model_server.errors import invalid_argument
from sagemaker_tfs.model_server.rest.json_writer import json_value_error
from sagemaker_tfs.wire.rapidjson_numbers import REST_NUMBERS, NumberTooBig
from sagemaker_tfs.wire.tfs_json import B64_KEY

orjson: ModuleType | None
try:  # several times faster on large numeric payloads; the standard parser remains the judge
    import orjson
except ImportError:  # pragma: no cover - orjson ships with the model-server extra
    orjson = None

_PYTHON_TO_RAPIDJSON_ERRORS = {
    "Expecting value": "Invalid value.",
    "Expecting property name enclosed in double quotes": "Missing a name for object member.",
    "Expecting ':' delimiter": "Missing a colon after a name of object member.",
    "Unterminated string starting at": "Missing a closing quotation mark in string.",
    "Invalid control character at": "Invalid encoding in string.",
    "Invalid \\escape": "Invalid escape character in string.",
    "Invalid \\uXXXX escape": "Incorrect hex digit after \\u escape in string.",
}


_NOT_WHITESPACE = re.compile(r"[^ \t\n\r]")  # JSON's whitespace: these four
_MAYBE_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")
# A \uD800-\uDBFF escape must be followed by a \uDC00-\uDFFF one; a low one must follow a
# high one. Runs of backslashes are matched from their start, so "\\\\ud800" (a backslash, then
# the text "ud800") is not an escape.
_SURROGATE_ESCAPES = re.compile(
    r"(?<!\\)(?:\\\\)*\\u(?:[dD][89abAB][0-9a-fA-F]{2}(?P<low>\\u[dD][c-fC-F][0-9a-fA-F]{2})?"
    r"|[dD][c-fC-F][0-9a-fA-F]{2})"
)


def parse_json_object(body: bytes | bytearray) -> dict[str, Any]:
    """Parse a request body the way TF Serving's rapidjson does; the root must be an object.

    NaN/Infinity/-Infinity are accepted and bytes after the root value are ignored.
    """
    document = _strict_fast_parse(body)
    if document is None:
        document = _lenient_parse(body)
    if not isinstance(document, dict):
        raise json_value_error(document, "Is not object")
    return document


def _strict_fast_parse(body: bytes | bytearray) -> Any | None:
    """orjson for plain JSON; None when it refuses (NaN, trailing bytes, errors...)."""
    if orjson is None:
        return None
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return None


def _lenient_parse(body: bytes | bytearray) -> Any:
    """The standard parser: NaN/Infinity, trailing bytes ignored, rapidjson's error words."""
    text = body.decode("utf-8", errors="surrogateescape")
    first = _NOT_WHITESPACE.search(text)
    start = len(text) if first is None else first.start()
    if start == len(text):
        raise invalid_argument(f"JSON Parse error: The document is empty. at offset: {start}")
    try:
        document, _ = REST_NUMBERS.raw_decode(text, start)
    except json.JSONDecodeError as error:
        message = _rapidjson_message(error, text)
        raise invalid_argument(f"JSON Parse error: {message} at offset: {error.pos}") from None
    except RecursionError:
        raise invalid_argument(
            "JSON Parse error: Terminate parsing due to Handler error."
        ) from None
    except NumberTooBig as error:
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


def is_b64_object(value: Any) -> bool:
    """``{"b64": ...}``: binary data in a string tensor or a bytes feature."""
    return isinstance(value, dict) and len(value) == 1 and B64_KEY in value


def decode_b64(text: str) -> bytes:
    """The bytes of a ``b64`` value; standard or URL-safe alphabet, padding optional."""
    try:
        padded = text + "=" * (-len(text) % 4)
        if "-" in text or "_" in text:
            return base64.urlsafe_b64decode(padded)
        return base64.b64decode(padded, validate=True)
    except (binascii.Error, ValueError):
        raise invalid_argument(f"Unable to base64 decode: {text[:64]}") from None
