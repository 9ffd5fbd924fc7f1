"""A classify/regress body read a window of examples at a time (issue 53): each example
becomes its serialized tf.Example as it is read, and no Python object of the whole body is
held.

The general way (``parse_json_object``, then ``read_document``) holds the whole document (a
dict per example, a float per value) and serializes its examples as these are: measured on
a 10 MB regress body of one-feature examples in the whole stack, the model server grew
38-44x the body when it also built an Example proto per example (with the answer written
from the output arrays, 4.9-5.3x this way). Here the top-level object's members are
walked up to its ``"examples"`` key; the array's members are cut at a ``}, {`` that lies
about ``WINDOW_BYTES`` on, and the run before the cut is parsed by orjson between brackets.
A run that parses is whole examples (it begins where an example does, and a cut inside a
string or inside an example leaves brackets open), so the guess is proven by the parse;
one that does not is tried at an earlier ``}, {`` (those before an object that opens as the
run's first example does come first: a list of ``{"b64": ...}`` inside an example seldom
does), and the last run at each ``]`` until one closes the array. Each parsed example is
serialized by ``examples_json.example_bytes`` (the general way's type rules and errors; a
window of one-float examples at once by ``float_examples``) and appended to one buffer. The
body without its examples (``"examples": []``) is then read by the general reader, which
judges and words everything outside the array (``context``, ``signature_name``, bytes after
the root object); the context is serialized once and put before each example when the
examples become the array fed to TensorFlow: a NumPy ``S``
array (the examples' bytes and 24 bytes an element in TF), or an object array of bytes when
a row ends in a NUL byte (an ``S`` array drops it: a feature name ending in one, an empty
example after a context that does) or the widths would waste memory.

An example that is not an object or has a feature of the wrong type does not stop the
reading: the first such error is raised once the rest of the body has parsed and the
context has been checked, as the general way orders its errors, so that error costs no
more memory than a valid body. Anything else this does not take returns None and the body
is read the general way, which words the error as TF Serving does, at the general way's
cost (44x the body for a large one): a body that does not parse (a syntax error, NaN or
Infinity inside the examples, a lone surrogate), a context that is not an object, a
``"examples"`` key twice, a ``\\u`` escape outside the examples (a key could spell
``examples`` so), an ``examples`` value that is not a list,
cuts that did not parse ``MAX_TRIES`` times in a row (examples holding many ``}, {`` of
their own).
"""

from __future__ import annotations

import array
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sagemaker_tfs.model_server.errors import ServingError
from sagemaker_tfs.model_server.rest.b64_values import copy_spans, width_wastes
from sagemaker_tfs.model_server.rest.examples_json import (
    context_bytes,
    example_bytes,
    float_examples,
)
from sagemaker_tfs.model_server.rest.json_reader import orjson, parse_json_object
from sagemaker_tfs.model_server.rest.json_writer import json_value_error

WINDOW_BYTES = 1 << 16  # bytes of examples parsed at a time (~15x that as objects)
MAX_TRIES = 8  # cuts of one run tried before the body is left to the general way
_BLOCK_ROWS = 1 << 16  # rows whose offsets are made at a time
_DOCUMENT_ROWS = 1 << 12  # a parsed document's examples serialized at a time
_FEW_ROWS = 64  # examples cut without NumPy
_WHITESPACE = b" \t\n\r"
_KEY_BYTES = 1 << 12  # bytes decoded at first to read a member's key or value
_DECODER = json.JSONDecoder()
_EXAMPLES_KEY = b'"examples"'


class _NotTaken(Exception):
    """The body is one the general way reads."""


@dataclass
class ExamplesRead:
    """A body's examples serialized one after another in ``joined``, their ``lengths`` (4
    bytes each), the first error of an example (raised after the context's, by
    ``serialized``); ``document``, the body with ``"examples": []``; ``context``, its
    serialized context once checked."""

    document: dict[str, Any]
    joined: bytearray = field(default_factory=bytearray)
    lengths: array.array = field(default_factory=lambda: array.array("I"))
    error: Exception | None = None
    context: bytes | None = None

    def serialized(self) -> np.ndarray:
        """The examples as TensorFlow is fed them (the context's bytes first), after the
        context's errors and the first example's. The buffer is let go of."""
        context = context_bytes(self.document) if self.context is None else self.context
        if self.error is not None:
            raise self.error
        if not self.lengths:
            return np.empty(0, dtype=object)
        rows = _rows(context, self.joined, np.frombuffer(self.lengths, dtype=np.uint32))
        self.joined, self.lengths = bytearray(), array.array("I")
        return rows


def read_document(document: dict[str, Any]) -> ExamplesRead:
    """The general way's examples (a whole parsed document's), serialized as the windows'
    are and let go of ``_DOCUMENT_ROWS`` at a time; the document's own errors (quoting it
    whole) raised first, as TF Serving orders them."""
    read = ExamplesRead(document, context=context_bytes(document))
    examples = document["examples"]
    for first in range(0, len(examples), _DOCUMENT_ROWS):
        rows = examples[first : first + _DOCUMENT_ROWS]
        _convert(rows, read)
        examples[first : first + len(rows)] = [None] * len(rows)
    examples.clear()
    return read


