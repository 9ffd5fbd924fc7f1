"""The NumPy codecs: ``application/x-npy`` (one input or output) and ``application/x-npz`` (an
array per input or output), read as views of the body (an .npz member read out of the archive
only when deflated; every declared size checked before anything is allocated) and written as
views of the outputs; an .npz answer (``npz_writer``) and the .npy of one numeric output are
passed on piece by piece while they arrive from the model server.

Passing an answer on piece by piece in one loop makes the two hops take turns: while the
worker waits for nginx to take a piece, nobody asks gRPC for the next one, so the model server
stops for lack of flow-control window; while the worker waits for the next piece, the
connection to nginx is idle. ``read_ahead`` receives in a thread of its own (a greenlet under
gunicorn's gevent worker, whose monkey-patching makes ``threading`` and ``queue`` cooperative)
into a queue of a few pieces, so both hops move at once while the memory held stays bounded:
at most ``depth`` pieces besides the one being sent.
"""

from __future__ import annotations

import io
import itertools
import math
import queue
import struct
import threading
import zipfile
import zlib
from collections.abc import Iterator, Mapping
from typing import Any, TypeVar

import numpy as np

from sagemaker_tfs.service.codecs import npz_writer
from sagemaker_tfs.service.codecs.content_types import (
    DECODE_ERRORS,
    MAX_DECODED_BYTES,
    NPY,
    NPZ,
    Chunk,
    Codec,
    DecodedInputs,
    ImageOptions,
    StreamedBody,
    conform_array,
    only_output,
    single_input,
)
from sagemaker_tfs.wire.errors import HttpError, describe
from sagemaker_tfs.wire.signatures import TensorSpec
from sagemaker_tfs.wire.streamed_predict import StreamedTensors

T = TypeVar("T")

_NPY_MAGIC = b"\x93NUMPY"
_NPZ_MAGIC = b"PK\x03\x04"
# A zip member's local header (signature, versions, flags, method, time, date, CRC-32, sizes,
# name and extra field lengths), as zipfile reads it; bit 0 of the flags: encrypted.
_LOCAL_HEADER = struct.Struct("<4s2B4HL2L2H")
_ENCRYPTED = 0x1
# How much of a stored .npz member its .npy header is read from (the header of np.save's
# format 2.0 may be larger than 64 KiB, never near this).
_NPY_HEADER_READ = 1 << 20


class NpyCodec(Codec):
    """``application/x-npy``: one input, one output."""

    reads = writes = True

    def read(
        self, body: bytes, inputs: Mapping[str, TensorSpec], options: ImageOptions
    ) -> DecodedInputs:
        spec = single_input(inputs, NPY)
        return DecodedInputs({spec.name: conform_array(decode_npy(body), spec)}, {})

    def write(self, outputs: Mapping[str, np.ndarray]) -> list[Chunk]:
        return _encode_npy(only_output(outputs, NPY))

    def write_arriving(self, answer: StreamedTensors) -> list[Chunk] | StreamedBody:
        """The .npy of one numeric output is passed on while it arrives (its header is known
        from the answer's header); other answers wait until they are whole."""
        if answer.arriving == list(answer.arrays) and len(answer.arrays) == 1:
            return _encode_npy_streamed(answer)
        return self.write(answer.complete())


class NpzCodec(Codec):
    """``application/x-npz``: an array per input; every output, passed on while it arrives."""

    reads = writes = True

    def read(
        self, body: bytes, inputs: Mapping[str, TensorSpec], options: ImageOptions
    ) -> DecodedInputs:
        arrays = {
            name: conform_array(array, inputs[name]) for name, array in _npz_inputs(body, inputs)
        }
        return DecodedInputs(arrays, {})

    def write(self, outputs: Mapping[str, np.ndarray]) -> list[Chunk]:
        return list(_encode_npz(StreamedTensors.of(outputs)).chunks)

    def write_arriving(self, answer: StreamedTensors) -> StreamedBody:
        return _encode_npz(answer)


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


