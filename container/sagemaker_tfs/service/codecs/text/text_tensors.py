"""JSON, JSON lines and CSV bodies read straight into the inputs' arrays, for the service to
send over gRPC rather than as JSON text that the model server parses again (issues 36, 53):
the bounded path's reader, which ``text_codecs`` (the family's entry point) calls.

Only bodies that the REST path (``text_rest.convert``, then the model server's JSON reader)
would read into exactly the same arrays are read here, without a Python object per number:

- CSV of numbers (``text_csv``): NumPy's C reader (``np.loadtxt``), a piece at a time;
- JSON and JSON lines (``text_json``): a rectangular list of numbers (``NaN``,
  ``Infinity`` and ``-Infinity`` among them for float inputs; ``true`` and ``false`` for
  bool inputs), or named inputs in rows or columns, under any signature
  (``signature_name``), with any number of inputs, of one dtype or of several
  (``text_mixed``); nested empty lists for the one input.

A body that gives one input a value of another type (``null``; ``true`` or ``false`` for an
input that is not bool; a number for a bool input; a fraction, a NaN, an infinity or a value
out of range for an integer input) is refused as the REST path refuses it
(``text_refusals``, ``text_csv``: a 400 in its words); so is a ragged list given to the one
input or to one of named inputs (``text_ragged``). Anything else returns None and
``text_codecs`` writes TF Serving's REST request instead, so that its answer and its errors
are the REST path's: strings or other non-number bytes (CSV's ``NaN`` is a string to
``text_rest``), two ragged named inputs, ``{"instances": []}``, a NaN or an infinity spelt
otherwise than JSON's words, a body giving two inputs values they refuse (the REST path's
order decides), CSV for a uint64 input, and string inputs (strings and ``{"b64": ...}``
objects were read here for a while and sent over gRPC, but the stack then held more memory
than the REST way: see docs/performance.md, issue 53).

Values are parsed as doubles and then cast, as the REST path does (a float32 is rounded
from the double, not from the text). Where the REST path reads a value otherwise than the
double of its text, the difference is recorded and applied (CSV's ``-0``: see
``text_csv``), so that no single value sends a body the unbounded way.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import NamedTuple

import numpy as np
import orjson

from sagemaker_tfs.service.codecs.text import (
    text_csv,
    text_json,
    text_layout,
    text_mixed,
    text_ragged,
    text_refusals,
)
from sagemaker_tfs.service.codecs.text.text_json import Document, JsonInputs
from sagemaker_tfs.service.codecs.text.text_refusals import Refusal
from sagemaker_tfs.wire import tensors
from sagemaker_tfs.wire.signatures import Signature

DEFAULT_SIGNATURE = "serving_default"
_NOT_LISTS = re.compile(rb"[^\[\], \t\n\r]")  # a byte of a value other than empty lists
SMALL_BYTES = 4096  # bodies up to this size may be read whole by orjson (_small_floats)
_NUMBER_LIST_BYTES = b"-+.0123456789eE[], \t\n\r}"  # of nested lists of numbers (and a "}")
_EMPTY_LIST = re.compile(rb"\[\s*\]")
_SMALL_HEAD = re.compile(rb'\s*(?:\{\s*"(instances|inputs)"\s*:\s*)?\[')
# The input dtypes read here.
_READ_TYPES = {
    tensors.tf_dtype(np.dtype(dtype)): np.dtype(dtype)
    for dtype in (np.float16, np.float32, np.float64, np.int8, np.int16, np.int32, np.int64,
                  np.uint8, np.uint16, np.uint32, np.uint64, np.bool_)
}  # fmt: skip


class TextRequest(NamedTuple):
    """The inputs' arrays by name, whether the request was columnar (``inputs``: answered as
    ``{"outputs": ...}``) rather than rows (``{"predictions": ...}``), and its signature."""

    arrays: dict[str, np.ndarray]
    columnar: bool
    signature: Signature


def read_json_request(
    body: bytes, signatures: Mapping[str, Signature], lines: bool = False
) -> TextRequest | Refusal | None:
    """The arrays the REST path would feed the model for this JSON (``lines``: JSON lines)
    body, its refusal of a body that gives an integer input another number
    (``text_refusals``) or a ragged list (``text_ragged``), or None (see the module).
    ``signatures``: the model's, by name."""
    small = None if lines or len(body) > SMALL_BYTES else _small_floats(body, signatures)
    if small is not None:
        return small
    document = text_json.find_document(body, lines=lines)
    if document is None:
        return None
    signature = signatures.get(document.signature_name or DEFAULT_SIGNATURE)
    if signature is None or not signature.inputs:
        return None
    names = list(signature.inputs)
    dtypes = {name: _READ_TYPES.get(spec.dtype) for name, spec in signature.inputs.items()}
    found = set(dtypes.values())
    dtype = found.pop() if len(found) == 1 else None  # the inputs' one dtype, if read here
    if dtype is None:
        return _mixed_request(document, names, dtypes, signature)
    read = text_json.read_document(document, names, dtype) or _empty_lists(document, names, dtype)
    if read is None:
        refusal = text_refusals.value_refusal(document, names, dtype)
        return refusal or text_ragged.ragged_refusal(document, names, dtype)
    return TextRequest(read.arrays, read.columnar, signature)


