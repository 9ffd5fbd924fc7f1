"""The project's streamed Predict: the answer as a header, then the tensors' raw bytes.

``STREAMED_PREDICT`` takes TF Serving's PredictRequest and answers with a stream of messages:

1. a serialized PredictResponse (``model_spec`` and every output) in which numeric outputs
   have their dtype and shape but no values; string outputs are complete;
2. the numeric outputs' values, little-endian in C order, output after output in the order
   of their names (sorted), cut into messages of ``STREAM_PIECE_BYTES`` (the last shorter).

TF Serving's binary lacks the method (clients fall back to Predict, see ``client.py``);
TF Serving's own Predict is untouched. The format is for answers of tens of MB: the reader
allocates each output once from the header and copies every piece straight into it, so
the answer is never joined into one ``bytes`` nor parsed (grpcio already copies each message
once, into a ``bytes``; pieces of 1 MiB stay in the CPU caches). It hands out each piece as
it lands (``StreamedAnswer.pieces``), so a caller can checksum an output while the rest
is still on its way.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

import numpy as np
from google.protobuf.message import DecodeError, Message

from sagemaker_tfs.wire import protos, tensors
from sagemaker_tfs.wire.tensors import TensorConversionError

STREAMED_PREDICT = "/sagemaker_tfs.StreamedPrediction/PredictRaw"
STREAM_PIECE_BYTES = 1 << 20


class StreamError(ValueError):
    """The streamed answer does not match its header (cut short, too long, unreadable)."""


def raw_type(array: np.ndarray) -> np.dtype | None:
    """The little-endian dtype an output travels as raw bytes in; None: in the header."""
    enum = tensors.tf_dtype(array.dtype)
    if enum == tensors.DT_STRING:
        return None
    try:
        return tensors.numpy_dtype(enum).newbyteorder("<")
    except TensorConversionError:
        return None


# ---------------------------------------------------------------- writing (model server)


def streamed_messages(
    model_spec: Message, outputs: Mapping[str, np.ndarray], size: int = STREAM_PIECE_BYTES
) -> Iterator[bytes]:
    """The messages of a streamed answer: the header, then the raw values in pieces."""
    header = protos.PredictResponse()
    header.model_spec.MergeFromString(model_spec.SerializeToString())  # any ModelSpec class
    raw: list[memoryview] = []
    for name in sorted(outputs):
        array = np.asarray(outputs[name])
        if raw_type(array) is None:
            header.outputs[name].CopyFrom(tensors.to_tensor_proto(array))
        else:
            header.outputs[name].CopyFrom(tensors.tensor_header(array, tensors.tf_dtype(array.dtype)))
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


class StreamedAnswer:
    """The outputs of an answer, filled as its pieces arrive.

    ``outputs`` exists once the header is read (numeric outputs allocated, not yet filled);
    iterating ``pieces()`` fills them and yields ``(name, the bytes just filled)`` in order:
    each numeric output's raw bytes, front to back. ``complete()`` fills them without looking.
    """

    def __init__(
        self,
        outputs: dict[str, np.ndarray],
        targets: list[tuple[str, memoryview]],
        messages: Iterator[bytes] | None = None,
        filled: bool = False,
    ) -> None:
        self.outputs = outputs
        self._targets = targets  # the raw bytes of each numeric output, in stream order
        self._messages = messages if messages is not None else iter(())
        self._filled = filled

    @classmethod
    def receive(cls, messages: Iterable[bytes]) -> StreamedAnswer:
        """Read the header of a streamed answer; ``pieces()`` reads the rest."""
        messages = iter(messages)
        header = next(messages, None)
        if header is None:
            raise StreamError("the streamed answer ended before its header")
        outputs, targets = _allocate(_parse_header(header))
        return cls(outputs, targets, messages)

    @classmethod
    def of(cls, outputs: Mapping[str, np.ndarray]) -> StreamedAnswer:
        """An answer that arrived whole (unary Predict): ``pieces()`` yields each numeric
        output's bytes in one piece."""
        arrays = {name: np.asarray(array, order="C") for name, array in outputs.items()}
        return cls(arrays, _raw_views(arrays), filled=True)

    def pieces(self) -> Iterator[tuple[str, memoryview]]:
        """Fill the outputs from the stream, yielding each filled region as it lands."""
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
                    f"the streamed answer has more than the {expected} bytes its header announces"
                )
            while len(piece):
                if not len(target):
                    name, target = next(targets)
                take = min(len(piece), len(target))
                target[:take] = piece[:take]
                yield name, target[:take]
                target, piece = target[take:], piece[take:]
        if received != expected:
            raise StreamError(
                f"the streamed answer ended after {received} of the {expected} bytes "
                "its header announces"
            )
        self._filled = True

    def complete(self) -> dict[str, np.ndarray]:
        """Every output, filled."""
        for _ in self.pieces():
            pass
        return self.outputs


def _parse_header(header: bytes) -> Message:
    try:
        return protos.PredictResponse.FromString(header)
    except DecodeError:
        raise StreamError("the streamed answer's header is not a PredictResponse") from None


def _raw_views(outputs: Mapping[str, np.ndarray]) -> list[tuple[str, memoryview]]:
    """The bytes of each non-empty numeric output, in stream order (by name)."""
    return [
        (name, memoryview(outputs[name].reshape(-1).view(np.uint8)))
        for name in sorted(outputs)
        if raw_type(outputs[name]) is not None and outputs[name].size
    ]


def _allocate(response: Message) -> tuple[dict[str, np.ndarray], list[tuple[str, memoryview]]]:
    """The outputs the header describes (numeric ones allocated, unfilled) and their bytes."""
    outputs: dict[str, np.ndarray] = {}
    for name, proto in response.outputs.items():
        if proto.dtype == tensors.DT_STRING:
            outputs[name] = tensors.to_ndarray(proto)
            continue
        shape = tensors.shape_of(proto)
        if any(size < 0 for size in shape):
            raise StreamError(f"the streamed answer's output {name!r} has shape {list(shape)}")
        try:
            dtype = tensors.numpy_dtype(proto.dtype).newbyteorder("<")
        except TensorConversionError as error:
            raise StreamError(f"the streamed answer's output {name!r}: {error}") from None
        outputs[name] = np.empty(shape, dtype)
    return outputs, _raw_views(outputs)
