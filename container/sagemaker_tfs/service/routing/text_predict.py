"""JSON and CSV bodies with a JSON answer, no ``inference.py``: read into the inputs' arrays
by ``text_codecs`` (the one entry point of the family that reads them), sent over gRPC (the
streamed Predict from 4 MiB), answered with the bytes TF Serving's REST API would have
written (``wire/tfs_json``), a block of rows at a time.

A client cannot tell this path from the REST one (TF Serving's REST request, written by the
same family, posted to the model server's REST API): same status, body and Content-Type,
errors included. It is several times faster and leaner for large bodies: no JSON text of
the request is made, and neither the service nor the model server makes a Python object per
number. Bodies the family does not read into arrays (see ``text_tensors``), other methods
than predict, and models whose signatures cannot be asked for come back from it as that REST
request: the caller posts it.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

import grpc
import numpy as np

from sagemaker_tfs import client
from sagemaker_tfs.service.codecs import text_codecs
from sagemaker_tfs.service.codecs.content_types import JSON, StreamedBody, WrittenBody
from sagemaker_tfs.service.codecs.text_codecs import ForPredict, Refusal, RestRequest
from sagemaker_tfs.service.errors import ModelServerUnavailable
from sagemaker_tfs.service.metrics import InvocationRecord
from sagemaker_tfs.service.request import ParsedRequest
from sagemaker_tfs.service.routing import fast_path
from sagemaker_tfs.wire.errors import HttpError
from sagemaker_tfs.wire.signatures import Signature
from sagemaker_tfs.wire.streamed_predict import StreamError
from sagemaker_tfs.wire.tfs_json import (
    TensorJsonError,
    predict_answer_pieces,
    quote,
    render_document,
)

logger = logging.getLogger(__name__)

# A JSON answer up to this size is written whole and sent with its Content-Length; a larger
# one is written while it is sent (chunked), so that its text, 1-1.5x the body for floats
# of three decimals, is never whole in the service's memory (issue 53's memory goal).
WHOLE_ANSWER_BYTES = 1 << 20


class JsonAnswer(NamedTuple):
    """The model server's REST answer as the service passes it on: status, body pieces,
    Content-Type."""

    status: int
    pieces: list[bytes] | WrittenBody | StreamedBody
    content_type: str


def as_passed_on(status: int, pieces: Sequence[bytes] | WrittenBody | StreamedBody,
                 request: ParsedRequest) -> JsonAnswer:  # fmt: skip
    """A REST answer (``pieces``: its body) as the service passes it to the client: on one
    line, with the first listed JSON type, when Accept lists one (the reference's rule; an
    answer passed on as it arrives then loses its length)."""
    one_line_type = request.answer.one_line
    if isinstance(pieces, (WrittenBody, StreamedBody)):
        if one_line_type is None:
            return JsonAnswer(status, pieces, JSON)
        chunks = (bytes(chunk) for chunk in pieces.chunks)
        return JsonAnswer(status, WrittenBody(_on_one_line(chunks)), one_line_type)
    if one_line_type is None:
        return JsonAnswer(status, list(pieces), JSON)
    return JsonAnswer(status, list(_on_one_line(iter(pieces))), one_line_type)


def _on_one_line(pieces: Iterator[bytes]) -> Iterator[bytes]:
    for piece in pieces:
        yield piece.replace(b"\n", b"")


def tfs_error_body(message: str) -> bytes:
    """``{"error": ...}`` as TF Serving's REST API writes it (bytes that are not UTF-8
    become U+FFFD, as the model server's ``format_error`` makes them)."""
    text = message.encode("utf-8", errors="surrogatepass").decode("utf-8", errors="replace")
    return render_document("error", quote(text))


class TextInputs(NamedTuple):
    """A body read into the inputs' arrays, once (a failover sends them again as they are)."""

    arrays: dict[str, np.ndarray]
    columnar: bool
    stream: bool
    signature_name: str


