"""The JSON answer of a text body (``text_predict.answer``): a small one is written whole (sent
with its Content-Length), a large one while it is sent (chunked), the same bytes either way."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from sagemaker_tfs.service.codecs.content_types import WrittenBody
from sagemaker_tfs.service.routing import text_predict
from sagemaker_tfs.wire.tfs_json import predict_answer_pieces


def request(one_line: str | None) -> Any:
    """The one field ``answer`` reads: the one-line JSON type Accept asks for, if any."""
    return SimpleNamespace(answer=SimpleNamespace(one_line=one_line))


def outputs(count: int) -> dict[str, np.ndarray]:
    values = np.random.default_rng(3).uniform(2.5, 3.5, (count, 1)).astype(np.float32)
    return {"y": values}


def written(outputs: dict[str, np.ndarray]) -> bytes:
    return b"".join(predict_answer_pieces(outputs, False))


def test_a_small_answer_is_written_whole() -> None:
    small = outputs(1000)
    answer = text_predict.answer(small, False, request(None))
    assert isinstance(answer.pieces, list)
    assert (answer.status, answer.content_type) == (200, "application/json")
    assert b"".join(answer.pieces) == written(small)


@pytest.mark.parametrize("one_line", [None, "application/jsonlines"])
def test_a_large_answer_is_written_as_it_is_sent(one_line: str | None) -> None:
    large = outputs(400_000)  # ~4 MB of answer
    expected = written(large)
    assert len(expected) > 2 * text_predict.WHOLE_ANSWER_BYTES
    answer = text_predict.answer(large, False, request(one_line))
    assert isinstance(answer.pieces, WrittenBody)
    first = next(answer.pieces.chunks)
    assert len(first) < len(expected) // 2  # not written whole before the first is sent
    sent = first + b"".join(answer.pieces.chunks)
    assert sent == (expected if one_line is None else expected.replace(b"\n", b""))
    assert answer.content_type == (one_line or "application/json")


def test_an_unwritable_answer_is_still_a_400() -> None:
    answer = text_predict.answer({"y": np.zeros((3, 2), np.complex64)}, False, request(None))
    assert answer.status == 400 and isinstance(answer.pieces, list)
    assert b"not supported in JSON responses" in b"".join(answer.pieces)
