"""Requests of the fast path: request bodies -> named NumPy inputs, checked against the
signature, by the codec ``registry.CODECS`` holds for the body's media type (``.npy``, ``.npz``,
images and image streams, and JSON, JSON lines and CSV read by the njs's rules). Every problem
with the request raises :class:`HttpError` with an HTTP status and a message that says what is
wrong.
"""

from __future__ import annotations

from collections.abc import Mapping

from sagemaker_tfs.service.codecs.content_types import DecodedInputs, ImageOptions
from sagemaker_tfs.service.codecs.numpy_codecs import check_npy_header, decode_npy
from sagemaker_tfs.service.codecs.registry import CODECS
from sagemaker_tfs.wire.errors import HttpError
from sagemaker_tfs.wire.signatures import TensorSpec

__all__ = ["DecodedInputs", "check_npy_header", "decode_npy", "decode_request"]


def decode_request(
    body: bytes, kind: str, inputs: Mapping[str, TensorSpec], options: ImageOptions
) -> DecodedInputs:
    """Decode a request body of media type ``kind`` into inputs keyed by alias, image pixels
    not yet widened: a 415 for a type no codec reads, a 400 for an empty body."""
    codec = CODECS.reader(kind)
    if not body:
        raise HttpError(400, f"Empty request body for {kind}")
    return codec.read(body, inputs, options)
