"""Requests of the fast path: request bodies -> named NumPy inputs, and the content types.

Inputs: ``application/x-npy``, ``application/x-npz``, ``image/jpeg``, ``image/png``,
``application/x-image`` and ``application/x-image-stream`` (records of a 4-byte big-endian
length followed by an encoded image; all records form one batch). Images are converted to what
the signature's input wants (dtype, height, width, channels, RGB order); a DT_STRING input gets
the encoded bytes unchanged. JSON, JSON lines and CSV bodies also come here when the Accept
header asks for a binary answer (otherwise nginx sends them to TF Serving's REST API).
Answers (``OUTPUT_TYPES``, chosen from the Accept header here) are written by ``answers``.

Every problem with the request raises :class:`HttpError` with an HTTP status and a message
that says what is wrong.
"""

from __future__ import annotations

import io
import math
import os
import struct
import tokenize
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from PIL import Image, UnidentifiedImageError

from sagemaker_tfs.service import conversion, native_threads
from sagemaker_tfs.wire import pixels, tensors
from sagemaker_tfs.wire.errors import HttpError, describe
from sagemaker_tfs.wire.pixels import PixelCast
from sagemaker_tfs.wire.signatures import TensorSpec

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

_RECORD_HEADER = 4
_NPY_MAGIC = b"\x93NUMPY"
_NPZ_MAGIC = b"PK\x03\x04"
_CHANNELS_TO_MODE = {1: "L", 3: "RGB", 4: "RGBA"}
# Bounds on what a request may make us allocate, checked from the sizes it declares (npy
# headers, zip members, image dimensions) before anything is allocated.
MAX_DECODED_BYTES = 1 << 30
MAX_IMAGE_PIXELS = 64 * 1024 * 1024
# Below this many bytes of pixels a batch is decoded in the request's thread: the threads'
# hand-offs and their contention for the GIL in Pillow's Python cost more than they save.
# Measured on 2 cores (test/perf/bench_image_decoding.py, on the cores / in one thread):
# 64 28x28 PNGs 4.5 / 2.9 ms, four 224x224 JPEGs 1.6 / 1.7 ms, ten 512x512 JPEGs 14 / 21 ms.
DECODE_ON_CORES_MIN_BYTES = 1 << 20
# What NumPy, zipfile and Pillow raise on corrupted input (a header that does not parse, a zip
# of an unknown version, truncated data...): all of them mean a bad request body.
_DECODE_ERRORS = (
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

    Read once from ``SAGEMAKER_TFS_IMAGE_SCALE`` (default 1.0) and ``SAGEMAKER_TFS_IMAGE_OFFSET``
    (default 0.0); integer inputs always get the raw 0-255 pixels. Example: MobileNet-style
    [-1, 1] inputs use scale ``0.00784313725`` (2/255) and offset ``-1``.
    """

    scale: float = 1.0
    offset: float = 0.0

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ImageOptions:
        environ = os.environ if environ is None else environ
        return cls(
            scale=_float_env(environ, "SAGEMAKER_TFS_IMAGE_SCALE", 1.0),
            offset=_float_env(environ, "SAGEMAKER_TFS_IMAGE_OFFSET", 0.0),
        )


def _float_env(environ: Mapping[str, str], name: str, default: float) -> float:
    text = environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{name} must be a number, got {text!r}") from None
    if not np.isfinite(value):
        raise ValueError(f"{name} must be finite, got {text!r}")
    return value


def media_type(header: str | None) -> str:
    """``image/jpeg`` from ``Image/JPEG; q=1`` (lower case, parameters dropped)."""
    return (header or "").split(";", 1)[0].strip().lower()


def choose_output_type(accept: str | None) -> str:
    """The first supported type of an Accept header; JSON when absent or ``*/*``."""
    entries = [media_type(entry) for entry in (accept or "").split(",")]
    entries = [entry for entry in entries if entry]
    if not entries:
        return JSON
    for entry in entries:
        if entry in OUTPUT_TYPES:
            return entry
        if entry in ("*/*", "application/*"):
            return JSON
    raise HttpError(406, f"Not Acceptable: {accept}; supported: {', '.join(OUTPUT_TYPES)}")


# ---------------------------------------------------------------- inputs


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


def decode_inputs(
    body: bytes, content_type: str, inputs: Mapping[str, TensorSpec], options: ImageOptions
) -> dict[str, np.ndarray]:
    """Decode a request body into arrays keyed by input alias, converted to the signature."""
    return decode_request(body, content_type, inputs, options).widened()


def decode_request(
    body: bytes, content_type: str, inputs: Mapping[str, TensorSpec], options: ImageOptions
) -> DecodedInputs:
    """Decode a request body into inputs keyed by alias, image pixels not yet widened."""
    kind = media_type(content_type)
    if kind not in INPUT_TYPES:
        raise HttpError(415, f"Unsupported Media Type: {content_type or 'none'}")
    if not body:
        raise HttpError(400, f"Empty request body for {kind}")
    if kind == NPY:
        spec = _single_input(inputs, kind)
        return DecodedInputs({spec.name: conform_array(decode_npy(body), spec)}, {})
    if kind == NPZ:
        arrays = {
            name: conform_array(array, inputs[name]) for name, array in _npz_inputs(body, inputs)
        }
        return DecodedInputs(arrays, {})
    if kind in TEXT_TYPES:
        named = _text_inputs(body, kind, inputs)
        arrays = {
            name: conform_array(_as_array(value, name), inputs[name]) for name, value in named
        }
        return DecodedInputs(arrays, {})
    spec = _single_input(inputs, kind)
    images = split_image_stream(body) if kind == IMAGE_STREAM else [body]
    batch, cast = images_to_batch(images, spec, options)
    return DecodedInputs({spec.name: batch}, {spec.name: cast} if cast else {})


def _single_input(inputs: Mapping[str, TensorSpec], kind: str) -> TensorSpec:
    if len(inputs) == 1:
        return next(iter(inputs.values()))
    names = ", ".join(sorted(inputs)) or "none"
    hint = f"; send {NPZ} with one array per input" if kind != NPZ else ""
    raise HttpError(
        400, f"{kind} carries one input but the signature has {len(inputs)} ({names}){hint}"
    )


def decode_npy(body: bytes) -> np.ndarray:
    """One .npy array, as a read-only view of the body's data (a 1 GB body is not copied);
    object (pickled) arrays are refused."""
    if body.startswith(_NPZ_MAGIC):
        raise HttpError(400, f"Invalid .npy payload: it is an .npz archive; send it as {NPZ}")
    if not body.startswith(_NPY_MAGIC):
        raise HttpError(400, "Invalid .npy payload: it does not start with the .npy magic")
    stream = io.BytesIO(body)  # shares the bytes: no copy
    shape, fortran_order, dtype = check_npy_header(stream, len(body), ".npy payload")
    if dtype.itemsize == 0:
        return np.empty(shape, dtype)
    data = np.frombuffer(body, dtype, math.prod(shape), stream.tell())
    return data.reshape(shape, order="F" if fortran_order else "C")


def check_npy_header(
    stream: io.BufferedIOBase | Any, size: int, what: str
) -> tuple[tuple[int, ...], bool, np.dtype]:
    """Read an .npy header from ``stream`` (``size`` bytes in all) and refuse it unless the
    data it declares is exactly what follows: a 140-byte body declaring 10**10 floats must not
    make NumPy allocate 75 GB before finding out that the bytes are missing. Returns the
    header's shape, Fortran order and dtype; the stream is left at the data."""
    try:
        version = np.lib.format.read_magic(stream)
        if version == (1, 0):
            shape, fortran_order, dtype = np.lib.format.read_array_header_1_0(stream)
        elif version == (2, 0):
            shape, fortran_order, dtype = np.lib.format.read_array_header_2_0(stream)
        else:
            raise ValueError(f"unsupported .npy format version {version}")
    except _DECODE_ERRORS as error:
        raise HttpError(400, f"Invalid {what}: bad header: {describe(error)}") from None
    if dtype.hasobject:
        raise HttpError(400, f"Pickled object arrays are not accepted in {what}")
    declared = math.prod(shape) * dtype.itemsize
    present = size - stream.tell()
    if declared != present:
        raise HttpError(
            400,
            f"Invalid {what}: its header declares shape {list(shape)} of {dtype} "
            f"({declared} bytes) but {present} bytes of data follow",
        )
    return shape, fortran_order, dtype


def _npz_inputs(body: bytes, inputs: Mapping[str, TensorSpec]) -> list[tuple[str, np.ndarray]]:
    if body.startswith(_NPY_MAGIC):
        raise HttpError(400, f"Invalid .npz payload: it is a single .npy array; send it as {NPY}")
    try:
        with zipfile.ZipFile(io.BytesIO(body)) as archive:
            members = _npz_members(archive)
            unknown = sorted(set(members) - set(inputs))
            if unknown:
                raise HttpError(
                    400,
                    f".npz has arrays {unknown} that are not inputs of the signature "
                    f"(inputs: {', '.join(sorted(inputs))})",
                )
            return [(name, _npz_array(archive, info)) for name, info in members.items()]
    except HttpError:
        raise
    except _DECODE_ERRORS as error:
        raise HttpError(400, f"Invalid .npz payload: {describe(error)}") from None


def _npz_members(archive: zipfile.ZipFile) -> dict[str, zipfile.ZipInfo]:
    """The archive's ``NAME.npy`` members by NAME, their declared sizes checked first."""
    members: dict[str, zipfile.ZipInfo] = {}
    total = 0
    for info in archive.infolist():
        if info.is_dir():
            continue
        name = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise HttpError(
                400, f"Invalid .npz payload: member {name!r} uses compression method "
                f"{info.compress_type}; only stored and deflated members are read"
            )  # fmt: skip
        total += info.file_size
        if total > MAX_DECODED_BYTES:
            raise HttpError(
                413, f".npz members declare more than {MAX_DECODED_BYTES} bytes uncompressed"
            )
        if name in members:
            raise HttpError(400, f"Invalid .npz payload: member {name!r} appears twice")
        members[name] = info
    if not members:
        raise HttpError(400, "Invalid .npz payload: the archive holds no arrays")
    return members


def _npz_array(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> np.ndarray:
    what = f".npz member {info.filename!r}"
    with archive.open(info) as stream:
        if stream.read(len(_NPY_MAGIC)) != _NPY_MAGIC:
            raise HttpError(400, f"Invalid {what}: it is not an .npy array")
    with archive.open(info) as stream:
        check_npy_header(stream, info.file_size, what)
    with archive.open(info) as stream:
        return np.lib.format.read_array(stream, allow_pickle=False)


def conform_array(array: np.ndarray, spec: TensorSpec) -> np.ndarray:
    """Check an array against an input: same-kind dtype casts are allowed, others refused."""
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
    _check_shape(array.shape, spec)
    return array.astype(target, copy=False)


def _check_shape(shape: tuple[int, ...], spec: TensorSpec) -> None:
    if spec.shape is None:
        return
    expected = spec.shape
    fits = len(shape) == len(expected) and all(
        want < 0 or want == got for want, got in zip(expected, shape, strict=True)
    )
    if not fits:
        wanted = [None if dim < 0 else dim for dim in expected]
        raise HttpError(
            400, f"Input {spec.name} expects shape {wanted}, got an array of shape {list(shape)}"
        )


def _text_inputs(
    body: bytes, kind: str, inputs: Mapping[str, TensorSpec]
) -> list[tuple[str, object]]:
    """JSON/JSON lines/CSV bodies (asked for with a binary Accept) as named nested lists, read
    by the njs's rules (:func:`conversion.read_values`): TF Serving's ``inputs`` (columns) or
    ``instances`` (rows), or a bare list of rows (here a flat list is a batch of scalars)."""
    if kind in conversion.CSV_TYPES:
        spec = _single_input(inputs, kind)
        return [(spec.name, _csv_instances(conversion.read_values(kind, body), spec))]
    document = conversion.read_values(kind, body)
    if isinstance(document, dict) and "inputs" in document:
        value = document["inputs"]
        if isinstance(value, dict):
            _check_names(value, inputs)
            return list(value.items())
        return [(_single_input(inputs, kind).name, value)]
    rows = document.get("instances") if isinstance(document, dict) else document
    if isinstance(rows, list) and rows and all(isinstance(row, dict) for row in rows):
        _check_names(rows[0], inputs)
        return [(name, [row.get(name) for row in rows]) for name in rows[0]]
    return [(_single_input(inputs, kind).name, rows)]


def _csv_instances(instances: list, spec: TensorSpec) -> list:
    """One-value rows are instances of one value each (as the njs path sends them): a batch
    of scalars for a rank-1 input; inputs of other ranks get a (rows, 1) matrix."""
    one_column = bool(instances) and not isinstance(instances[0], list)
    if one_column and not (spec.shape is not None and len(spec.shape) == 1):
        return [[value] for value in instances]
    return instances


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
        raise HttpError(400, f"Input {name} is not a rectangular array: {error}") from None


def split_image_stream(body: bytes) -> list[bytes]:
    """Split records of (4-byte big-endian length, encoded image).

    A zero length may end the stream (seed 000's handler reads until one); records after it
    would be dropped unseen, so they are an error.
    """
    view = memoryview(body)
    images: list[bytes] = []
    position = 0
    while position < len(view):
        if position + _RECORD_HEADER > len(view):
            raise HttpError(
                400, f"Truncated image stream: partial length header at byte {position}"
            )
        length = int.from_bytes(view[position : position + _RECORD_HEADER], "big")
        position += _RECORD_HEADER
        if length == 0:
            if position < len(view):
                raise HttpError(
                    400,
                    f"Image stream: record {len(images)} has length 0, which ends the stream, "
                    f"but {len(view) - position} more bytes follow it",
                )
            break
        if position + length > len(view):
            raise HttpError(
                400,
                f"Truncated image stream: record {len(images)} declares {length} bytes, "
                f"{len(view) - position} remain",
            )
        images.append(bytes(view[position : position + length]))
        position += length
    if not images:
        raise HttpError(400, "Empty image stream: no records")
    return images


def images_to_batch(
    images: list[bytes], spec: TensorSpec, options: ImageOptions
) -> tuple[np.ndarray, PixelCast | None]:
    """One batch from encoded images: bytes for DT_STRING inputs, pixels otherwise (with
    their cast when the input is a float)."""
    if spec.is_string:
        batch = np.empty(len(images), dtype=object)
        batch[:] = images
        return batch, None
    target = _image_geometry(spec)
    height, width = _batch_image_size(images, target, _itemsize(spec))
    batch = np.empty((len(images), height, width, target.channels), dtype=np.uint8)

    def decode_into_batch(index: int) -> None:
        decode_image(images[index], index, target, batch[index])

    # Each image is decoded straight into its place in the batch (no stacking copy); a large
    # batch on all cores, as Pillow decodes without the GIL.
    if batch.nbytes >= DECODE_ON_CORES_MIN_BYTES:
        native_threads.map_on_cores(decode_into_batch, range(len(images)))
    else:
        for index in range(len(images)):
            decode_into_batch(index)
    return _to_input_dtype(batch, spec, options)


@dataclass(frozen=True)
class _Geometry:
    height: int | None
    width: int | None
    channels: int


def _image_geometry(spec: TensorSpec) -> _Geometry:
    """Height, width and channels an NHWC image input wants (None = keep the image's)."""
    if spec.shape is None:
        return _Geometry(None, None, 3)
    if len(spec.shape) != 4:
        raise HttpError(
            400,
            f"Input {spec.name} of shape {list(spec.shape)} is not an NHWC image batch; "
            f"send {NPY} instead",
        )
    _, height, width, channels = spec.shape
    channels = 3 if channels < 0 else channels
    if channels not in _CHANNELS_TO_MODE:
        raise HttpError(400, f"Input {spec.name} wants {channels} channels per pixel")
    return _Geometry(height if height > 0 else None, width if width > 0 else None, channels)


def _itemsize(spec: TensorSpec) -> int:
    try:
        return tensors.numpy_dtype(spec.dtype).itemsize
    except tensors.TensorConversionError:
        return 8  # the widest; _to_input_dtype refuses the type afterwards


def _batch_image_size(images: list[bytes], target: _Geometry, itemsize: int) -> tuple[int, int]:
    """The (height, width) of the batch's images, from each image's header, before decoding
    anything: refused when the images differ and the model does not fix the size, or when an
    image or the whole input would be too large (a 100-byte PNG can declare 50,000 x 50,000
    pixels)."""
    sizes = []
    total = 0
    for index, data in enumerate(images):
        width, height = _declared_size(data, index)
        if width * height > MAX_IMAGE_PIXELS:
            raise HttpError(
                413,
                f"Image {index} declares {width} x {height} pixels; at most "
                f"{MAX_IMAGE_PIXELS} pixels are decoded",
            )
        size = (target.height or height, target.width or width)
        sizes.append(size)
        total += size[0] * size[1] * target.channels * itemsize
        if total > MAX_DECODED_BYTES:
            raise HttpError(
                413, f"The images decode to more than {MAX_DECODED_BYTES} bytes of input"
            )
    if len(set(sizes)) > 1:
        shapes = sorted({(height, width, target.channels) for height, width in sizes})
        raise HttpError(
            400,
            f"Images in one batch must have the same size when the model does not fix it, "
            f"got {shapes}",
        )
    return sizes[0]


def _declared_size(data: bytes, index: int) -> tuple[int, int]:
    """(width, height) as the image's header declares them."""
    try:
        with Image.open(io.BytesIO(data)) as image:
            return image.size
    except Image.DecompressionBombError as error:
        raise HttpError(413, f"Image {index} is too large: {error}") from None
    except UnidentifiedImageError:
        raise HttpError(
            400, f"Image {index} cannot be decoded: not a JPEG, PNG or other known image format"
        ) from None
    except _DECODE_ERRORS as error:
        raise HttpError(400, f"Image {index} cannot be decoded: {describe(error)}") from None


def decode_image(data: bytes, index: int, target: _Geometry, out: np.ndarray) -> None:
    """Decode one encoded image into ``out`` (uint8 HxWxC), in the target's channels (RGB
    order for 3), resized to ``out``'s height and width if it differs."""
    mode = _CHANNELS_TO_MODE[target.channels]
    height, width = out.shape[:2]
    try:
        with Image.open(io.BytesIO(data)) as image:
            image.load()
            if image.mode != mode:
                image = image.convert(mode)
            if image.size != (width, height):
                image = image.resize((width, height), Image.Resampling.BILINEAR)
            pixels = np.asarray(image)
    except UnidentifiedImageError:
        raise HttpError(
            400, f"Image {index} cannot be decoded: not a JPEG, PNG or other known image format"
        ) from None
    except (*_DECODE_ERRORS, Image.DecompressionBombError) as error:
        raise HttpError(400, f"Image {index} cannot be decoded: {describe(error)}") from None
    out[...] = pixels.reshape(height, width, target.channels)


def _to_input_dtype(
    batch: np.ndarray, spec: TensorSpec, options: ImageOptions
) -> tuple[np.ndarray, PixelCast | None]:
    """The batch for an integer input; the pixels and their cast for a float input."""
    target = tensors.numpy_dtype(spec.dtype)
    if target.kind == "f":
        return batch, PixelCast(target.name, options.scale, options.offset)
    if target.kind in "iu":
        return batch.astype(target, copy=False), None
    raise HttpError(
        400, f"Input {spec.name} of type {tensors.dtype_name(spec.dtype)} cannot take images"
    )
