"""A version served from its ``model.tflite`` (``--prefer_tflite_model``), as TF Serving does.

The model's signatures (``SignatureRunner``s) are the servable's signatures; Predict runs one
through TensorFlow's TFLite interpreter, which resizes inputs to the shapes sent. An
interpreter runs one call at a time, so each version keeps a pool of them:
``--num_tflite_pools`` x ``--num_tflite_interpreters_per_pool`` interpreters at most, made
as concurrent requests need them. Classify and Regress parse tf.Examples with ops TFLite
does not have: they answer UNIMPLEMENTED. Batching (``--enable_batching``) applies as for a
SavedModel.
"""

from __future__ import annotations

import queue
import threading
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf
from tensorflow_serving.apis import get_model_metadata_pb2

from sagemaker_tfs.model_server.classify_regress import PREDICT_METHOD
from sagemaker_tfs.model_server.errors import Code, ServingError, invalid_argument
from sagemaker_tfs.model_server.monitoring import METRICS
from sagemaker_tfs.model_server.servable import (
    BatchSubmitter,
    check_inputs,
    output_aliases,
)
from sagemaker_tfs.model_server.signatures import (
    GraphTensor,
    ServableSignature,
    find_signature,
    signature_def_of,
)

TFLITE_FILE = "model.tflite"


def tflite_path(version_dir: str) -> Path | None:
    """The version's ``model.tflite``, if it has one."""
    path = Path(version_dir) / TFLITE_FILE
    return path if path.is_file() else None


def _graph_tensor(detail: dict[str, Any]) -> GraphTensor:
    dtype = tf.dtypes.as_dtype(detail["dtype"]).as_datatype_enum
    shape = tuple(int(size) for size in detail.get("shape_signature", detail["shape"]))
    return GraphTensor(detail["name"], dtype, shape)


def _signatures(interpreter: tf.lite.Interpreter) -> dict[str, ServableSignature]:
    signatures = {}
    for key in interpreter.get_signature_list():
        runner = interpreter.get_signature_runner(key)
        signatures[key] = ServableSignature(
            name=key,
            method_name=PREDICT_METHOD,
            inputs={
                alias: _graph_tensor(detail)
                for alias, detail in sorted(runner.get_input_details().items())
            },
            outputs={
                alias: _graph_tensor(detail)
                for alias, detail in sorted(runner.get_output_details().items())
            },
        )
    return signatures


class TfLiteServable:
    """A loaded ``model.tflite``: the same interface as ``servable.Servable``."""

    def __init__(self, name: str, version: int, model: bytes, max_interpreters: int) -> None:
        self.name = name
        self.version = version
        self._model = model
        self._idle: queue.SimpleQueue[tf.lite.Interpreter] = queue.SimpleQueue()
        self._limit = threading.BoundedSemaphore(max(1, max_interpreters))
        first = self._new_interpreter()
        self._signatures = _signatures(first)
        if not self._signatures:
            raise ValueError(f"{TFLITE_FILE} has no signatures to serve")
        self._idle.put(first)
        self._batcher: BatchSubmitter | None = None

    @classmethod
    def load(cls, name: str, version: int, path: Path, max_interpreters: int) -> TfLiteServable:
        started = time.perf_counter()
        try:
            servable = cls(name, version, path.read_bytes(), max_interpreters)
        except BaseException:
            METRICS.record_load(str(path.parent), False, {})
            raise
        seconds = time.perf_counter() - started
        METRICS.record_load(str(path.parent), True, {"restore_graph": seconds})
        return servable

    def _new_interpreter(self) -> tf.lite.Interpreter:
        with warnings.catch_warnings():  # TF 2.2x points at LiteRT, which TF Serving does not use
            warnings.filterwarnings("ignore", "(?s).*tf.lite.Interpreter is deprecated")
            interpreter = tf.lite.Interpreter(model_content=self._model)
        interpreter.allocate_tensors()
        return interpreter

    def set_batcher(self, batcher: BatchSubmitter | None) -> None:
        self._batcher = batcher

    def close(self, drain_timeout: float = 30.0) -> None:
        """Interpreters hold no resources beyond memory; the last reference frees them."""

    def signature(self, name: str) -> ServableSignature:
        return find_signature(self._signatures, name)

    def signature_def_map(self) -> get_model_metadata_pb2.SignatureDefMap:
        result = get_model_metadata_pb2.SignatureDefMap()
        for key, signature in self._signatures.items():
            result.signature_def[key].CopyFrom(signature_def_of(signature))
        return result

    def predict(
        self,
        signature_name: str,
        inputs: dict[str, np.ndarray],
        output_filter: Sequence[str] = (),
    ) -> dict[str, np.ndarray]:
        signature = self.signature(signature_name)  # TFLite signatures are all predict
        check_inputs(signature, inputs)
        outputs = output_aliases(signature, output_filter)
        aliases = tuple(sorted(inputs))

        def run(values: Sequence[np.ndarray]) -> list[np.ndarray]:
            answer = self._invoke(signature.name, dict(zip(aliases, values, strict=True)))
            return [answer[alias] for alias in outputs]

        values = [inputs[alias] for alias in aliases]
        with METRICS.runtime(self.name, "Predict"):
            if self._batcher is not None:
                key = (self.name, self.version, signature.name, aliases, outputs)
                results = self._batcher.submit(key, values, run)
            else:
                results = run(values)
        return dict(zip(outputs, results, strict=True))

    def _invoke(self, key: str, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        with self._limit:
            try:
                interpreter = self._idle.get_nowait()
            except queue.Empty:
                interpreter = self._new_interpreter()
            try:
                return interpreter.get_signature_runner(key)(**feeds)
            except (ValueError, RuntimeError) as error:
                raise invalid_argument(str(error)) from None
            finally:
                self._idle.put(interpreter)

    def classify(self, signature_name: str, request_input: Any) -> Any:
        raise ServingError(Code.UNIMPLEMENTED, "Classify is not supported for TFLite models")

    def regress(self, signature_name: str, request_input: Any) -> Any:
        raise ServingError(Code.UNIMPLEMENTED, "Regress is not supported for TFLite models")
