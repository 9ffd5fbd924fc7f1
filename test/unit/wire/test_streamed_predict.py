"""The streamed Predict: a header, then raw tensor bytes in pieces of any size, both ways."""

from __future__ import annotations

import numpy as np
import pytest
from sagemaker_tfs.wire import protos, streamed_predict
from sagemaker_tfs.wire.streamed_predict import StreamedTensors, StreamError

SPEC = protos.ModelSpec(name="m", signature_name="serving_default")


def outputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {
        "scores": rng.random((3, 5), dtype=np.float32),
        "boxes": rng.random((2, 7, 4)),  # float64
        "labels": np.arange(6, dtype=np.int64).reshape(2, 3),
        "flags": np.array([True, False, True]),
        "half": np.arange(4, dtype=np.float16),
        "scalar": np.array(7, dtype=np.int32),  # 0-d
        "empty": np.zeros((0, 3), np.float32),
        "words": np.array([b"a", b"bc"], dtype=object),
    }


def assert_same(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> None:
    assert sorted(got) == sorted(want)
    for name, array in want.items():
        assert got[name].shape == array.shape, name
        if array.dtype == object:
            assert got[name].tolist() == array.tolist()
        else:
            assert got[name].dtype == array.dtype, name
            np.testing.assert_array_equal(got[name], array)


@pytest.mark.parametrize("size", [1, 3, 64, 1000, streamed_predict.STREAM_PIECE_BYTES])
def test_round_trip_in_pieces_of_any_size(size: int) -> None:
    want = outputs()
    messages = list(streamed_predict.answer_messages(SPEC, want, size=size))
    raw_bytes = sum(array.nbytes for array in want.values() if array.dtype != object)
    assert sum(map(len, messages[1:])) == raw_bytes
    assert all(len(message) == size for message in messages[1:-1])
    assert_same(StreamedTensors.receive_answer(messages).complete(), want)


def test_pieces_yield_each_output_front_to_back_as_it_fills() -> None:
    want = {"a": np.arange(10, dtype=np.uint8), "b": np.arange(5, dtype=np.uint8) + 100}
    answer = StreamedTensors.receive_answer(streamed_predict.answer_messages(SPEC, want, size=4))
    seen: dict[str, bytes] = {"a": b"", "b": b""}
    for name, data in answer.pieces():
        seen[name] += bytes(data)
    assert seen == {"a": want["a"].tobytes(), "b": want["b"].tobytes()}
    assert_same(answer.arrays, want)


def test_answer_that_arrived_whole_yields_each_numeric_output_once() -> None:
    want = outputs()
    answer = StreamedTensors.of(want)
    pieces = list(answer.pieces())
    names = [name for name, _ in pieces]
    assert names == sorted(n for n, a in want.items() if a.dtype != object and a.size)
    assert all(bytes(data) == want[name].tobytes() for name, data in pieces)
    assert_same(answer.complete(), want)


def test_truncated_answer_is_a_clear_error() -> None:
    messages = list(streamed_predict.answer_messages(SPEC, {"y": np.zeros(100)}, size=64))
    with pytest.raises(StreamError, match="ended after 768 of the 800 bytes"):
        StreamedTensors.receive_answer(messages[:-1]).complete()
    with pytest.raises(StreamError, match="ended before its header"):
        StreamedTensors.receive_answer([])


def test_answer_longer_than_its_header_is_an_error() -> None:
    messages = list(streamed_predict.answer_messages(SPEC, {"y": np.zeros(2)}))
    with pytest.raises(StreamError, match="more than the 16 bytes"):
        StreamedTensors.receive_answer([*messages, b"x"]).complete()


def test_unreadable_header_is_an_error() -> None:
    with pytest.raises(StreamError, match="header is not a PredictResponse"):
        StreamedTensors.receive_answer([b"\xff\xff\xff"])
    negative = protos.PredictResponse()
    negative.outputs["y"].dtype = 1
    negative.outputs["y"].tensor_shape.dim.add(size=-1)
    with pytest.raises(StreamError, match="has shape"):
        StreamedTensors.receive_answer([negative.SerializeToString()])


def test_request_round_trip_keeps_spec_and_output_filter() -> None:
    want = outputs()
    messages = list(streamed_predict.request_messages(SPEC, want, ["scores", "boxes"], size=100))
    header, inputs = StreamedTensors.receive_request(messages)
    assert header.model_spec.name == "m" and list(header.output_filter) == ["scores", "boxes"]
    assert_same(inputs.complete(), want)
    with pytest.raises(StreamError, match="header is not a PredictRequest"):
        StreamedTensors.receive_request([b"\xff"])


def test_request_announcing_too_much_is_refused_before_allocating() -> None:
    header = protos.PredictRequest()
    header.inputs["x"].dtype = 1  # DT_FLOAT
    header.inputs["x"].tensor_shape.dim.add(size=1 << 40)  # 4 TiB
    with pytest.raises(StreamError, match="announces 4398046511104 bytes of tensors, more than"):
        StreamedTensors.receive_request([header.SerializeToString()], max_bytes=512 << 20)
    fits = list(streamed_predict.request_messages(SPEC, {"x": np.zeros(4, np.float32)}))
    _, inputs = StreamedTensors.receive_request(fits, max_bytes=16)
    np.testing.assert_array_equal(inputs.complete()["x"], np.zeros(4, np.float32))
