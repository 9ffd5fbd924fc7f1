"""JSON / JSON lines / CSV -> TF Serving's REST request, as docs/contract.md's table says: the
``text_codecs`` family's writer of that request, for what cannot be read into the inputs'
arrays (strings and ``{"b64": ...}``, classify and regress, models whose signatures cannot be
asked for), and its reader of the same values for a binary Accept.

The same rules as ``nginx/tensorflow_serving.js`` (which does this in nginx for the
single-model path's small bodies; test_njs_parity.py and test_njs_corpus.py run both on the
same cases): :func:`convert`, the request as text, values copied so numbers keep their exact
spelling; :func:`named_values`, the same values parsed, before they are wrapped into a
request, as named arrays. Nothing outside the family calls these: ``text_codecs.read_body``
is its one entry point.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from functools import partial
from typing import NamedTuple

import numpy as np

from sagemaker_tfs.service.codecs.content_types import (
    CONVERTIBLE_TYPES,
    CSV,
    JSON,
    single_input,
)
from sagemaker_tfs.service.codecs.text.text_request_rules import check_request, too_big
from sagemaker_tfs.wire.errors import HttpError, describe
from sagemaker_tfs.wire.rapidjson_numbers import REST_NUMBERS, NumberTooBig
from sagemaker_tfs.wire.signatures import TensorSpec

TFS_REQUEST_KEYS = ("instances", "inputs", "examples")
_STRICT_NUMBER = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")
_LOOSE_NUMBER = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")
_WHITESPACE = " \t\r\n"
_PLAIN = json.JSONDecoder()
NESTED_TOO_DEEP = "Nested too deep"  # the njs's JSON.parse words (with "at position N")
# What ECMAScript's String.prototype.trim removes (the njs trims with it); Python's strip()
# removes another set (\x1c-\x1f and \x85 but not the byte order mark \ufeff).
ECMASCRIPT_WHITESPACE = (
    "\t\n\v\f\r \xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000\ufeff"
)


class RestRequest:
    """TF Serving's REST request for a body (``convert``'s bytes), written a piece at a time
    by ``pieces()`` as it is sent, so that a large one is never whole beside the body, and
    written again for each post (a failover re-creates it from the body, which is kept).
    ``length``: its size when it is known before it is written (the body was checked whole:
    sent with a Content-Length); None: the body is checked while it is written (sent
    chunked), and a bad one raises its 400 from ``pieces()`` (``check``: without sending)."""

    def __init__(self, write: Callable[[], Iterable[bytes]], length: int | None) -> None:
        self._write = write
        self.length = length
        self.checked = length is not None

    @classmethod
    def of(cls, *parts: bytes) -> RestRequest:
        """A request known before it is written: ``parts`` in turn (the body, or wrapped)."""
        return cls(lambda: parts, sum(len(part) for part in parts))

    def pieces(self) -> Iterator[bytes]:
        yield from self._write()
        self.checked = True

    def check(self) -> None:
        """Raise the body's error, as writing the request raises it, if it was never written
        whole."""
        if not self.checked:
            for _ in self.pieces():
                pass

    def joined(self) -> bytes:
        return b"".join(self.pieces())


def strip_ecmascript_whitespace(text: str) -> str:
    """``text.trim()`` as the njs computes it."""
    return text.strip(ECMASCRIPT_WHITESPACE)


def _instances(texts: list[str]) -> str:
    return '{"instances": [' + ",".join(texts) + "]}"


class JsonValue(NamedTuple):
    """A JSON value as sent (numbers keep their spelling) and as parsed."""

    text: str
    value: object


def split_json_lines(text: str, decoder: json.JSONDecoder = _PLAIN) -> list[JsonValue]:
    """Objects or lists separated only by whitespace -> each one's text and value."""
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
            value, end = decoder.raw_decode(text, index)
        except NumberTooBig:
            raise
        except (ValueError, RecursionError) as error:
            raise HttpError(400, f"Invalid JSON lines: {_json_error(error)}") from None
        values.append(JsonValue(text[index:end], value))
        index = end
    if not values:
        raise HttpError(400, "Empty request body")
    return values


def _json_error(error: ValueError | RecursionError) -> str:
    """A JSON parser's error for a message: too deep a nesting in the njs's words (Python's
    own, "maximum recursion depth exceeded", says nothing to a client)."""
    return NESTED_TOO_DEEP if isinstance(error, RecursionError) else describe(error)


def _is_tfs_request(value: object) -> bool:
    return isinstance(value, dict) and any(key in value for key in TFS_REQUEST_KEYS)


def _is_list_of_lists(value: object) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, list) for v in value)