def signature_for(request: ParsedRequest, context: Any) -> dict[str, Signature] | None:
    """The model's signatures, by name, when the request may go over gRPC (predict); None:
    the REST path takes it. An unreachable model server raises ``ModelServerUnavailable``."""
    if request.target.method != "predict":
        return None
    try:
        return client.get_signatures(context)
    except grpc.RpcError as error:
        if isinstance(failure := fast_path.rpc_failure(error), ModelServerUnavailable):
            raise failure from None
        return None  # e.g. no such model or version: the REST path words it as TF Serving
    except ValueError:  # a model version that is not an int64: the REST path's error too
        return None


def read_inputs(request: ParsedRequest, body: bytes, signatures: dict[str, Signature] | None
                ) -> TextInputs | JsonAnswer | RestRequest:  # fmt: skip
    """The body read once by the family's entry point: the inputs' arrays, the REST path's
    refusal of it (a 400 with TF Serving's words), or TF Serving's REST request for what is
    not read into arrays (``signatures`` None: they could not be asked for)."""
    reading = ForPredict(signatures, request.target.method)
    read = text_codecs.read_body(request.content_type.name, body, reading)
    if isinstance(read, RestRequest):
        return read
    if isinstance(read, Refusal):
        return JsonAnswer(400, [tfs_error_body(read.message)], "")
    expected = fast_path.expected_answer_bytes(read.signature, read.arrays, [])
    size = sum(array.nbytes for array in read.arrays.values())
    stream = max(size, expected) >= fast_path.STREAM_BYTES
    return TextInputs(read.arrays, read.columnar, stream, read.signature.name)


def answer(outputs: dict[str, np.ndarray] | JsonAnswer, columnar: bool,
           request: ParsedRequest) -> JsonAnswer:  # fmt: skip
    """The answer TF Serving's REST API would give, as the service passes it on."""
    if isinstance(outputs, JsonAnswer):
        return as_passed_on(outputs.status, outputs.pieces, request)
    pieces = predict_answer_pieces(outputs, columnar)
    try:
        first = _first_pieces(pieces)
    except TensorJsonError as error:
        return as_passed_on(400, [tfs_error_body(str(error))], request)
    if sum(len(piece) for piece in first) <= WHOLE_ANSWER_BYTES:
        return as_passed_on(200, first, request)
    return as_passed_on(200, WrittenBody(itertools.chain(first, pieces)), request)


def _first_pieces(pieces: Iterator[bytes]) -> list[bytes]:
    """The answer's pieces until they are more than ``WHOLE_ANSWER_BYTES`` or all written
    (``predict_answer_pieces`` raises its errors before the first piece: a 400 is still
    possible here, not once the answer is being sent)."""
    first, size = [], 0
    for piece in pieces:
        first.append(piece)
        size += len(piece)
        if size > WHOLE_ANSWER_BYTES:
            break
    return first


def predict(context: Any, inputs: TextInputs, record: InvocationRecord,
            timeout: float) -> dict[str, np.ndarray] | JsonAnswer:  # fmt: skip
    """The outputs, or the model server's error as its REST API would answer it; an
    unreachable model server raises ``ModelServerUnavailable`` (failover)."""
    try:
        with record.model_server_call():
            answer = client.predict_answer(
                context,
                inputs.arrays,
                signature_name=inputs.signature_name,
                stream_answer=inputs.stream,
                unavailable_retry_seconds=0,  # the service fails over to another model server
                timeout=timeout,
            )
            return answer.complete()
    except grpc.RpcError as error:
        client.forget_signatures(context)  # the model may have been reloaded
        failure = fast_path.rpc_failure(error)
        if isinstance(failure, ModelServerUnavailable):
            raise failure from None
        details = error.details() if hasattr(error, "details") else None
        return JsonAnswer(failure.status, [tfs_error_body(details or failure.message)], "")
    except StreamError as error:
        logger.warning("model server answer unreadable: %s", error)
        raise HttpError(502, f"The model server's answer is unreadable: {error}") from None
