"""The fast path's ``.npy`` answer of a streamed Predict: passed on as it arrives."""

from __future__ import annotations

import io

import numpy as np
import pytest
from sagemaker_tfs.service.codecs import content_types, registry
from sagemaker_tfs.wire import protos, streamed_predict
from sagemaker_tfs.wire.errors import HttpError
from sagemaker_tfs.wire.streamed_predict import StreamedTensors


def received(arrays: dict, size: int) -> tuple[StreamedTensors, list[bytes]]:
    messages = list(streamed_predict.answer_messages(protos.ModelSpec(name="m"), arrays, size))
    return StreamedTensors.receive_answer(messages), messages


def body_bytes(body: object) -> bytes:
    chunks = body.chunks if isinstance(body, content_types.StreamedBody) else body
    return b"".join(bytes(chunk) for chunk in chunks)  # type: ignore[union-attr]


@pytest.mark.parametrize("size", [1, 333, 1 << 20])
@pytest.mark.parametrize(
    "array",
    [
        np.arange(1000, dtype=np.float32).reshape(10, 100),
        np.arange(7, dtype=np.int64),
        np.array(2.5),
    ],
    ids=["2-d float32", "1-d int64", "0-d"],
)
def test_np_load_reads_the_streamed_answer(array: np.ndarray, size: int) -> None:
    answer, _ = received({"y": array}, size)
    body, media_type = registry.encode_answer(answer, content_types.NPY)
    assert media_type == content_types.NPY and isinstance(body, content_types.StreamedBody)
    data = body_bytes(body)
    assert len(data) == body.length  # the Content-Length sent before the data
    got = np.load(io.BytesIO(data), allow_pickle=False)
    assert got.dtype == array.dtype and got.shape == array.shape
    np.testing.assert_array_equal(got, array)


def test_the_answers_pieces_are_passed_on_not_gathered() -> None:
    """The data are views of the messages received: the answer is never whole in memory."""
    answer, messages = received({"y": np.arange(4096, dtype=np.float64)}, 8192)
    body, _ = registry.encode_answer(answer, content_types.NPY)
    chunks = list(body.chunks)  # type: ignore[union-attr]
    views = [chunk for chunk in chunks if isinstance(chunk, memoryview)]
    assert len(views) == 4 and {id(view.obj) for view in views} <= {id(m) for m in messages[1:]}


def test_strings_and_several_outputs_are_encoded_whole() -> None:
    answer, _ = received({"words": np.array([b"a", b"bc"], dtype=object)}, 64)
    body, _ = registry.encode_answer(answer, content_types.NPY)
    assert not isinstance(body, content_types.StreamedBody)
    assert np.load(io.BytesIO(body_bytes(body))).tolist() == [b"a", b"bc"]
    answer, _ = received({"a": np.zeros(2), "b": np.ones(2)}, 64)
    with pytest.raises(HttpError, match="ask for application/x-npz"):
        registry.encode_answer(answer, content_types.NPY)


def test_a_truncated_answer_raises_while_sending() -> None:
    _, messages = received({"y": np.zeros(1000)}, 1000)
    truncated = StreamedTensors.receive_answer(messages[:-1])
    body, _ = registry.encode_answer(truncated, content_types.NPY)
    with pytest.raises(streamed_predict.StreamError, match="ended after 7000 of the 8000 bytes"):
        body_bytes(body)
