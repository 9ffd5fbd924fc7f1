"""Built-in handling of binary content types (no ``inference.py``): decode -> gRPC -> encode.

The request body is decoded by :mod:`sagemaker_tfs.service.codecs.registry` into the inputs the
model's signature wants (metadata fetched once per model/version and cached), once (``prepare``:
a failover sends the same inputs to the next model server), sent with one gRPC
``Predict`` over ``context.channel`` as raw tensors, and the outputs are encoded as the Accept
header asks. Requests or answers of ``STREAM_BYTES`` or more go over the project's streamed
Predict instead, and there images for a float input travel as ``uint8`` pixels that the
model server widens (``wire.pixels``). gRPC errors become the HTTP statuses TF Serving's
REST API would give.

``tfs-output-filter=NAME;NAME`` in ``X-Amzn-SageMaker-Custom-Attributes`` asks for some of the
signature's outputs only (Predict's ``output_filter``): the model server then neither computes
nor sends the others, which matters when outputs are megabytes.
"""

from __future__ import annotations

import logging
from typing import Any, NamedTuple

import grpc
import numpy as np

from sagemaker_tfs import client
from sagemaker_tfs.service.codecs import content_types, registry
from sagemaker_tfs.service.codecs.content_types import Chunk, DecodedInputs, StreamedBody
from sagemaker_tfs.service.codecs.image_inputs import ImageOptions
from sagemaker_tfs.service.codecs.registry import CODECS
from sagemaker_tfs.service.errors import ModelServerUnavailable, Overloaded
from sagemaker_tfs.service.metrics import InvocationRecord
from sagemaker_tfs.service.request import ParsedRequest
from sagemaker_tfs.wire import tensors
from sagemaker_tfs.wire.errors import HttpError, http_status_of_grpc_code, is_batch_queue_full
from sagemaker_tfs.wire.metrics import SHED_QUEUE_FULL
from sagemaker_tfs.wire.signatures import Signature
from sagemaker_tfs.wire.streamed_predict import StreamError
from sagemaker_tfs.wire.tensors import TensorConversionError

logger = logging.getLogger(__name__)

# Requests or answers (expected) this large are streamed to and from the model server
# (client.predict's stream_answer).
STREAM_BYTES = 4 << 20


class PreparedCall(NamedTuple):
    """A request made ready for Predict, once, whichever model server then takes it: its
    decoded inputs, the outputs asked for, whether to stream, the answer's type."""

    decoded: DecodedInputs
    output_filter: list[str]
    stream: bool
    output_type: str


def check(request: ParsedRequest) -> None:
    """The checks made before any work: predict only, an answer type that Accept allows
    (``ParsedRequest.answer``), a content type read here."""
    kind = request.content_type.name
    if request.target.method != "predict":
        raise HttpError(
            400,
            f"tfs-method={request.target.method} is not supported for {kind}; "
            "use application/json",
        )
    if request.answer.fast_path is None:
        raise CODECS.not_acceptable(request.accept)
    if not CODECS.reads(kind):
        raise HttpError(415, f"Unsupported Media Type: {kind}")


def prepare(
    request: ParsedRequest, body: bytes, signature: Signature, options: ImageOptions
) -> PreparedCall:
    """The body decoded against the signature, once (a failover reuses it)."""
    decoded = registry.decode_request(body, request.content_type.name, signature.inputs, options)
    names = list(request.custom_attributes.output_filter)
    expected = expected_answer_bytes(signature, decoded.arrays, names)
    stream = max(decoded.widened_bytes(), expected) >= STREAM_BYTES
    return PreparedCall(decoded, names, stream, request.answer.fast_path or content_types.JSON)


def expected_answer_bytes(signature: Signature, inputs: dict[str, Any], names: list[str]) -> int:
    """The size of the outputs from the signature's shapes, the batch size taken from the
    inputs (0 when a shape or dtype is not fixed: such answers are not streamed)."""
    batch = max((len(array) for array in inputs.values() if np.ndim(array) > 0), default=1)
    total = 0
    for name, spec in signature.outputs.items():
        if names and name not in names:
            continue
        if spec.shape is None or spec.is_string or any(dim < 0 for dim in spec.shape[1:]):
            return 0
        try:
            itemsize = tensors.numpy_dtype(spec.dtype).itemsize
        except TensorConversionError:
            return 0
        total += batch * int(np.prod(spec.shape[1:], dtype=np.int64)) * itemsize
    return total


def signature_of(context: Any) -> Signature:
    try:
        return client.get_signature(context)
    except grpc.RpcError as error:
        raise rpc_failure(error) from None
    except KeyError as error:
        raise HttpError(400, error.args[0]) from None
    except ValueError as error:  # a model version that is not an int64
        raise HttpError(400, str(error)) from None


def predict(
    context: Any, call: PreparedCall, record: InvocationRecord, timeout: float
) -> tuple[list[Chunk] | StreamedBody, str]:
    """Predict over ``context``'s model server, with the ``timeout`` deadline (seconds): the
    answer's body chunks (an ``.npz`` while it arrives) and its content type."""
    try:
        with record.model_server_call():
            answer = client.predict_answer(
                context,
                call.decoded.arrays,
                output_filter=call.output_filter,
                stream_answer=call.stream,
                pixel_casts=call.decoded.casts,
                unavailable_retry_seconds=0,  # the service fails over to another model server
                timeout=timeout,
            )
        return registry.encode_answer(answer, call.output_type)
    except grpc.RpcError as error:
        # The model may have been reloaded with another signature: look it up again next time.
        client.forget_signatures(context)
        raise rpc_failure(error) from None
    except TensorConversionError as error:
        raise HttpError(400, str(error)) from None
    except StreamError as error:
        logger.warning("model server answer unreadable: %s", error)
        raise HttpError(502, f"The model server's answer is unreadable: {error}") from None


def rpc_failure(error: grpc.RpcError) -> HttpError:
    code = error.code() if hasattr(error, "code") else None
    details = error.details() if hasattr(error, "details") else str(error)
    status = http_status_of_grpc_code(code.name if code is not None else None)
    if status == 503 and is_batch_queue_full(details or ""):
        return Overloaded(SHED_QUEUE_FULL, f"The endpoint is overloaded: {details}; retry later")
    if status == 503:  # the model server is down or restarting: another may answer
        return ModelServerUnavailable(details or str(code))
    if status >= 500:
        logger.warning("model server call failed: %s %s", code, details)
    return HttpError(status, details or str(code))
