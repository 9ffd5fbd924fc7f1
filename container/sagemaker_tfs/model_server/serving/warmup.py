"""SavedModel warm-up: replay ``assets.extra/tf_serving_warmup_requests`` like TF Serving.

The file is a TFRecord of ``PredictionLog`` protos. Each logged request runs once against
the freshly loaded version before it becomes AVAILABLE, so the first real request does not
pay for lazy initialisation. A failing record fails the load, as in TF Serving.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import numpy as np
import tensorflow as tf
from tensorflow.core.framework import tensor_pb2
from tensorflow_serving.apis import prediction_log_pb2

from sagemaker_tfs.model_server.errors import invalid_argument
from sagemaker_tfs.model_server.monitoring import METRICS
from sagemaker_tfs.model_server.serving.classify_regress import CLASSIFY_METHOD, REGRESS_METHOD
from sagemaker_tfs.model_server.serving.servable import Servable
from sagemaker_tfs.wire import tensors

logger = logging.getLogger(__name__)

WARMUP_FILE = Path("assets.extra") / "tf_serving_warmup_requests"
MAX_WARMUP_RECORDS = 1000


def tensor_to_array(proto: tensor_pb2.TensorProto) -> np.ndarray:
    """A logged request's TensorProto by the wire's codec; a malformed one is INVALID_ARGUMENT."""
    try:
        return tensors.to_ndarray(proto)
    except tensors.TensorConversionError as error:
        raise invalid_argument(str(error)) from None


def _replay(servable: Servable, log: prediction_log_pb2.PredictionLog) -> None:
    kind = log.WhichOneof("log_type")
    if kind == "predict_log":
        request = log.predict_log.request
        inputs = {alias: tensor_to_array(proto) for alias, proto in request.inputs.items()}
        servable.predict(request.model_spec.signature_name, inputs, list(request.output_filter))
    elif kind == "classify_log":
        request = log.classify_log.request
        servable.classify(request.model_spec.signature_name, request.input)
    elif kind == "regress_log":
        request = log.regress_log.request
        servable.regress(request.model_spec.signature_name, request.input)
    elif kind == "multi_inference_log":
        request = log.multi_inference_log.request
        for task in request.tasks:
            if task.method_name == CLASSIFY_METHOD:
                servable.classify(task.model_spec.signature_name, request.input)
            elif task.method_name == REGRESS_METHOD:
                servable.regress(task.model_spec.signature_name, request.input)
            else:
                raise ValueError(f"Unsupported signature method_name: {task.method_name}")
    else:
        raise ValueError(f"Unsupported log_type for warmup: {kind}")


def run_warmup(servable: Servable, version_dir: str, iterations: int = 1) -> int:
    """Replay the version's warm-up requests, each ``iterations`` times
    (``--num_request_iterations_for_warmup``; 0 means once); returns how many records
    were read (0 without a file)."""
    path = Path(version_dir) / WARMUP_FILE
    if not path.is_file():
        return 0
    count = 0
    started = time.perf_counter()
    status = "OK"
    try:
        for record in tf.compat.v1.io.tf_record_iterator(str(path)):
            count += 1
            if count > MAX_WARMUP_RECORDS:
                raise ValueError(
                    f"Number of warmup records exceeds the maximum ({MAX_WARMUP_RECORDS}) at {path}"
                )
            log = prediction_log_pb2.PredictionLog.FromString(record)
            for _ in range(max(1, iterations)):
                _replay(servable, log)
    except BaseException as error:
        status = getattr(getattr(error, "code", None), "name", None) or "UNKNOWN"
        raise
    finally:
        METRICS.record_warmup(version_dir, count, time.perf_counter() - started, status)
    logger.info(
        "Finished reading warmup data for model at %s. Number of warmup records read: %d.",
        path,
        count,
    )
    return count
