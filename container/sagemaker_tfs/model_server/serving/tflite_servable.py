"""A version served from its ``model.tflite`` (``--prefer_tflite_model``), as TF Serving does.

Its signatures are those TF Serving's TFLite session serves (``tflite_signatures``): the
SignatureDefs stored in the model's metadata, else a generated ``serving_default`` keyed by
the interpreter's tensor names. Predict feeds and fetches the interpreter's tensors by the
names the signature gives; each input is resized to the shape sent.

Interpreters run one call at a time. As in TF Serving, a version has ``--num_tflite_pools``
pools, one per call in flight (more calls wait for a free pool), and each pool has
``--num_tflite_interpreters_per_pool`` interpreters: with more than one, a call whose inputs
have more rows than ``ROWS_PER_INTERPRETER`` allows is cut into parts of at most that many
rows, run on the pool's interpreters side by side, and the parts' outputs joined again.
Interpreters are made as calls first need them.

Classify and Regress parse tf.Examples with an op the Python interpreter does not have:
they answer UNIMPLEMENTED. Batching (``--enable_batching``) applies as for a SavedModel.
"""

from __future__ import annotations

import concurrent.futures
import math
import queue
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf

from sagemaker_tfs.model_server.errors import Code, ServingError, invalid_argument
from sagemaker_tfs.model_server.monitoring import METRICS
from sagemaker_tfs.model_server.serving.predict_checks import check_inputs, output_aliases
from sagemaker_tfs.model_server.serving.servable import BatchedRuns, check_caller_waits
from sagemaker_tfs.model_server.serving.signatures import SignatureTable
from sagemaker_tfs.model_server.serving.string_outputs import JoinedStrings
from sagemaker_tfs.model_server.serving.tflite_signatures import serving_signatures, tensor_map

TFLITE_FILE = "model.tflite"
# TF Serving's first batch size for a pool (``kInitialBatchSize``), shared by its interpreters.
INITIAL_BATCH_SIZE = 500


def tflite_path(version_dir: str) -> Path | None:
    """The version's ``model.tflite``, if it has one."""
    path = Path(version_dir) / TFLITE_FILE
    return path if path.is_file() else None


def rows_per_interpreter(interpreters_per_pool: int) -> int:
    """The most rows one interpreter of a pool runs in a call (TF Serving's split size)."""
    return max(1, math.ceil(INITIAL_BATCH_SIZE / max(1, interpreters_per_pool)))


class _Interpreter:
    """One ``tf.lite.Interpreter`` and the shapes its inputs are allocated for."""

    def __init__(self, model: bytes) -> None:
        with warnings.catch_warnings():  # TF 2.2x points at LiteRT, which TF Serving does not use
            warnings.filterwarnings("ignore", "(?s).*tf.lite.Interpreter is deprecated")
            self.interpreter = tf.lite.Interpreter(model_content=model)
        self.interpreter.allocate_tensors()
        self._shapes = {
            int(detail["index"]): tuple(int(size) for size in detail["shape"])
            for detail in self.interpreter.get_input_details()
        }

    def run(self, feeds: dict[int, np.ndarray], fetches: Sequence[int]) -> list[np.ndarray]:
        """Resize the inputs to the shapes fed (reallocating only when one changed), invoke,
        and copy the outputs out."""
        try:
            changed = [
                index for index, value in feeds.items() if self._shapes[index] != value.shape
            ]
            for index in changed:
                self.interpreter.resize_tensor_input(index, feeds[index].shape, strict=False)
                self._shapes[index] = feeds[index].shape
            if changed:
                self.interpreter.allocate_tensors()
            for index, value in feeds.items():
                self.interpreter.set_tensor(index, value)
            self.interpreter.invoke()
            return [_answer_array(self.interpreter.get_tensor(index)) for index in fetches]
        except (ValueError, RuntimeError) as error:
            self._shapes = {index: () for index in self._shapes}  # reallocate on the next call
            raise invalid_argument(str(error)) from None


def _answer_array(array: np.ndarray) -> np.ndarray:
    """String outputs as the object arrays of bytes the front ends write."""
    return array.astype(object) if array.dtype.kind == "S" else array


class _Pool:
    """One of a version's pools: up to ``size`` interpreters, made as a call first needs them."""

    def __init__(self, model: bytes, size: int, first: _Interpreter | None = None) -> None:
        self._model = model
        self._size = max(1, size)
        self._interpreters = [first] if first is not None else []

    def _interpreter(self, position: int) -> _Interpreter:
        while len(self._interpreters) <= position:
            self._interpreters.append(_Interpreter(self._model))
        return self._interpreters[position]

    def run(
        self,
        feeds: dict[int, np.ndarray],
        fetches: Sequence[int],
        lanes: concurrent.futures.Executor | None,
    ) -> list[np.ndarray]:
        rows = _common_rows(feeds.values())
        limit = rows_per_interpreter(self._size)
        if lanes is None or self._size == 1 or rows is None or rows <= limit:
            return self._interpreter(0).run(feeds, fetches)
        starts = list(range(0, rows, limit))
        parts: list[list[np.ndarray] | None] = [None] * len(starts)

        def lane(position: int) -> None:
            interpreter = self._interpreter(position)
            for part in range(position, len(starts), self._size):
                begin = starts[part]
                piece = {index: value[begin : begin + limit] for index, value in feeds.items()}
                parts[part] = interpreter.run(piece, fetches)

        used = min(self._size, len(starts))
        for position in range(used):  # made here, not in the lanes: one thread makes them
            self._interpreter(position)
        others = [lanes.submit(lane, position) for position in range(1, used)]
        try:
            lane(0)
        finally:
            for future in others:
                future.result()
        return [
            _joined([part[output] for part in parts if part is not None])
            for output in range(len(fetches))
        ]


