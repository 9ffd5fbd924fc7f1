"""The fast path's codecs in one registry by media type (as falcon's media handlers): for each
type, one ``Codec`` that says whether it reads a body of the type and whether it writes an
answer of it, and does both. ``inputs`` and ``answers`` go through ``CODECS``, and the 415, the
406 and the Accept list's choice follow from it: a new media type is one codec registered (the
njs sends the service any type it does not convert). Here: JSON and JSON lines (read by
``text_codecs.read_body``, written as TF Serving's ``{"predictions": ...}``) and CSV; and the
answer's media type, decided once per request from Accept (``answer_type``). A request body is
decoded by its type's codec (``decode_request``) and an answer written by its type's codec
(``encode_outputs``, ``encode_answer``). Every problem with a request raises ``HttpError``
with an HTTP status and a message that says what is wrong.
"""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
import orjson

from sagemaker_tfs.service.codecs import text_codecs
from sagemaker_tfs.service.codecs.content_types import (
    CSV,
    IMAGE_STREAM,
    IMAGE_TYPES,
    JSON,
    JSON_LINES_TYPES,
    JSONLINES,
    NPY,
    NPZ,
    Chunk,
    Codec,
    DecodedInputs,
    ImageOptions,
    StreamedBody,
    conform_array,
    one_line_json_type,
    only_output,
)
from sagemaker_tfs.service.codecs.image_inputs import ImageCodec
from sagemaker_tfs.service.codecs.numpy_codecs import NpyCodec, NpzCodec
from sagemaker_tfs.wire.errors import HttpError
from sagemaker_tfs.wire.http_headers import MediaType
from sagemaker_tfs.wire.signatures import TensorSpec
from sagemaker_tfs.wire.streamed_predict import StreamedTensors

_ORJSON_NUMPY = orjson.OPT_SERIALIZE_NUMPY

Writer = Callable[[Mapping[str, np.ndarray]], bytes]


class TextCodec(Codec):
    """JSON, a JSON lines name or CSV: read by the njs's rules (``text_codecs.read_body``, the
    text family's one entry point), written by ``writer`` if the type is answered at all."""

    reads = True

    def __init__(self, media_type: str, writer: Writer | None) -> None:
        super().__init__(media_type)
        self.writer = writer
        self.writes = writer is not None

    def read(
        self, body: bytes, inputs: Mapping[str, TensorSpec], options: ImageOptions
    ) -> DecodedInputs:
        named = text_codecs.read_body(self.media_type, body, text_codecs.ForInputs(inputs))
        arrays = {name: conform_array(array, inputs[name]) for name, array in named}
        return DecodedInputs(arrays, {})

    def write(self, outputs: Mapping[str, np.ndarray]) -> list[Chunk]:
        if self.writer is None:
            return super().write(outputs)
        return [self.writer(outputs)]


class CodecRegistry(dict[str, Codec]):
    """The codecs by media type, in the order they were registered (the order the 406 lists
    the types written in)."""

    def __init__(self, codecs: Iterable[Codec] = ()) -> None:
        super().__init__((codec.media_type, codec) for codec in codecs)

    def reads(self, kind: str) -> bool:
        return kind in self and self[kind].reads

    def writes(self, kind: str) -> bool:
        return kind in self and self[kind].writes

    def reader(self, kind: str) -> Codec:
        """The codec reading ``kind``; a 415 when none does."""
        if not self.reads(kind):
            raise HttpError(415, f"Unsupported Media Type: {kind or 'none'}")
        return self[kind]

    def written_types(self) -> list[str]:
        return [kind for kind, codec in self.items() if codec.writes]

    def choose_output_type(self, accept: Sequence[MediaType]) -> str | None:
        """The first written type of an Accept header's types; JSON when none or ``*/*``;
        None when it lists only types that no codec writes."""
        if not accept:
            return JSON
        for entry in accept:
            if self.writes(entry.name):
                return entry.name
            if entry.name in ("*/*", "application/*"):
                return JSON
        return None

    def not_acceptable(self, accept: Sequence[MediaType]) -> HttpError:
        listed = ", ".join(entry.name for entry in accept)
        supported = ", ".join(self.written_types())
        return HttpError(406, f"Not Acceptable: {listed}; supported: {supported}")


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
        fast_path=CODECS.choose_output_type(accept),
        handler=JSON if header in ("", "*/*") else header,
    )


def _encode_csv(outputs: Mapping[str, np.ndarray]) -> bytes:
    array = only_output(outputs, CSV)
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


def _builtin_codecs() -> list[Codec]:
    """Registered in the order of the types the 406 lists: JSON, JSON lines, .npy, .npz, CSV."""
    text = [TextCodec(JSON, _encode_json), TextCodec(JSONLINES, _encode_json)]
    text += [TextCodec(kind, None) for kind in JSON_LINES_TYPES if kind != JSONLINES]
    images = [ImageCodec(kind) for kind in sorted(IMAGE_TYPES)] + [ImageCodec(IMAGE_STREAM)]
    return [*text, NpyCodec(NPY), NpzCodec(NPZ), TextCodec(CSV, _encode_csv), *images]


CODECS = CodecRegistry(_builtin_codecs())


def decode_request(
    body: bytes, kind: str, inputs: Mapping[str, TensorSpec], options: ImageOptions
) -> DecodedInputs:
    """Decode a request body of media type ``kind`` into inputs keyed by alias, image pixels
    not yet widened: a 415 for a type no codec reads, a 400 for an empty body."""
    codec = CODECS.reader(kind)
    if not body:
        raise HttpError(400, f"Empty request body for {kind}")
    return codec.read(body, inputs, options)


def encode_outputs(outputs: Mapping[str, np.ndarray], output_type: str) -> tuple[list[Chunk], str]:
    """Serialize named outputs as ``output_type`` (a type a codec writes): the body as chunks
    to send one after the other, and its content type."""
    return CODECS[output_type].write(outputs), output_type


def encode_answer(
    answer: StreamedTensors, output_type: str
) -> tuple[list[Chunk] | StreamedBody, str]:
    """``encode_outputs`` of an answer still arriving: its codec may pass it on piece by piece
    as it arrives (an ``.npz``, the ``.npy`` of one numeric output: never whole in memory);
    others wait for the whole answer."""
    return CODECS[output_type].write_arriving(answer), output_type
