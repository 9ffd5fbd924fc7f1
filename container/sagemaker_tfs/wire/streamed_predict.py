"""The project's streamed Predict: tensors as a header, then their raw bytes, both ways.

``STREAMED_PREDICT`` is a bidirectional stream. Each direction sends:

1. a header: the serialized PredictRequest (request) or PredictResponse (answer) whose
   numeric tensors have their dtype and shape but no values; string tensors are complete;
2. the numeric tensors' values, little-endian in C order, tensor after tensor in the order
   of their names (sorted), cut into messages of ``STREAM_PIECE_BYTES`` (the last shorter).

TF Serving's binary lacks the method (clients fall back to Predict, see ``client.py``);
TF Serving's own Predict is untouched. The format is for messages of tens of MB (31 MB of
pixels in, 55 MB of detections out): grpcio turns every received message into one ``bytes``
by copying its slices, which for one message of tens of MB into fresh memory costs several
times the transfer itself; here the receiver allocates each tensor once from the header and
copies every 1 MiB piece (still in the CPU caches) straight into it. ``StreamedTensors.pieces``
hands out each piece as it lands, so a caller can checksum a tensor while the rest of it is
still on its way.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import numpy as np
from google.protobuf.message import DecodeError, Message

from sagemaker_tfs.wire import protos, tensors
from sagemaker_tfs.wire.tensors import TensorConversionError

STREAMED_PREDICT = "/sagemaker_tfs.StreamedPrediction/PredictRaw"  # stream-stream
STREAM_PIECE_BYTES = 1 << 20


class StreamError(ValueError):
    """A stream does not match its header (cut short, too long, unreadable)."""


def raw_type(array: np.ndarray) -> np.dtype | None:
    """The little-endian dtype an output travels as raw bytes in; None: in the header."""
    enum = tensors.tf_dtype(array.dtype)
    if enum == tensors.DT_STRING:
        return None
    try:
        return tensors.numpy_dtype(enum).newbyteorder("<")
    except TensorConversionError:
        return None


# ---------------------------------------------------------------- writing


def request_messages(
    model_spec: Message,
    inputs: Mapping[str, object],
    output_filter: Iterable[str] = (),
    size: int = STREAM_PIECE_BYTES,
) -> Iterator[bytes]:
    """The messages of a streamed PredictRequest."""
    header = protos.PredictRequest()
    header.model_spec.MergeFromString(model_spec.SerializeToString())  # any ModelSpec class
    header.output_filter.extend(output_filter)
    return _messages(header, header.inputs, inputs, size)


def answer_messages(
    model_spec: Message, outputs: Mapping[str, object], size: int = STREAM_PIECE_BYTES
) -> Iterator[bytes]:
    """The messages of a streamed PredictResponse."""
    header = protos.PredictResponse()
    header.model_spec.MergeFromString(model_spec.SerializeToString())
    return _messages(header, header.outputs, outputs, size)


def _messages(
    header: Message, described: Any, arrays: Mapping[str, object], size: int
) -> Iterator[bytes]:
    """``header`` with ``arrays`` described in its tensor map ``described``, then the raw
    values of the numeric ones in pieces."""
    raw: list[memoryview] = []
    for name in sorted(arrays):
        array = np.asarray(arrays[name])
        if raw_type(array) is None:
            described[name].CopyFrom(tensors.to_tensor_proto(array))
        else:
            described[name].CopyFrom(tensors.tensor_header(array, tensors.tf_dtype(array.dtype)))
            raw.append(tensors.raw_bytes(array))
    yield header.SerializeToString()
    yield from pieces(raw, size)


def pieces(chunks: Iterable[bytes | memoryview], size: int = STREAM_PIECE_BYTES) -> Iterator[bytes]:
    """The concatenation of ``chunks`` as ``bytes`` of ``size`` (the last one shorter)."""
    pending: list[memoryview] = []
    pending_bytes = 0
    for chunk in chunks:
        view = memoryview(chunk).cast("B")
        while len(view):
            take = view[: size - pending_bytes]
            pending.append(take)
            pending_bytes += len(take)
            view = view[len(take) :]
            if pending_bytes == size:
                yield b"".join(pending)
                pending, pending_bytes = [], 0
    if pending:
        yield b"".join(pending)


# ---------------------------------------------------------------- reading (service, client)


class StreamedTensors:
    """The tensors of a streamed request or answer, filled as their pieces arrive.

    ``arrays`` exists once the header is read (numeric tensors allocated, not yet filled);
    iterating ``pieces()`` fills them and yields ``(name, the bytes just filled)`` in order:
    each numeric tensor's raw bytes, front to back. ``complete()`` fills them without looking.
    """

    def __init__(
        self,
        arrays: dict[str, np.ndarray],
        targets: list[tuple[str, memoryview]],
        messages: Iterator[bytes] | None = None,
        filled: bool = False,
    ) -> None:
        self.arrays = arrays
        self._targets = targets  # the raw bytes of each numeric tensor, in stream order
        self._messages = messages if messages is not None else iter(())
        self._filled = filled

    @classmethod
    def receive_answer(cls, messages: Iterable[bytes]) -> StreamedTensors:
        """The outputs of a streamed answer, its header read; ``pieces()`` reads the rest."""
        return cls._receive(messages, protos.PredictResponse, "outputs")[1]

    @classmethod
    def receive_request(
        cls, messages: Iterable[bytes], max_bytes: int | None = None
    ) -> tuple[Message, StreamedTensors]:
        """The header (a PredictRequest without numeric values) and inputs of a request; a
        header announcing more than ``max_bytes`` of values is refused before allocating."""
        return cls._receive(messages, protos.PredictRequest, "inputs", max_bytes)

    @classmethod
    def _receive(
        cls,
        messages: Iterable[bytes],
        header_type: type[Message],
        field: str,
        max_bytes: int | None = None,
    ) -> tuple[Message, StreamedTensors]:
        """The header (a ``header_type``) and the tensors of its map ``field``."""
        messages = iter(messages)
        data = next(messages, None)
        if data is None:
            raise StreamError("the stream ended before its header")
        try:
            header = header_type.FromString(data)
        except DecodeError:
            name = header_type.DESCRIPTOR.name
            raise StreamError(f"the stream's header is not a {name}") from None
        arrays, targets = _allocate(getattr(header, field), max_bytes)
        return header, cls(arrays, targets, messages)

    @classmethod
    def of(cls, outputs: Mapping[str, np.ndarray]) -> StreamedTensors:
        """Tensors that arrived whole (unary Predict): ``pieces()`` yields each numeric
        tensor's bytes in one piece."""
        arrays = {name: np.asarray(array, order="C") for name, array in outputs.items()}
        return cls(arrays, _raw_views(arrays), filled=True)

    @property
    def arriving(self) -> list[str]:
        """The names of the arrays whose bytes ``pieces()`` yields (numeric, not empty)."""
        return [name for name, _ in self._targets]

    def pieces(self, fill: bool = True) -> Iterator[tuple[str, memoryview]]:
        """Read the stream, yielding each array's bytes front to back as they land; with
        ``fill`` they are copied into ``arrays`` (and the views yielded are of those), else
        the views are of the received messages and ``arrays`` stay unfilled."""
        if self._filled:
            yield from self._targets
            return
        expected = sum(len(view) for _, view in self._targets)
        received = 0
        targets = iter(self._targets)
        name, target = "", memoryview(b"")
        for message in self._messages:
            piece = memoryview(message)
            received += len(piece)
            if received > expected:
                raise StreamError(
                    f"the stream has more than the {expected} bytes its header announces"
                )
            while len(piece):
                if not len(target):
                    name, target = next(targets)
                take = min(len(piece), len(target))
                if fill:
                    target[:take] = piece[:take]
                    yield name, target[:take]
                else:
                    yield name, piece[:take]
                target, piece = target[take:], piece[take:]
        if received != expected:
            raise StreamError(
                f"the stream ended after {received} of the {expected} bytes its header announces"
            )
        self._filled = fill

    def complete(self) -> dict[str, np.ndarray]:
        """Every array, filled."""
        for _ in self.pieces():
            pass
        return self.arrays


