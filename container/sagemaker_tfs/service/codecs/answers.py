"""Answers of the fast path: named NumPy outputs -> response bodies, written by the codec
``registry.CODECS`` holds for the answer's media type (which one an Accept list chooses is
``registry.answer_type``'s): ``application/json`` (TF Serving's ``{"predictions": ...}``),
``application/jsonlines`` (the same on one line), ``application/x-npy`` (one output),
``application/x-npz`` (every output, passed on while it arrives from the model server) and
``text/csv`` (one output).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from sagemaker_tfs.service.codecs.content_types import Chunk, StreamedBody, WrittenBody
from sagemaker_tfs.service.codecs.registry import CODECS
from sagemaker_tfs.wire.streamed_predict import StreamedTensors

__all__ = ["Chunk", "StreamedBody", "WrittenBody", "encode_answer", "encode_outputs"]


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
