"""string_outputs.JoinedStrings: a string tensor held as joined bytes and lengths gives, sliced
by rows, the object arrays of bytes TensorFlow would have given."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from sagemaker_tfs.model_server.serving.string_outputs import (
    JoinedStrings,
    joined_fetches,
    joined_result,
)

VALUES = [b"a", b"", b"ends in NUL\x00", "日本".encode(), b"\xff\xfe", b"x" * 1000]


def joined(array: np.ndarray) -> JoinedStrings | np.ndarray:
    flat = array.reshape(-1).tolist()
    lengths = np.array([len(value) for value in flat], dtype=np.int32)
    return joined_result(b"".join(flat), lengths, np.array(array.shape, dtype=np.int64))


@pytest.mark.parametrize("shape", [(6,), (3, 2), (2, 3, 1), (1, 6)])
def test_rows_sliced_are_the_arrays_of_bytes(shape: tuple[int, ...]) -> None:
    array = np.array(VALUES, dtype=object).reshape(shape)
    tensor = joined(array)
    assert isinstance(tensor, JoinedStrings)
    assert (tensor.shape, tensor.ndim, tensor.dtype) == (array.shape, array.ndim, array.dtype)
    for first, stop in [(0, shape[0]), (0, 0), (1, shape[0]), (0, 1), (shape[0], shape[0] + 5)]:
        piece = tensor[first:stop]
        assert piece.shape == array[first:stop].shape
        assert piece.tolist() == array[first:stop].tolist()
    assert tensor.materialized().tolist() == array.tolist()


def test_scalar_and_empty_tensors_are_arrays() -> None:
    scalar = joined(np.array(b"one", dtype=object))
    assert isinstance(scalar, np.ndarray) and scalar.shape == () and scalar.item() == b"one"
    empty = joined(np.empty((0, 3), dtype=object))
    assert isinstance(empty, np.ndarray) and empty.shape == (0, 3)


def test_outputs_the_graph_lacks_are_left_out() -> None:
    graph = tf.Graph()
    with graph.as_default():
        text = tf.compat.v1.placeholder(tf.string, shape=None, name="text")
    fetches = joined_fetches(graph, ["text:0", "missing:0", "text:7"])
    assert list(fetches) == ["text:0"]
    with tf.compat.v1.Session(graph=graph) as session:
        joined, lengths, shape = session.run(
            list(fetches["text:0"]), {text: [[b"ab", b""], [b"c\x00", b"d"]]}
        )
    assert (joined, lengths.tolist(), shape.tolist()) == (b"abc\x00d", [2, 0, 2, 1], [2, 2])
