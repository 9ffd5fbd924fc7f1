"""Requests of the fast path: request bodies -> named NumPy inputs, checked against the
signature.

``application/x-npy`` (one input), ``application/x-npz`` (one array per input) and JSON, JSON
lines and CSV bodies sent with a binary Accept (read by the njs's rules, by ``text_codecs``);
images and image streams are ``image_inputs``'. Every problem with the request raises
:class:`HttpError` with an HTTP status and a message that says what is wrong.
"""

from __future__ import annotations

import io
import math
import struct
import zipfile
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from sagemaker_tfs.service.codecs import text_codecs
from sagemaker_tfs.service.codecs.content_types import (
    DECODE_ERRORS,
    IMAGE_STREAM,
    INPUT_TYPES,
    MAX_DECODED_BYTES,
    NPY,
    NPZ,
    TEXT_TYPES,
    single_input,
)
from sagemaker_tfs.service.codecs.image_inputs import (
    ImageOptions,
    images_to_batch,
    split_image_stream,
)
from sagemaker_tfs.wire import pixels, tensors
from sagemaker_tfs.wire.errors import HttpError, describe
from sagemaker_tfs.wire.pixels import PixelCast
from sagemaker_tfs.wire.signatures import TensorSpec

_NPY_MAGIC = b"\x93NUMPY"
_NPZ_MAGIC = b"PK\x03\x04"
# A zip member's local header (signature, versions, flags, method, time, date, CRC-32, sizes,
# name and extra field lengths), as zipfile reads it; bit 0 of the flags: encrypted.
_LOCAL_HEADER = struct.Struct("<4s2B4HL2L2H")
_ENCRYPTED = 0x1
# How much of a stored .npz member its .npy header is read from (the header of np.save's
# format 2.0 may be larger than 64 KiB, never near this).
_NPY_HEADER_READ = 1 << 20


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


def decode_request(
    body: bytes, kind: str, inputs: Mapping[str, TensorSpec], options: ImageOptions
) -> DecodedInputs:
    """Decode a request body of media type ``kind`` into inputs keyed by alias, image pixels
    not yet widened."""
    if kind not in INPUT_TYPES:
        raise HttpError(415, f"Unsupported Media Type: {kind or 'none'}")
    if not body:
        raise HttpError(400, f"Empty request body for {kind}")
    if kind == NPY:
        spec = single_input(inputs, kind)
        return DecodedInputs({spec.name: conform_array(decode_npy(body), spec)}, {})
    if kind == NPZ:
        arrays = {
            name: conform_array(array, inputs[name]) for name, array in _npz_inputs(body, inputs)
        }
        return DecodedInputs(arrays, {})
    if kind in TEXT_TYPES:
        named = text_codecs.read_body(kind, body, text_codecs.ForInputs(inputs))
        return DecodedInputs({name: conform_array(array, inputs[name]) for name, array in named},
                             {})  # fmt: skip
    spec = single_input(inputs, kind)
    images = split_image_stream(body) if kind == IMAGE_STREAM else [body]
    batch, cast = images_to_batch(images, spec, options)
    return DecodedInputs({spec.name: batch}, {spec.name: cast} if cast else {})


def decode_npy(body: bytes) -> np.ndarray:
    """One .npy array, as a read-only view of the body's data (a 1 GB body is not copied);
    object (pickled) arrays are refused."""
    if body.startswith(_NPZ_MAGIC):
        raise HttpError(400, f"Invalid .npy payload: it is an .npz archive; send it as {NPZ}")
    if not body.startswith(_NPY_MAGIC):
        raise HttpError(400, "Invalid .npy payload: it does not start with the .npy magic")
    return _npy_view(body, io.BytesIO(body), ".npy payload")  # BytesIO shares the bytes


def _npy_view(data: bytes | memoryview, header: io.BytesIO, what: str) -> np.ndarray:
    """The .npy array in ``data`` as a read-only view of it; ``header`` reads ``data`` from its
    start (at least up to the end of the .npy header)."""
    shape, fortran_order, dtype = check_npy_header(header, len(data), what)
    if dtype.itemsize == 0:
        return np.empty(shape, dtype)
    array = np.frombuffer(data, dtype, math.prod(shape), header.tell())
    return array.reshape(shape, order="F" if fortran_order else "C")


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
    except DECODE_ERRORS as error:
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
            return [(name, _npz_array(body, archive, info)) for name, info in members.items()]
    except HttpError:
        raise
    except DECODE_ERRORS as error:
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


def _npz_array(body: bytes, archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> np.ndarray:
    """A member's array: a view of the body for a stored member (what ``np.savez`` writes),
    read out of the archive for a deflated one."""
    what = f".npz member {info.filename!r}"
    if info.compress_type == zipfile.ZIP_STORED:
        data = _stored_member(body, info, what)
        if bytes(data[: len(_NPY_MAGIC)]) != _NPY_MAGIC:
            raise HttpError(400, f"Invalid {what}: it is not an .npy array")
        return _npy_view(data, io.BytesIO(data[:_NPY_HEADER_READ]), what)
    with archive.open(info) as stream:
        if stream.read(len(_NPY_MAGIC)) != _NPY_MAGIC:
            raise HttpError(400, f"Invalid {what}: it is not an .npy array")
    with archive.open(info) as stream:
        check_npy_header(stream, info.file_size, what)
    with archive.open(info) as stream:
        return np.lib.format.read_array(stream, allow_pickle=False)


def _stored_member(body: bytes, info: zipfile.ZipInfo, what: str) -> memoryview:
    """A stored member's bytes where they are in the body, checked as ``zipfile`` checks them
    (its local header, its CRC-32), without copying them."""
    start = info.header_offset
    local = body[start : start + _LOCAL_HEADER.size]
    if len(local) != _LOCAL_HEADER.size or local[:4] != _NPZ_MAGIC:
        raise HttpError(400, f"Invalid {what}: its local header is missing")
    if info.flag_bits & _ENCRYPTED:
        raise HttpError(400, f"Invalid {what}: it is encrypted")
    name_length, extra_length = _LOCAL_HEADER.unpack(local)[-2:]
    begin = start + _LOCAL_HEADER.size + name_length + extra_length
    data = memoryview(body)[begin : begin + info.compress_size]
    if len(data) != info.compress_size or zlib.crc32(data) != info.CRC:
        raise HttpError(400, f"Invalid {what}: its data do not match its size and CRC-32")
    return data


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