def _small_floats(body: bytes, signatures: Mapping[str, Signature]) -> TextRequest | None:
    """A small body of nested lists of finite numbers for the one float input, bare or as the
    only key of ``instances`` or ``inputs``, read whole by orjson: the same arrays as the rest
    of this module reads (a double of each number, then cast), without its machinery, which
    costs ~20 us a body (in process, a 30-byte body: 29 -> 8 us); None for any other body
    (``test_text_tensors.py`` holds the two readings equal)."""
    head = _SMALL_HEAD.match(body)
    signature = signatures.get(DEFAULT_SIGNATURE)
    if head is None or signature is None or _EMPTY_LIST.search(body, head.end() - 1):
        return None
    numbers = body[head.end() :]
    if numbers.translate(None, _NUMBER_LIST_BYTES) or len(signature.inputs) != 1:
        return None  # another byte: not numbers only
    ((name, spec),) = signature.inputs.items()
    dtype = _READ_TYPES.get(spec.dtype)
    if dtype is None or dtype.kind != "f":
        return None
    try:  # orjson refuses a number beyond a double (the REST path's error): all are finite
        document = orjson.loads(body)
        key = head.group(1)
        value = document[key.decode()] if key else document
        if key and len(document) != 1:
            return None
        array = np.array(value, np.float64)
    except (orjson.JSONDecodeError, ValueError, TypeError):
        return None  # not JSON, trailing bytes, ragged lists, or another key
    if key is None and array.ndim == 1:
        array = array[np.newaxis]  # a bare list of numbers is one instance
    return TextRequest({name: _cast(array, dtype, numbers)}, key == b"inputs", signature)


def _cast(array: np.ndarray, dtype: np.dtype, text: bytes) -> np.ndarray:
    """Doubles cast to ``dtype``; beyond a float16 or a float32 is inf, as on the REST path,
    without NumPy's warning (kept out of the way of short texts, which cannot overflow a
    float32: ``np.errstate`` costs ~1 us)."""
    if dtype == array.dtype:
        return array
    if dtype != np.float16 and len(text) < 38 and b"e" not in text and b"E" not in text:
        return array.astype(dtype)
    with np.errstate(over="ignore"):
        return array.astype(dtype)


def _mixed_request(document: Document, names: list[str], dtypes: dict[str, np.dtype | None],
                   signature: Signature) -> TextRequest | Refusal | None:  # fmt: skip
    """Named inputs of several dtypes (``text_mixed``), or the REST path's refusal of a value
    one of them does not take (``text_refusals``), or None (a dtype not read here, or a body
    neither reads)."""
    known = {name: dtype for name, dtype in dtypes.items() if dtype is not None}
    if len(known) != len(dtypes):
        return None
    read = text_mixed.read_mixed(document, names, known)
    if read is None:
        return text_refusals.value_refusal(document, names, known)
    return TextRequest(read.arrays, read.columnar, signature)


def _empty_lists(document: Document, names: list[str], dtype: np.dtype) -> JsonInputs | None:
    """The empty array the REST path reads from nested empty lists given to the one input:
    ``{"inputs": []}`` (0,), ``{"instances": [[], []]}`` (2, 0), a bare ``[]`` (conversion's
    one instance: (1, 0)); None for anything else (``{"instances": []}`` is the REST path's
    error, named inputs and JSON lines are left to it)."""
    if len(names) != 1 or document.lines:
        return None
    if _NOT_LISTS.search(document.body, document.start, document.end):
        return None  # a number, or not lists: no skeleton made (a refused body comes here)
    read = text_json.pieces_and_skeleton(document, names)
    if read is None or b"[]" not in read[1]:
        return None
    shape = _empty_shape(read[1])
    if shape is None or (document.key == "instances" and shape == (0,)):
        return None
    if document.key is None and len(shape) == 1:
        shape = (1, *shape)
    return JsonInputs({names[0]: np.empty(shape, dtype)}, document.key == "inputs")


def _empty_shape(skeleton: bytes | bytearray) -> tuple[int, ...] | None:
    """The shape of nested lists whose innermost ones are all empty: the shape of the lists
    around them (their skeleton with each ``[]`` a number), then 0."""
    if skeleton == b"[]":
        return (0,)
    outer = text_layout.rectangular_shape(skeleton.replace(b"[]", b"0"))
    return None if outer is None else (*outer, 0)


def read_csv_request(
    body: bytes, signatures: Mapping[str, Signature]
) -> TextRequest | Refusal | None:
    """The same for a CSV body (``text_csv``), always under the default signature, of one
    input; CSV has no booleans (strings to text_rest), and text_csv reads no uint64 beyond
    an int64."""
    signature = signatures.get(DEFAULT_SIGNATURE)
    if signature is None or len(signature.inputs) != 1:
        return None
    ((name, spec),) = signature.inputs.items()
    dtype = _READ_TYPES.get(spec.dtype)
    if dtype is None or dtype.kind == "b" or dtype == np.uint64:
        return None
    read = text_csv.read_csv(body, dtype)
    if read is None or isinstance(read, Refusal):
        return read
    return TextRequest({name: read}, False, signature)