def _encode_npy(array: np.ndarray) -> list[Chunk]:
    """The ``.npy`` format: a header, then the array's bytes in C order (viewed, not copied)."""
    if array.dtype == object:
        array = _strings_as_fixed_bytes(array)
    array = np.asarray(array, order="C")  # (ascontiguousarray would make a scalar 1-d)
    header = io.BytesIO()
    fields = np.lib.format.header_data_from_array_1_0(array)
    try:
        np.lib.format.write_array_header_1_0(header, fields)
    except ValueError:  # a header over 64 KiB (huge structured dtypes) needs version 2.0
        np.lib.format.write_array_header_2_0(header, fields)
    return [header.getvalue(), array.reshape(-1).view(np.uint8).data]


def _encode_npy_streamed(answer: StreamedTensors) -> StreamedBody:
    """The header of the one output (known from the answer's header), then its bytes."""
    (array,) = answer.arrays.values()
    head, data = _encode_npy(array)
    pieces = (piece for _, piece in read_ahead(answer.pieces(fill=False)))
    return StreamedBody(len(head) + len(data), itertools.chain([head], pieces))


def _encode_npz(answer: StreamedTensors) -> StreamedBody:
    """What ``np.savez`` writes (a zip of one ``.npy`` per output, stored uncompressed, in
    the order of their names): the arrays' bytes are the answer's pieces, not copies."""
    arriving = set(answer.arriving)
    members: list[npz_writer.Member] = []
    index: dict[str, int] = {}
    for name in sorted(answer.arrays):
        head, data = _encode_npy(answer.arrays[name])
        index[name] = len(members)
        known = None if name in arriving else data
        members.append(npz_writer.Member(f"{name}.npy", bytes(head), len(data), known))
    pieces = ((index[name], data) for name, data in read_ahead(answer.pieces(fill=False)))
    return StreamedBody(*npz_writer.zip_stream(members, pieces))


def _strings_as_fixed_bytes(array: np.ndarray) -> np.ndarray:
    """DT_STRING outputs as ``S`` arrays, so no pickle is needed to read them back."""
    return array.astype(np.bytes_)


# 4 pieces of the streamed Predict's 1 MiB: 4 MiB more held at most. Other depths were not
# measured; the gain itself was 3-7% on a 55 MB answer, on a loaded machine
# (docs/performance.md, "The 55 MB answer again").
DEPTH = 4

_END = object()


class _Failure:
    def __init__(self, error: BaseException) -> None:
        self.error = error


def read_ahead(items: Iterator[T], depth: int = DEPTH) -> Iterator[T]:
    """``items``, pulled by a reader thread up to ``depth`` ahead of the consumer. An error of
    ``items`` is raised to the consumer at its place; a consumer that stops early (a client
    gone) stops the reader too, which then drops ``items`` (cancelling a gRPC call)."""
    pending: queue.Queue[object] = queue.Queue(maxsize=depth)
    stopped = threading.Event()
    reader = threading.Thread(target=_read, args=(items, pending, stopped), daemon=True)
    reader.start()
    try:
        while True:
            item = pending.get()
            if item is _END:
                return
            if isinstance(item, _Failure):
                raise item.error
            yield item  # type: ignore[misc]
    finally:
        stopped.set()
        _drain(pending)


def _read(items: Iterator[T], pending: queue.Queue[object], stopped: threading.Event) -> None:
    try:
        for item in items:
            if not _put(pending, item, stopped):
                return
        _put(pending, _END, stopped)
    except BaseException as error:  # noqa: BLE001 - handed to the consumer, raised there
        _put(pending, _Failure(error), stopped)


def _put(pending: queue.Queue[object], item: object, stopped: threading.Event) -> bool:
    """Waits for room unless the consumer has gone; whether the item was queued."""
    while not stopped.is_set():
        try:
            pending.put(item, timeout=0.5)
            return True
        except queue.Full:
            continue
    return False


def _drain(pending: queue.Queue[object]) -> None:
    """Empties the queue so that a reader blocked on a full one sees ``stopped`` at once."""
    while True:
        try:
            pending.get_nowait()
        except queue.Empty:
            return
