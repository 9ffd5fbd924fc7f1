"""What every codec of the service shares: the media type names, the bound on what a request
may make us allocate, the exceptions that mean a corrupted body, what a codec reads into
(``DecodedInputs``) and writes (chunks, ``StreamedBody``), and ``Codec``, the interface each
media type's codec implements.

The codecs themselves, one per media type, are in ``registry`` (which says which types the
fast path reads and writes); JSON, JSON lines and CSV (``CONVERTIBLE_TYPES``) are read by
``text_codecs``.
"""

from __future__ import annotations

import struct
import tokenize
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from sagemaker_tfs.wire import pixels, tensors
from sagemaker_tfs.wire.errors import HttpError
from sagemaker_tfs.wire.http_headers import MediaType
from sagemaker_tfs.wire.pixels import PixelCast
from sagemaker_tfs.wire.signatures import TensorSpec
from sagemaker_tfs.wire.streamed_predict import StreamedTensors

NPY = "application/x-npy"
NPZ = "application/x-npz"
JSON = "application/json"
JSON_LINES_TYPES = ("application/jsonlines", "application/jsons", "application/x-jsonlines")
JSONLINES = JSON_LINES_TYPES[0]
CSV = "text/csv"
CONVERTIBLE_TYPES = (JSON, *JSON_LINES_TYPES, CSV)
IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "application/x-image"})
IMAGE_STREAM = "application/x-image-stream"

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


@dataclass(frozen=True)
class ImageOptions:
    """How decoded pixels become float inputs: ``value = pixel * scale + offset``.

    ``SAGEMAKER_TFS_IMAGE_SCALE`` / ``_OFFSET`` (``StackConfig.service.image_scale`` /
    ``image_offset``); integer inputs always get the raw 0-255 pixels. Example: MobileNet-style
    [-1, 1] inputs use scale ``0.00784313725`` (2/255) and offset ``-1``.
    """

    scale: float = 1.0
    offset: float = 0.0


@dataclass(frozen=True)
class DecodedInputs:
    """A request's inputs by alias. Image inputs that the model wants as floats are still
    ``uint8`` pixels here, with their ``casts``: the model server widens them when it can
    (``wire.pixels``), so that a quarter of the bytes travel."""

    arrays: dict[str, np.ndarray]
    casts: dict[str, PixelCast]

    def widened(self) -> dict[str, np.ndarray]:
        """The arrays as the signature wants them."""
        return pixels.widen(self.arrays, self.casts)

    def widened_bytes(self) -> int:
        """The size of the arrays as the signature wants them."""
        return pixels.widened_bytes(self.arrays, self.casts)


Chunk = bytes | memoryview


class StreamedBody(NamedTuple):
    """An answer sent while it is still being received: its length and its chunks."""

    length: int
    chunks: Iterator[Chunk]


class WrittenBody(NamedTuple):
    """An answer written while it is sent, its length unknown until the end (sent chunked):
    a JSON answer of a text body, whose text would be 1-1.5x the body if held whole."""

    chunks: Iterator[bytes]


class Codec:
    """One media type's codec (``registry.CODECS`` holds one per type): whether the fast path
    reads a body of ``media_type`` (``reads``, ``read``), whether it writes an answer of it
    (``writes``, ``write``)."""

    reads = False
    writes = False

    def __init__(self, media_type: str) -> None:
        self.media_type = media_type

    def read(
        self, body: bytes, inputs: Mapping[str, TensorSpec], options: ImageOptions
    ) -> DecodedInputs:
        """A non-empty body -> the inputs' arrays by alias (an ``HttpError`` if it is bad)."""
        raise NotImplementedError(f"{self.media_type} is not read")

    def write(self, outputs: Mapping[str, np.ndarray]) -> list[Chunk]:
        """Named outputs -> the answer's chunks (NumPy answers refer to the output buffers)."""
        raise NotImplementedError(f"{self.media_type} is not written")

    def write_arriving(self, answer: StreamedTensors) -> list[Chunk] | StreamedBody:
        """``write`` of an answer still arriving; by default, once it has all arrived."""
        return self.write(answer.complete())


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


def only_output(outputs: Mapping[str, np.ndarray], output_type: str) -> np.ndarray:
    """The one output an answer of ``output_type`` holds: a 406 when the model returns more."""
    if len(outputs) == 1:
        return next(iter(outputs.values()))
    raise HttpError(
        406,
        f"The model returns {len(outputs)} outputs ({', '.join(sorted(outputs))}); "
        f"{output_type} holds one: ask for {NPZ} or {JSON}",
    )


def conform_array(array: np.ndarray, spec: TensorSpec) -> np.ndarray:
    """Check an array against an input: same-kind dtype casts are allowed, others refused.

    Its shape is not checked: TF Serving's Predict feeds any shape and the model's graph
    decides (its error comes back as a 400), so one request gets one answer whatever the
    Accept header sends it through."""
    if spec.is_string:
        if array.dtype.kind not in "SUO":
            raise HttpError(
                400, f"Input {spec.name} expects DT_STRING, got an array of {array.dtype}"
            )
        return array
    try:
        target = tensors.numpy_dtype(spec.dtype)
    except tensors.TensorConversionError as error:
        raise HttpError(400, f"Input {spec.name}: {error}") from None
    if array.dtype != target and not np.can_cast(array.dtype, target, casting="same_kind"):
        raise HttpError(
            400,
            f"Input {spec.name} expects {tensors.dtype_name(spec.dtype)}, "
            f"got an array of {array.dtype}",
        )
    return array.astype(target, copy=False)