def read_examples(body: bytes | bytearray) -> ExamplesRead | None:
    """The body's examples serialized and its other members read, or None when the body is
    one to read the general way."""
    if orjson is None:
        return None  # pragma: no cover - orjson ships with the model-server extra
    try:
        return _read(body)
    except _NotTaken:
        return None


def _read(body: bytes | bytearray) -> ExamplesRead:
    opening = _examples_opening(body)
    read = ExamplesRead({})
    closing = _read_examples(body, opening + 1, read)
    skeleton = bytes(body[: opening + 1]) + bytes(body[closing:])
    if skeleton.count(_EXAMPLES_KEY) != 1 or b"\\u" in skeleton:
        raise _NotTaken  # "examples" twice, or a key the general reader decodes so
    try:
        document = parse_json_object(skeleton)
    except ServingError:
        raise _NotTaken from None
    if document.get("examples") != [] or not isinstance(document.get("context", {}), dict):
        raise _NotTaken  # the general way quotes the whole document in these errors
    read.document = document
    return read


def _skip_whitespace(body: bytes | bytearray, position: int) -> int:
    while position < len(body) and body[position] in _WHITESPACE:
        position += 1
    return position


def _expect(body: bytes | bytearray, position: int, marks: bytes) -> int:
    """The position after the whitespace at ``position``, which must hold one of ``marks``."""
    position = _skip_whitespace(body, position)
    if position >= len(body) or body[position] not in marks:
        raise _NotTaken
    return position


def _value_end(body: bytes | bytearray, position: int) -> tuple[Any, int]:
    """The JSON value at ``position`` and the position after it, read from as few bytes as
    hold it (a member before ``examples``: a key, a signature name, a context)."""
    size = _KEY_BYTES
    while True:
        piece = bytes(body[position : position + size]).decode("utf-8", "surrogateescape")
        try:
            value, end = _DECODER.raw_decode(piece)
        except (ValueError, RecursionError):
            if position + size >= len(body):
                raise _NotTaken from None
            size *= 4
            continue
        return value, position + len(piece[:end].encode("utf-8", "surrogateescape"))


def _examples_opening(body: bytes | bytearray) -> int:
    """The position of the ``[`` that opens the root object's ``examples`` value."""
    position = _expect(body, 0, b"{") + 1
    while True:
        key, position = _value_end(body, _expect(body, position, b'"'))
        position = _expect(body, position, b":") + 1
        if key == "examples":
            return _expect(body, position, b"[")
        _, position = _value_end(body, _skip_whitespace(body, position))
        position = _expect(body, position, b",") + 1


def _read_examples(body: bytes | bytearray, start: int, read: ExamplesRead) -> int:
    """Reads the examples from ``start`` (after the array's ``[``); the position of its ``]``."""
    position = _skip_whitespace(body, start)
    if body[position : position + 1] == b"]":
        return position
    while True:
        for cut in _cuts(body, position):
            examples = _parsed(body, position, cut)
            if examples is not None:
                _convert(examples, read)
                position = _skip_whitespace(body, cut + 1)
                break
        else:
            for closing in _closings(body, position):
                examples = _parsed(body, position, closing)
                if examples is not None:
                    _convert(examples, read)
                    return closing
            raise _NotTaken


def _cuts(body: bytes | bytearray, start: int) -> list[int]:
    """Commas of ``}, {`` that may end a run from ``start``: the last ones within a window,
    else the first ones after it (an example larger than a window). Those before an
    object that opens as the run's first example does (``{"x"``) come first: a ``}, {``
    inside an example (a list of ``{"b64": ...}``) seldom does."""
    opening = _first_key(body, start)
    found = _cuts_before(body, start, opening)
    found += [cut for cut in _cuts_before(body, start, b"{") if cut not in found]
    return found[:MAX_TRIES]


def _cuts_before(body: bytes | bytearray, start: int, opening: bytes) -> list[int]:
    found: list[int] = []
    high = start + WINDOW_BYTES
    while len(found) < MAX_TRIES:
        brace = body.rfind(opening, start + 1, high)
        if brace < 0:
            break
        comma = _separator_before(body, brace, start)
        if comma > 0:
            found.append(comma)
        high = brace
    low = start + WINDOW_BYTES
    while not found:
        brace = body.find(opening, low)
        if brace < 0:
            break
        comma = _separator_before(body, brace, start)
        if comma > 0:
            found.append(comma)
        low = brace + 1
    return found


def _first_key(body: bytes | bytearray, start: int) -> bytes:
    """The bytes from the example at ``start`` to the end of its first key's text (at most
    64 bytes), or ``{``."""
    quote = body.find(b'"', start, start + 64)
    end = body.find(b'"', quote + 1, start + 64) if quote > 0 else -1
    return bytes(body[start : end + 1]) if end > 0 else b"{"