def read_json(text: str, decoder: json.JSONDecoder = _PLAIN) -> JsonValue | list[JsonValue]:
    """A JSON body: its one value, or the values of JSON lines when it holds several values
    separated by whitespace."""
    if not strip_ecmascript_whitespace(text):
        raise HttpError(400, "Empty request body")
    try:
        return JsonValue(text, decoder.decode(text))
    except NumberTooBig:
        raise
    except (ValueError, RecursionError) as error:  # ValueError: also ints of 4300+ digits
        try:
            lines = split_json_lines(text, decoder)
        except HttpError:
            lines = []
        if len(lines) < 2:
            raise HttpError(400, f"Invalid JSON: {_json_error(error)}") from None
        return lines


def convert_json(text: str) -> str:
    """A JSON body as TF Serving's request: a request passes as it is, a list of lists
    becomes the instances, anything else one instance; JSON lines, their values."""
    document = read_json(text)
    if isinstance(document, list):
        return _instances([line.text for line in document])
    if _is_tfs_request(document.value):
        return text
    if _is_list_of_lists(document.value):
        return '{"instances": ' + text + "}"
    return _instances([text])


def _csv_field(field: str) -> str:
    value = strip_ecmascript_whitespace(field)
    if _STRICT_NUMBER.fullmatch(value):
        return value
    if _LOOSE_NUMBER.fullmatch(value):
        return repr(float(value)) if any(c in value for c in ".eE") else str(int(value))
    if len(value) >= 2 and value[0] == value[-1] == '"':
        value = value[1:-1].replace('""', '"')
    return json.dumps(value)


class _CsvRows:
    """CSV rows -> TF Serving's instances, a piece of whole lines at a time: the width is the
    first row's, the rows counted across pieces (blank lines are not rows)."""

    def __init__(self) -> None:
        self.width = 0
        self.count = 0

    def instances(self, text: str) -> list[str]:
        words = self._plain_words(text)
        if words is not None:
            return words
        instances = []
        for line in text.split("\n"):
            if not strip_ecmascript_whitespace(line):
                continue
            fields = line.removesuffix("\r").split(",")
            self.count += 1
            if self.count == 1:
                self.width = len(fields)
            elif len(fields) != self.width:
                raise HttpError(400, f"Invalid CSV: row {self.count} has {len(fields)} fields, "
                                     f"expected {self.width}")  # fmt: skip
            values = [_csv_field(field) for field in fields]
            instances.append(values[0] if self.width == 1 else "[" + ",".join(values) + "]")
        return instances

    def _plain_words(self, text: str) -> list[str] | None:
        """Rows of plain words (see ``_NOT_WORDS``), all of the first row's width, as
        ``instances`` writes them (one string, the instances joined), by three replaces
        instead of a field at a time (10 MB of one word a line, in process: 1.85 -> 0.22 s).
        None for any other text. Checked by a search for what is not such rows (a pattern of
        the rows themselves makes ``re`` keep state per line: ~50x a piece)."""
        rows = text[:-2] if text.endswith("\r\n") else text.removesuffix("\n")
        if not ("a" <= rows[:1].lower() <= "z") or _NOT_WORDS.search(rows):
            return None
        width = self.width or rows.split("\n", 1)[0].count(",") + 1
        lines = rows.count("\n") + 1
        if rows.count(",") != lines * (width - 1):
            return None
        if width > 1 and any(row.count(",") != width - 1 for row in rows.split("\n")):
            return None
        self.count, self.width = self.count + lines, width
        rows = rows.replace("\r\n", "\n")
        if width == 1:
            return ['"' + rows.replace("\n", '","') + '"']
        return ['["' + rows.replace(",", '","').replace("\n", '"],["') + '"]']


# What is not rows of fields that are their own JSON strings (printable ASCII, a letter first,
# so never a number; no quote, backslash or blank for ``_csv_field`` to unquote, escape or
# strip): another byte, a lone CR, a field that does not begin with a letter.
_NOT_WORDS = re.compile(r"[^!#-+\--\[\]-~,\n\r]|\r(?!\n)|[,\n](?![A-Za-z])")


def convert_csv_pieces(body: bytes, piece_bytes: int) -> RestRequest:
    """``convert(CSV, body)``, written a piece of about ``piece_bytes`` of whole lines at a
    time as it is sent (no string per line of the whole body, and never the whole request):
    a bad row or a body that is not UTF-8 raises its 400 when its piece is written."""
    return RestRequest(partial(_csv_pieces, body, piece_bytes), None)


