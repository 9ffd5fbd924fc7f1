"""The service's content types; the answer's media type, decided once per request from its
Accept list (``answer_type``, kept in ``ParsedRequest.answer``); and what every body decoder
shares: the bound on what a request may make us allocate and the exceptions that mean a
corrupted body.

JSON, JSON lines and CSV (``CONVERTIBLE_TYPES``) are read by ``text_codecs``; the fast path's
inputs (``INPUT_TYPES``) by ``inputs`` (NumPy, JSON/CSV) and ``image_inputs`` (images and
image streams); its answers (``OUTPUT_TYPES``) are written by ``answers``.
"""

from __future__ import annotations

import struct
import tokenize
import zipfile
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from sagemaker_tfs.wire.errors import HttpError
from sagemaker_tfs.wire.http_headers import MediaType
from sagemaker_tfs.wire.signatures import TensorSpec

NPY = "application/x-npy"
NPZ = "application/x-npz"
JSON = "application/json"
JSON_LINES_TYPES = ("application/jsonlines", "application/jsons", "application/x-jsonlines")
JSONLINES = JSON_LINES_TYPES[0]
CSV = "text/csv"
CONVERTIBLE_TYPES = (JSON, *JSON_LINES_TYPES, CSV)
IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "application/x-image"})
IMAGE_STREAM = "application/x-image-stream"
TEXT_TYPES = frozenset(CONVERTIBLE_TYPES)
INPUT_TYPES = frozenset({NPY, NPZ, IMAGE_STREAM, *IMAGE_TYPES, *TEXT_TYPES})
OUTPUT_TYPES = (JSON, JSONLINES, NPY, NPZ, CSV)

# Bound on what a request may make us allocate, checked from the sizes it declares (npy
# headers, zip members, image dimensions) before anything is allocated.
MAX_DECODED_BYTES = 1 << 30
# What NumPy, zipfile and Pillow raise on corrupted input (a header that does not parse, a zip
# of an unknown version, truncated data...): all of them mean a bad request body.
DECODE_ERRORS = (
    ValueError,
    TypeError,
    KeyError,
    IndexError,
    OSError,
    EOFError,
    SyntaxError,
    OverflowError,
    RecursionError,
    MemoryError,
    NotImplementedError,
    RuntimeError,
    tokenize.TokenError,
    struct.error,
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
)


class AnswerType(NamedTuple):
    """The answer's media type, decided once per request from its Accept list, for each way
    of answering. ``tfs_json``: a JSON or CSV body is answered with TF Serving's JSON (the
    first type listed, if any, is JSON, JSON lines or ``*/*``), else it takes the fast path;
    ``one_line``: that JSON's Content-Type when it is put on one line, None: as the model
    server wrote it (application/json); ``fast_path``: the fast path's answer type, None: one
    it does not write (406); ``handler``: the Accept header a handler's ``Context`` gives
    (application/json for none or ``*/*``)."""

    tfs_json: bool
    one_line: str | None
    fast_path: str | None
    handler: str


def answer_type(accept: tuple[MediaType, ...], header: str) -> AnswerType:
    """``accept``: the Accept header's types (``http_headers.accept_list``); ``header``: as sent."""
    first = accept[0].name if accept else ""
    return AnswerType(
        tfs_json=first in ("", "*/*", JSON, *JSON_LINES_TYPES),
        one_line=one_line_json_type(accept),
        fast_path=choose_output_type(accept),
        handler=JSON if header in ("", "*/*") else header,
    )


def choose_output_type(accept: Sequence[MediaType]) -> str | None:
    """The first supported type of an Accept header's types; JSON when none or ``*/*``; None
    when it lists only types the fast path does not write."""
    if not accept:
        return JSON
    for entry in accept:
        if entry.name in OUTPUT_TYPES:
            return entry.name
        if entry.name in ("*/*", "application/*"):
            return JSON
    return None


def not_acceptable(accept: Sequence[MediaType]) -> HttpError:
    listed = ", ".join(entry.name for entry in accept)
    return HttpError(406, f"Not Acceptable: {listed}; supported: {', '.join(OUTPUT_TYPES)}")


def one_line_json_type(accept: Sequence[MediaType]) -> str | None:
    """The reference container's rule for the model server's JSON answer (as the njs's
    ``oneLineJsonType``): when Accept lists application/json or a JSON lines type, the body
    is answered on one line (newlines removed) with the first listed type as Content-Type
    (application/json when the first is a wildcard). None: answer it as the model server
    wrote it (no Accept, or only wildcards)."""
    types = [entry.name for entry in accept]
    json_types = [entry for entry in types if entry == JSON or entry in JSON_LINES_TYPES]
    if not json_types:
        return None
    return types[0] if types[0] in json_types else JSON


def single_input(inputs: Mapping[str, TensorSpec], kind: str) -> TensorSpec:
    """The one input a body of ``kind`` carries: a 400 when the signature has another number."""
    if len(inputs) == 1:
        return next(iter(inputs.values()))
    names = ", ".join(sorted(inputs)) or "none"
    hint = f"; send {NPZ} with one array per input" if kind != NPZ else ""
    raise HttpError(
        400, f"{kind} carries one input but the signature has {len(inputs)} ({names}){hint}"
    )