def _separator_before(body: bytes | bytearray, brace: int, start: int) -> int:
    """The comma of ``}`` whitespace ``,`` whitespace before ``brace``, else -1."""
    position = brace - 1
    while position > start and body[position] in _WHITESPACE:
        position -= 1
    if position <= start or body[position] != ord(","):
        return -1
    comma = position
    position -= 1
    while position > start and body[position] in _WHITESPACE:
        position -= 1
    return comma if body[position] == ord("}") else -1


def _closings(body: bytes | bytearray, start: int) -> list[int]:
    """The first ``MAX_TRIES`` ``]`` after ``start``: one closes the array."""
    found: list[int] = []
    position = start
    while len(found) < MAX_TRIES:
        position = body.find(b"]", position)
        if position < 0:
            break
        found.append(position)
        position += 1
    return found


def _parsed(body: bytes | bytearray, start: int, stop: int) -> list[Any] | None:
    """``body[start:stop]`` parsed as the members of a list, or None when it is not."""
    assert orjson is not None
    try:
        return orjson.loads(b"".join((b"[", memoryview(body)[start:stop], b"]")))
    except orjson.JSONDecodeError:
        return None


def _convert(examples: list[Any], read: ExamplesRead) -> None:
    """Each example serialized into ``read`` (after the first error: none)."""
    table = float_examples(examples) if read.error is None else None
    if table is not None:
        read.joined += table.data
        read.lengths.frombytes(np.full(table.shape[0], table.shape[1], np.uint32).tobytes())
        return
    for example in examples:
        if read.error is not None:
            return
        try:
            if not isinstance(example, dict):
                raise json_value_error(example, "Example must be JSON object but got JSON ")
            serialized = example_bytes(example)
        except ServingError as error:
            read.error = error
            return
        read.joined += serialized
        read.lengths.append(len(serialized))


def _rows(context: bytes, joined: bytearray, sizes: np.ndarray) -> np.ndarray:
    """Each example, the context's bytes first, as an ``S`` array; an object array when a
    row ends in a NUL byte or the longest row would waste memory. Offsets are made a block
    of rows at a time (not two more arrays of the examples' size)."""
    if sizes.size <= _FEW_ROWS:
        return _few_rows(context, joined, sizes)
    data = np.frombuffer(joined, dtype=np.uint8)
    longest, ends_in_nul = 0, False
    for _, starts, lengths in _blocks(sizes):
        longest = max(longest, int(lengths.max()))
        filled = lengths > 0
        ends_in_nul |= bool((data[(starts + lengths - 1)[filled]] == 0).any())
        ends_in_nul |= context[-1:] == b"\x00" and not filled.all()
    width = len(context) + longest
    total = len(context) * sizes.size + len(joined)
    if ends_in_nul or width_wastes(sizes.size, width, total):
        rows = np.empty(sizes.size, dtype=object)
        view = memoryview(joined)
        for block, starts, lengths in _blocks(sizes):
            spans = zip(starts.tolist(), (starts + lengths).tolist(), strict=True)
            rows[block] = [context + bytes(view[first:stop]) for first, stop in spans]
        return rows
    rows = np.zeros(sizes.size, dtype=f"S{max(width, 1)}")
    table = rows.view(np.uint8).reshape(sizes.size, -1)
    if context:
        table[:, : len(context)] = np.frombuffer(context, dtype=np.uint8)
    if longest:
        for block, starts, lengths in _blocks(sizes):
            copy_spans(data, starts, lengths, table[block, len(context) :])
    return rows


def _few_rows(context: bytes, joined: bytearray, sizes: np.ndarray) -> np.ndarray:
    """``_rows`` of a few examples, cut in Python: NumPy's calls cost more than the copies
    (10 examples: 25 us, 7 us this way)."""
    view, start, rows = memoryview(joined), 0, []
    for size in sizes.tolist():
        rows.append(context + bytes(view[start : start + size]))
        start += size
    width = max(map(len, rows))
    nul_ended = any(row.endswith(b"\x00") for row in rows)
    if nul_ended or width_wastes(len(rows), width, sum(map(len, rows))):
        listed = np.empty(len(rows), dtype=object)
        listed[:] = rows
        return listed
    return np.array(rows, dtype=f"S{max(width, 1)}")


def _blocks(sizes: np.ndarray) -> Iterator[tuple[slice, np.ndarray, np.ndarray]]:
    """(rows, their starts, their lengths) of ``_BLOCK_ROWS`` rows at a time."""
    offset = 0
    for first in range(0, sizes.size, _BLOCK_ROWS):
        lengths = sizes[first : first + _BLOCK_ROWS].astype(np.int64)
        ends = offset + np.cumsum(lengths)
        offset = int(ends[-1])
        yield slice(first, first + lengths.size), ends - lengths, lengths