def _csv_pieces(body: bytes, piece_bytes: int) -> Iterator[bytes]:
    rows, separator = _CsvRows(), ""
    yield b'{"instances": ['
    start = 0
    while start < len(body):
        end = body.find(b"\n", start + piece_bytes)
        end = len(body) if end < 0 else end + 1
        try:
            text = body[start:end].decode("utf-8")
        except UnicodeDecodeError:
            _text(CSV, body)  # raises the 400 that names the position in the whole body
            raise
        instances = rows.instances(text)
        if instances:
            yield (separator + ",".join(instances)).encode("utf-8")
            separator = ","
        start = end
    if not rows.count:
        raise HttpError(400, "Empty request body")
    yield b"]}"


def _text(content_type: str, body: bytes) -> str:
    if content_type not in CONVERTIBLE_TYPES:
        raise HttpError(415, f"Unsupported Media Type: {content_type}")
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as error:
        raise HttpError(400, f"The request body is not UTF-8: {error}") from None


def convert(content_type: str, body: bytes) -> str:
    """The TF Serving REST request body for a convertible ``content_type`` (a CSV body: the
    pieces of ``convert_csv_pieces``, one piece)."""
    if content_type == CSV:
        return b"".join(_csv_pieces(body, len(body))).decode("utf-8")
    text = _text(content_type, body)
    if content_type == JSON:
        return convert_json(text)
    return _instances([line.text for line in split_json_lines(text)])


def read_values(content_type: str, body: bytes) -> dict:
    """The REST request that :func:`convert` writes for the body, as values (read by its rules
    and with its errors), its numbers as the REST API reads them (``text_request_rules``):
    what the fast path reads into input arrays when the arrays reader does not."""
    try:
        if content_type == CSV:
            return _csv_values(convert(CSV, body))
        text = _text(content_type, body)
        if content_type != JSON:
            return {"instances": [line.value for line in split_json_lines(text, REST_NUMBERS)]}
        document = read_json(text, REST_NUMBERS)
        if isinstance(document, list):
            return {"instances": [line.value for line in document]}
        return _as_request(document.value)
    except NumberTooBig as error:
        raise too_big(error, convert(content_type, body)) from None


def _as_request(value: object) -> dict:
    """A JSON document as :func:`convert_json` wraps it: a request as it is, a list of lists
    as the instances, anything else as one instance."""
    if _is_tfs_request(value):
        assert isinstance(value, dict)
        return value
    return {"instances": value if _is_list_of_lists(value) else [value]}


def _csv_values(request: str) -> dict:
    try:
        return REST_NUMBERS.decode(request)
    except NumberTooBig:
        raise
    except ValueError as error:  # a number of 4300+ digits
        raise HttpError(400, f"Invalid CSV: {describe(error)}") from None


def named_values(
    kind: str, body: bytes, inputs: Mapping[str, TensorSpec]
) -> list[tuple[str, np.ndarray]]:
    """JSON/JSON lines/CSV bodies (asked for with a binary Accept) that the arrays reader
    leaves to the REST API, as named arrays: the REST request :func:`read_values` reads,
    refused as the REST API refuses it (``text_request_rules``), its ``inputs`` (columns) or
    ``instances`` (rows)."""
    return [(name, _as_array(value, name)) for name, value in _named_lists(kind, body, inputs)]


def _named_lists(
    kind: str, body: bytes, inputs: Mapping[str, TensorSpec]
) -> list[tuple[str, object]]:
    document = read_values(kind, body)
    check_request(document)
    if "inputs" in document:
        value = document["inputs"]
        if isinstance(value, dict):
            _check_names(value, inputs)
            return list(value.items())
        return [(single_input(inputs, kind).name, value)]
    rows = document.get("instances")
    if isinstance(rows, list) and rows and all(isinstance(row, dict) for row in rows):
        _check_names(rows[0], inputs)
        return [(name, [row.get(name) for row in rows]) for name in rows[0]]
    return [(single_input(inputs, kind).name, rows)]


def _check_names(named: Mapping[str, object], inputs: Mapping[str, TensorSpec]) -> None:
    unknown = sorted(set(named) - set(inputs))
    if unknown:
        raise HttpError(
            400, f"Inputs {unknown} are not in the signature (inputs: {', '.join(sorted(inputs))})"
        )


def _as_array(value: object, name: str) -> np.ndarray:
    try:
        return np.asarray(value)
    except (ValueError, TypeError, OverflowError, RecursionError, MemoryError) as error:
        reason = NESTED_TOO_DEEP if isinstance(error, RecursionError) else error
        raise HttpError(400, f"Input {name} is not a rectangular array: {reason}") from None
