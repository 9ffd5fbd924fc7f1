"""String outputs fetched as one buffer plus lengths, not as an array of bytes objects.

TensorFlow's session gives a string tensor as a NumPy object array: a bytes object per
element (~50 bytes each for short strings, ~5x a JSON body of them). For the REST answer,
which is written a block of elements at a time, each string output of a signature also gets,
at load, ``reduce_join`` of its elements, their byte lengths and its shape
(``joined_fetches``); a run fetches those, and the answer's writer takes a ``JoinedStrings``,
which gives each block its bytes objects when the block is sliced off.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import NamedTuple

import numpy as np
import tensorflow as tf
from tensorflow.core.framework import types_pb2

SCOPE = "sagemaker_tfs_joined_strings"


class JoinedNames(NamedTuple):
    """The tensors fetched for one string output: all its bytes, each element's length, its
    shape."""

    joined: str
    lengths: str
    shape: str


def joined_fetches(graph: tf.Graph, string_outputs: Iterable[str]) -> dict[str, JoinedNames]:
    """Ops added to ``graph`` (before it is finalized) for each string output tensor name; a
    name the graph lacks, or a tensor these ops cannot take (one inside a loop, say), is left
    out: it is fetched as it is, and a bad signature fails at predict as it did."""
    fetches: dict[str, JoinedNames] = {}
    with graph.as_default(), tf.name_scope(SCOPE):
        for name in sorted(set(string_outputs)):
            try:
                fetches[name] = _joined_ops(graph.get_tensor_by_name(name))
            except (KeyError, ValueError, TypeError):
                continue
    return fetches


def _joined_ops(tensor: tf.Tensor) -> JoinedNames:
    flat = tf.reshape(tensor, [-1])
    return JoinedNames(
        tf.strings.reduce_join(flat).name,
        tf.strings.length(flat).name,
        tf.shape(tensor, out_type=tf.int64).name,
    )


def string_output_names(outputs: Iterable[tuple[str, int]]) -> list[str]:
    """The tensor names of (name, dtype) outputs that are strings."""
    return [name for name, dtype in outputs if dtype == types_pb2.DT_STRING]


class JoinedStrings:
    """A string tensor as its joined bytes and element lengths: sliced along its first
    dimension (as the answer's writer slices blocks), it gives an object array of bytes."""

    dtype = np.dtype(object)

    def __init__(self, joined: bytes, lengths: np.ndarray, shape: tuple[int, ...]) -> None:
        self._joined = joined
        offset_type = np.int32 if len(joined) < 2**31 else np.int64  # 4 bytes a string
        self._ends = np.cumsum(lengths, dtype=offset_type)
        self.shape = shape
        self.ndim = len(shape)
        self.size = math.prod(shape)

    def __getitem__(self, rows: slice) -> np.ndarray:
        first, stop, step = rows.indices(self.shape[0])
        if step != 1:
            raise IndexError("only contiguous rows")
        row_size = math.prod(self.shape[1:])
        stop = max(first, stop)
        return self._elements(first * row_size, stop * row_size).reshape(
            (stop - first, *self.shape[1:])
        )

    def materialized(self) -> np.ndarray:
        """The whole tensor as TensorFlow gives it: an object array of bytes."""
        return self._elements(0, self.size).reshape(self.shape)

    def _elements(self, first: int, stop: int) -> np.ndarray:
        values = np.empty(stop - first, dtype=object)
        if stop == first:
            return values
        ends = self._ends[first:stop].tolist()
        starts = [int(self._ends[first - 1]) if first else 0, *ends[:-1]]
        joined = self._joined
        values[:] = [joined[start:end] for start, end in zip(starts, ends, strict=True)]
        return values


def joined_result(
    joined: object, lengths: np.ndarray, shape: np.ndarray
) -> np.ndarray | JoinedStrings:
    """A run's three fetches as a ``JoinedStrings`` (an array for a 0-d or empty output)."""
    buffer = joined if isinstance(joined, bytes) else np.asarray(joined).item()
    result = JoinedStrings(buffer, lengths, tuple(int(size) for size in shape))
    if result.ndim == 0 or result.shape[0] == 0:
        return result.materialized()
    return result
