"""How the service hands answers to falcon: small ones whole, large chunk lists in pieces."""

from __future__ import annotations

import falcon
import numpy as np
from sagemaker_tfs.service.app import SEND_PIECE_BYTES, _send
from sagemaker_tfs.service.invoke import Reply


def test_small_chunk_lists_are_sent_whole() -> None:
    resp = falcon.Response()
    _send(resp, Reply(200, [b"head", memoryview(b"-tail")], "application/x-npy"))
    assert resp.data == b"head-tail" and resp.stream is None
    assert resp.content_type == "application/x-npy"


def test_large_answers_stream_in_bounded_pieces_with_their_length() -> None:
    values = np.random.default_rng(0).integers(0, 256, 2 * SEND_PIECE_BYTES + 10, np.uint8)
    chunks = [b"header", memoryview(values), b"trailer"]
    resp = falcon.Response()
    _send(resp, Reply(200, chunks, "application/x-npz"))
    pieces = list(resp.stream)
    assert all(isinstance(piece, bytes) and len(piece) <= SEND_PIECE_BYTES for piece in pieces)
    assert b"".join(pieces) == b"header" + values.tobytes() + b"trailer"
    assert int(resp.content_length) == len(b"".join(pieces))
