"""Answers of the fast path: named NumPy outputs -> response bodies.

``application/json`` (TF Serving's ``{"predictions": ...}``), ``application/jsonlines`` (the
same on one line), ``application/x-npy`` (one output), ``application/x-npz`` (every output,
passed on while it arrives from the model server) and ``text/csv`` (one output). The content
types, and which one an Accept list chooses, are in ``content_types``.
"""

from __future__ import annotations

import base64
import io
import itertools
import json
from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

import numpy as np
import orjson

from sagemaker_tfs.service.codecs import npz_writer
from sagemaker_tfs.service.codecs.content_types import CSV, JSON, NPY, NPZ
from sagemaker_tfs.service.codecs.read_ahead import read_ahead
from sagemaker_tfs.wire.errors import HttpError
from sagemaker_tfs.wire.streamed_predict import StreamedTensors

_ORJSON_NUMPY = orjson.OPT_SERIALIZE_NUMPY

Chunk = bytes | memoryview


def encode_outputs(outputs: Mapping[str, np.ndarray], output_type: str) -> tuple[list[Chunk], str]:
    """Serialize named outputs as ``output_type`` (one of OUTPUT_TYPES).

    The body is a list of chunks to send one after the other: NumPy answers refer to the
    output buffers instead of copying tens of MB into one ``bytes``.
    """
    if output_type == NPZ:
        return list(_encode_npz(StreamedTensors.of(outputs)).chunks), NPZ
    if output_type == NPY:
        return _encode_npy(_only_output(outputs, NPY)), NPY
    if output_type == CSV:
        return [_encode_csv(_only_output(outputs, CSV))], CSV
    return [_encode_json(outputs)], output_type


def _only_output(outputs: Mapping[str, np.ndarray], output_type: str) -> np.ndarray:
    if len(outputs) == 1:
        return next(iter(outputs.values()))
    raise HttpError(
        406,
        f"The model returns {len(outputs)} outputs ({', '.join(sorted(outputs))}); "
        f"{output_type} holds one: ask for {NPZ} or {JSON}",
    )


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


class StreamedBody(NamedTuple):
    """An answer sent while it is still being received: its length and its chunks."""

    length: int
    chunks: Iterator[Chunk]


class WrittenBody(NamedTuple):
    """An answer written while it is sent, its length unknown until the end (sent chunked):
    a JSON answer of a text body, whose text would be 1-1.5x the body if held whole."""

    chunks: Iterator[bytes]


def encode_answer(
    answer: StreamedTensors, output_type: str
) -> tuple[list[Chunk] | StreamedBody, str]:
    """``encode_outputs`` of an answer still arriving: an ``.npz`` (``npz_writer``) and the
    ``.npy`` of one numeric output are passed on piece by piece as they arrive, so the answer
    is never whole in memory; other types wait for the whole answer."""
    if output_type == NPZ:
        return _encode_npz(answer), NPZ
    if output_type == NPY and answer.arriving == list(answer.arrays) and len(answer.arrays) == 1:
        return _encode_npy_streamed(answer), NPY
    return encode_outputs(answer.complete(), output_type)


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


def _encode_csv(array: np.ndarray) -> bytes:
    rows = array.reshape(array.shape[0], -1) if array.ndim > 1 else array.reshape(-1, 1)
    if rows.dtype == object:
        rows = np.vectorize(_json_scalar, otypes=[object])(rows).astype(str)
        fmt = "%s"
    else:
        fmt = "%.9g" if rows.dtype.kind == "f" else "%d"
    buffer = io.StringIO()
    np.savetxt(buffer, rows, fmt=fmt, delimiter=",")
    return buffer.getvalue().encode("utf-8")


def _encode_json(outputs: Mapping[str, np.ndarray]) -> bytes:
    """``{"predictions": ...}``; orjson writes numeric arrays straight from their buffers.

    orjson writes NaN and infinities as ``null``, TF Serving writes ``NaN``/``Infinity``; so
    outputs with non-finite values, and strings, go through the standard library instead.
    """
    if all(_orjson_can_write(array) for array in outputs.values()):
        arrays = {name: np.ascontiguousarray(array) for name, array in outputs.items()}
        return orjson.dumps({"predictions": _predictions(arrays)}, option=_ORJSON_NUMPY)
    columns = {name: _json_values(array) for name, array in outputs.items()}
    return json.dumps({"predictions": _predictions(columns)}, separators=(",", ":")).encode()


def _orjson_can_write(array: np.ndarray) -> bool:
    if array.dtype.kind not in "biuf" or array.dtype.itemsize > 8:
        return False
    return array.dtype.kind != "f" or bool(np.isfinite(array).all())


def _predictions(columns: Mapping[str, Any]) -> object:
    """TF Serving's row format: one output gives its rows, several give one object per row."""
    if len(columns) == 1:
        return next(iter(columns.values()))
    names = sorted(columns)
    sizes = {len(columns[name]) if _has_rows(columns[name]) else -1 for name in names}
    if len(sizes) != 1 or -1 in sizes:
        return {name: columns[name] for name in names}  # TF Serving would refuse; keep all
    return [{name: columns[name][row] for name in names} for row in range(sizes.pop())]


def _has_rows(column: Any) -> bool:
    return isinstance(column, list) or (isinstance(column, np.ndarray) and column.ndim > 0)


def _json_values(array: np.ndarray) -> object:
    if array.dtype == object:
        return np.vectorize(_json_scalar, otypes=[object])(array).tolist()
    return array.tolist()


def _json_scalar(value: object) -> object:
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return {"b64": base64.b64encode(value).decode("ascii")}
    return value
