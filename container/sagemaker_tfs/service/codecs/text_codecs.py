"""The one entry point of the service's JSON / JSON lines / CSV reading (issue 53): every
route that gets such a body without ``inference.py`` calls :func:`read_body`, and no other
module of the service parses or converts one (``test/unit/test_import_boundaries.py``).

The family behind it: ``text_tensors`` (with ``text_json``, ``text_csv``, ``text_mixed``,
``text_refusals``, ``text_ragged``) reads a body into the inputs' arrays, or refuses it with
the REST path's 400; ``text_rest`` writes TF Serving's REST request for what cannot be arrays
yet (strings and ``{"b64": ...}``, classify and regress, models whose signatures cannot be
asked for), with the njs's rules (held to them by the parity tests), and reads the same
values for a binary Accept; ``text_verbatim`` (with ``text_scan``) gives the same request
for a large JSON body without a Python object per value: the body itself, or wrapped. Each
media type has one reader into arrays (``ARRAY_READERS``) and one way to its REST request
(``rest_request``); ``registry.TextCodec`` is the type's codec, which calls ``read_body``.

What a caller gets is the body read once into one of:

- ``TextRequest``: the inputs' arrays and the signature, exactly what the REST path would
  feed the model (predict, over gRPC);
- ``Refusal``: the REST path's 400 for the body, in its words;
- ``RestRequest``: TF Serving's REST request, for the model server's REST API, written a
  piece at a time as it is sent (a large one is never whole beside the body);
- for a binary Accept (``ForInputs``), the named arrays: the same reader's, else the REST
  request's values, refused as the REST API refuses them (``text_rest.named_values``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import NamedTuple, overload

import numpy as np

from sagemaker_tfs.service.codecs.content_types import CSV, JSON, JSON_LINES_TYPES
from sagemaker_tfs.service.codecs.text import text_rest, text_tensors, text_verbatim
from sagemaker_tfs.service.codecs.text.text_refusals import Refusal
from sagemaker_tfs.service.codecs.text.text_rest import RestRequest
from sagemaker_tfs.service.codecs.text.text_scan import Unsure
from sagemaker_tfs.service.codecs.text.text_tensors import TextRequest
from sagemaker_tfs.wire.errors import HttpError
from sagemaker_tfs.wire.signatures import Signature, TensorSpec

__all__ = [
    "ARRAY_READERS",
    "ForInputs",
    "ForPredict",
    "Refusal",
    "RestRequest",
    "TextRequest",
    "read_body",
    "rest_request",
    "text_too_large",
]

CSV_PIECE_BYTES = 1 << 18  # a large CSV body is converted this much at a time
ArrayReader = Callable[[bytes, Mapping[str, Signature]], TextRequest | Refusal | None]


class ForPredict(NamedTuple):
    """A body to send to the model: ``signatures``, the model's by name (None when they could
    not be asked for); ``method``, TF Serving's (only predict is read into arrays)."""

    signatures: Mapping[str, Signature] | None
    method: str = "predict"


class ForInputs(NamedTuple):
    """A body sent with a binary Accept: read into arrays for ``inputs`` by the njs's rules."""

    inputs: Mapping[str, TensorSpec]


def rest_request(kind: str, body: bytes) -> RestRequest:
    """TF Serving's REST request for a body of media type ``kind``: a large JSON body as it
    is or wrapped (``text_verbatim``), a large CSV body converted a piece at a time as it is
    sent, else written whole by ``text_rest``."""
    if kind == JSON or kind in JSON_LINES_TYPES:
        try:
            return text_verbatim.rest_request(body, lines=kind != JSON)
        except Unsure:
            pass
    elif kind == CSV and len(body) >= text_verbatim.MIN_BYTES:
        return text_rest.convert_csv_pieces(body, CSV_PIECE_BYTES)
    return RestRequest.of(text_rest.convert(kind, body).encode("utf-8"))


# Each media type's reader into the inputs' arrays (None: a body it does not read so).
ARRAY_READERS: dict[str, ArrayReader] = {
    JSON: text_tensors.read_json_request,
    CSV: text_tensors.read_csv_request,
    **dict.fromkeys(JSON_LINES_TYPES, partial(text_tensors.read_json_request, lines=True)),
}


def text_too_large(limit_mb: int) -> HttpError:
    """The 413 for a JSON or CSV body over the text limit (the njs's ``textTooLarge``)."""
    return HttpError(
        413,
        f"JSON, JSON lines and CSV bodies are converted up to {limit_mb} MB "
        "(SAGEMAKER_TFS_MAX_TEXT_BODY_MB): send larger inputs as application/x-npy or "
        "application/x-npz, or raise SAGEMAKER_TFS_MAX_TEXT_BODY_MB",
    )


def _named_arrays(
    kind: str, body: bytes, inputs: Mapping[str, TensorSpec]
) -> list[tuple[str, np.ndarray]]:
    """A body sent with a binary Accept, read by the same reader (and refused in the same
    words) as with a JSON answer, so that the Accept header never changes how a body is read
    (issue 53); what that reader leaves to the REST API, by its rules (``text_rest``)."""
    signature = Signature(text_tensors.DEFAULT_SIGNATURE, "", dict(inputs), {})
    read = ARRAY_READERS[kind](body, {signature.name: signature})
    if isinstance(read, Refusal):
        raise HttpError(400, read.message)
    if read is not None:
        return list(read.arrays.items())
    return text_rest.named_values(kind, body, inputs)


@overload
def read_body(
    kind: str, body: bytes, reading: ForPredict
) -> TextRequest | Refusal | RestRequest: ...


@overload
def read_body(kind: str, body: bytes, reading: ForInputs) -> list[tuple[str, np.ndarray]]: ...


def read_body(
    kind: str, body: bytes, reading: ForPredict | ForInputs
) -> TextRequest | Refusal | RestRequest | list[tuple[str, np.ndarray]]:
    """The body of media type ``kind`` read once, as ``reading`` asks (see the module); a
    type with no codec is a 415, a body that cannot be read at all the REST path's 400."""
    if kind not in ARRAY_READERS:
        raise HttpError(415, f"Unsupported Media Type: {kind}")
    if isinstance(reading, ForInputs):
        return _named_arrays(kind, body, reading.inputs)
    if reading.signatures is not None and reading.method == "predict":
        read = ARRAY_READERS[kind](body, reading.signatures)
        if read is not None:
            return read
    return rest_request(kind, body)