def _check_total(described: Any, max_bytes: int | None) -> None:
    """Refuse a header that announces more than ``max_bytes`` of numeric values (None or
    negative: no bound)."""
    if max_bytes is None or max_bytes < 0:
        return
    total = 0
    for proto in described.values():
        if proto.dtype == tensors.DT_STRING:
            continue
        try:
            itemsize = tensors.numpy_dtype(proto.dtype).itemsize
        except TensorConversionError:
            continue  # _allocate names it
        total += itemsize * math.prod(max(size, 0) for size in tensors.shape_of(proto))
    if total > max_bytes:
        raise StreamError(f"the stream announces {total} bytes of tensors, more than {max_bytes}")


def _raw_views(arrays: Mapping[str, np.ndarray]) -> list[tuple[str, memoryview]]:
    """The bytes of each non-empty numeric array, in stream order (by name)."""
    return [
        (name, arrays[name].reshape(-1).view(np.uint8).data)
        for name in sorted(arrays)
        if raw_type(arrays[name]) is not None and arrays[name].size
    ]


def _allocate(
    described: Any, max_bytes: int | None
) -> tuple[dict[str, np.ndarray], list[tuple[str, memoryview]]]:
    """The tensors a header's map describes (numeric ones allocated, unfilled), their bytes."""
    _check_total(described, max_bytes)
    arrays: dict[str, np.ndarray] = {}
    for name, proto in described.items():
        if proto.dtype == tensors.DT_STRING:
            arrays[name] = tensors.to_ndarray(proto)
            continue
        shape = tensors.shape_of(proto)
        if any(size < 0 for size in shape):
            raise StreamError(f"the stream's tensor {name!r} has shape {list(shape)}")
        try:
            dtype = tensors.numpy_dtype(proto.dtype).newbyteorder("<")
        except TensorConversionError as error:
            raise StreamError(f"the stream's tensor {name!r}: {error}") from None
        arrays[name] = np.empty(shape, dtype)
    return arrays, _raw_views(arrays)