def _joined(pieces: list[np.ndarray]) -> np.ndarray:
    """The parts' outputs along their first dimension; a scalar output cannot be split."""
    if any(piece.ndim == 0 for piece in pieces):
        raise ServingError(Code.FAILED_PRECONDITION, "Batched output tensor has 0 dimensions")
    return np.concatenate(pieces)


def _common_rows(values: Any) -> int | None:
    """The first dimension all inputs share, if they share one (None: no split)."""
    rows = {value.shape[0] if value.ndim else None for value in values}
    return rows.pop() if len(rows) == 1 else None


class TfLiteServable(SignatureTable, BatchedRuns):
    """A loaded ``model.tflite``: a ``servable.Servable`` as ``SavedModelServable`` is."""

    def __init__(
        self, name: str, version: int, model: bytes, pools: int, interpreters_per_pool: int
    ) -> None:
        self.name = name
        self.version = version
        first = _Interpreter(model)
        inputs = tensor_map(first.interpreter.get_input_details(), "Input")
        outputs = tensor_map(first.interpreter.get_output_details(), "Output")
        super().__init__(serving_signatures(model, inputs, outputs))
        self._input_index = {tensor: index for tensor, (_, index) in inputs.items()}
        self._output_index = {tensor: index for tensor, (_, index) in outputs.items()}
        per_pool = max(1, interpreters_per_pool)
        self._free_pools: queue.SimpleQueue[_Pool] = queue.SimpleQueue()
        self._free_pools.put(_Pool(model, per_pool, first))
        for _ in range(max(1, pools) - 1):
            self._free_pools.put(_Pool(model, per_pool))
        self._lanes = (
            concurrent.futures.ThreadPoolExecutor(
                max(1, pools) * (per_pool - 1), thread_name_prefix=f"tflite-{name}"
            )
            if per_pool > 1
            else None
        )

    @classmethod
    def load(
        cls, name: str, version: int, path: Path, pools: int, interpreters_per_pool: int
    ) -> TfLiteServable:
        started = time.perf_counter()
        try:
            servable = cls(name, version, path.read_bytes(), pools, interpreters_per_pool)
        except BaseException:
            METRICS.record_load(str(path.parent), False, {})
            raise
        seconds = time.perf_counter() - started
        METRICS.record_load(str(path.parent), True, {"restore_graph": seconds})
        return servable

    def close(self, drain_timeout: float = 30.0) -> None:
        """Nothing to do: interpreters hold no resources beyond memory, and the lanes' idle
        threads end when their executor is collected; the last reference frees both, so a
        call still in flight finishes on them."""

    def predict_joined(
        self, signature_name: str, inputs: dict[str, np.ndarray]
    ) -> dict[str, np.ndarray | JoinedStrings]:
        """``predict``: the interpreter gives string outputs as arrays."""
        return dict(self.predict(signature_name, inputs))

    def predict(
        self,
        signature_name: str,
        inputs: dict[str, np.ndarray],
        output_filter: Sequence[str] = (),
    ) -> dict[str, np.ndarray]:
        signature = self.signature(signature_name)
        check_inputs(signature, inputs)
        outputs = output_aliases(signature, output_filter)
        aliases = tuple(sorted(inputs))
        feed_indices = [self._input_index[signature.inputs[alias].name] for alias in aliases]
        fetch_indices = [self._output_index[signature.outputs[alias].name] for alias in outputs]

        def run(values: Sequence[np.ndarray]) -> list[np.ndarray]:
            return self._invoke(dict(zip(feed_indices, values, strict=True)), fetch_indices)

        values = [inputs[alias] for alias in aliases]
        with METRICS.runtime(self.name, "Predict"):
            if self._batcher is not None:
                key = (self.name, self.version, signature.name, aliases, outputs)
                results = self._batcher.submit(key, values, run)
            else:
                check_caller_waits()
                results = run(values)
        return dict(zip(outputs, results, strict=True))

    def _invoke(self, feeds: dict[int, np.ndarray], fetches: Sequence[int]) -> list[np.ndarray]:
        """On a free pool; waits for one while every pool is running a call."""
        pool = self._free_pools.get()
        try:
            return pool.run(feeds, fetches, self._lanes)
        finally:
            self._free_pools.put(pool)

    def classify(self, signature_name: str, request_input: Any) -> Any:
        raise ServingError(Code.UNIMPLEMENTED, "Classify is not supported for TFLite models")

    def regress(self, signature_name: str, request_input: Any) -> Any:
        raise ServingError(Code.UNIMPLEMENTED, "Regress is not supported for TFLite models")

    classify_arrays = classify
    regress_values = regress
