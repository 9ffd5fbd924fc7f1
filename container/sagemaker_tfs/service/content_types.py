"""The fast path's content types, which answer type an Accept list chooses, and what every body
decoder shares: the bound on what a request may make us allocate and the exceptions that mean
a corrupted body.

Inputs (``INPUT_TYPES``) are read by ``inputs`` (NumPy, JSON/CSV) and ``image_inputs`` (images
and image streams); answers (``OUTPUT_TYPES``) are written by ``answers``.
"""

from __future__ import annotations

import struct
import tokenize
import zipfile
from collections.abc import Sequence

from sagemaker_tfs.service import conversion
from sagemaker_tfs.wire.errors import HttpError
from sagemaker_tfs.wire.http_headers import MediaType

NPY = "application/x-npy"
NPZ = "application/x-npz"
JSON = "application/json"
JSONLINES = "application/jsonlines"
CSV = "text/csv"
IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "application/x-image"})
IMAGE_STREAM = "application/x-image-stream"
TEXT_TYPES = frozenset(conversion.CONVERTIBLE_TYPES)
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


def choose_output_type(accept: Sequence[MediaType]) -> str:
    """The first supported type of an Accept header's types; JSON when none or ``*/*``."""
    if not accept:
        return JSON
    for entry in accept:
        if entry.name in OUTPUT_TYPES:
            return entry.name
        if entry.name in ("*/*", "application/*"):
            return JSON
    listed = ", ".join(entry.name for entry in accept)
    raise HttpError(406, f"Not Acceptable: {listed}; supported: {', '.join(OUTPUT_TYPES)}")
