"""JSON / JSON lines / CSV -> TF Serving REST request, as CONTRACT.md's table says.

The same rules as ``templates/tensorflow_serving.js`` (which does this in nginx for the
single-model path); the Python service uses them for multi-model invocations and for bodies
njs handed over. Values are copied as text, so numbers keep their exact spelling.
"""

from __future__ import annotations

import json
import re

from sagemaker_tfs.wire.errors import HttpError

JSON_TYPES = ("application/json",)
JSON_LINES_TYPES = ("application/jsonlines", "application/jsons", "application/x-jsonlines")
CSV_TYPES = ("text/csv",)
CONVERTIBLE_TYPES = JSON_TYPES + JSON_LINES_TYPES + CSV_TYPES
TFS_REQUEST_KEYS = ("instances", "inputs", "examples")
_STRICT_NUMBER = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")
_LOOSE_NUMBER = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")
_WHITESPACE = " \t\r\n"


def _instances(texts: list[str]) -> str:
    return '{"instances": [' + ",".join(texts) + "]}"


def split_json_lines(text: str) -> list[str]:
    """Objects or lists separated only by whitespace -> their texts (each one validated)."""
    decoder = json.JSONDecoder()
    values = []
    index = 0
    while index < len(text):
        if text[index] in _WHITESPACE:
            index += 1
            continue
        if text[index] not in "{[":
            raise HttpError(
                400, f"Invalid JSON lines: expected an object or a list at offset {index}"
            )
        try:
            _, end = decoder.raw_decode(text, index)
        except (ValueError, RecursionError) as error:
            raise HttpError(400, f"Invalid JSON lines: {str(error)[:200]}") from None
        values.append(text[index:end])
        index = end
    if not values:
        raise HttpError(400, "Empty request body")
    return values


def _json_lines_or_none(text: str) -> list[str]:
    """JSON lines when the text is such, else [] (the caller reports its own JSON error)."""
    try:
        return split_json_lines(text)
    except HttpError:
        return []


def _is_tfs_request(value: object) -> bool:
    return isinstance(value, dict) and any(key in value for key in TFS_REQUEST_KEYS)


def _is_list_of_lists(value: object) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, list) for v in value)


def convert_json(text: str) -> str:
    if not text.strip():
        raise HttpError(400, "Empty request body")
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as error:  # ValueError: also ints of 4300+ digits
        lines = _json_lines_or_none(text)
        if len(lines) < 2:
            raise HttpError(400, f"Invalid JSON: {str(error)[:200]}") from None
        return _instances(lines)
    if _is_tfs_request(value):
        return text
    if _is_list_of_lists(value):
        return '{"instances": ' + text + "}"
    return _instances([text])


def _csv_field(field: str) -> str:
    value = field.strip()
    if _STRICT_NUMBER.fullmatch(value):
        return value
    if _LOOSE_NUMBER.fullmatch(value):
        return repr(float(value)) if any(c in value for c in ".eE") else str(int(value))
    if len(value) >= 2 and value[0] == value[-1] == '"':
        value = value[1:-1].replace('""', '"')
    return json.dumps(value)


def convert_csv(text: str) -> str:
    rows = [line.rstrip("\r") for line in text.split("\n") if line.strip()]
    if not rows:
        raise HttpError(400, "Empty request body")
    width = len(rows[0].split(","))
    instances = []
    for number, row in enumerate(rows, start=1):
        fields = row.split(",")
        if len(fields) != width:
            raise HttpError(
                400, f"Invalid CSV: row {number} has {len(fields)} fields, expected {width}"
            )
        values = [_csv_field(field) for field in fields]
        instances.append(values[0] if width == 1 else "[" + ",".join(values) + "]")
    return _instances(instances)


def one_line_json_type(accept_header: str | None) -> str | None:
    """The reference container's rule for the model server's JSON answer (as the njs's
    ``oneLineJsonType``): when Accept lists application/json or a JSON lines type, the body is
    answered on one line (newlines removed) with the first listed type as Content-Type
    (application/json when the first is a wildcard). None: answer it as the model server
    wrote it (no Accept, or only wildcards)."""
    types = [entry.split(";")[0].strip().lower() for entry in (accept_header or "").split(",")]
    types = [entry for entry in types if entry]
    json_types = [entry for entry in types if entry in JSON_TYPES or entry in JSON_LINES_TYPES]
    if not json_types:
        return None
    return types[0] if types[0] in json_types else JSON_TYPES[0]


def convert(content_type: str, body: bytes) -> str:
    """The TF Serving REST request body for a convertible ``content_type``."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as error:
        raise HttpError(400, f"The request body is not UTF-8: {error}") from None
    if content_type in JSON_TYPES:
        return convert_json(text)
    if content_type in JSON_LINES_TYPES:
        return _instances(split_json_lines(text))
    if content_type in CSV_TYPES:
        return convert_csv(text)
    raise HttpError(415, f"Unsupported Media Type: {content_type}")
