"""gRPC front end: TF Serving's PredictionService and ModelService on top of the manager.

Tensors cross the wire as TensorProto, converted by the project's one codec
(``sagemaker_tfs.wire.tensors``): requests are read from ``tensor_content`` or the typed
``*_val`` fields; responses use the typed ``*_val`` fields as TF Serving does, encoded as
packed fields straight from the NumPy buffers (no per-element Python loop). Predict, where
tensors are large, takes and returns serialized messages: ``sagemaker_tfs.wire.predict_messages``
reads the inputs in place and writes the answer in one copy. Errors become gRPC statuses
with TF Serving's codes and messages (cut at 1024 characters, as TF Serving does).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

import grpc
import numpy as np
from google.protobuf.message import Message
from tensorflow_serving.apis import (
    classification_pb2,
    get_model_metadata_pb2,
    get_model_status_pb2,
    inference_pb2,
    model_management_pb2,
    model_pb2,
    model_service_pb2_grpc,
    prediction_service_pb2_grpc,
    regression_pb2,
    status_pb2,
)

from sagemaker_tfs.model_server.errors import Code, ServingError, invalid_argument
from sagemaker_tfs.model_server.monitoring import METRICS
from sagemaker_tfs.model_server.serving.classify_regress import CLASSIFY_METHOD, REGRESS_METHOD
from sagemaker_tfs.model_server.serving.manager import ModelManager
from sagemaker_tfs.model_server.serving.servable import CALLER_WAITS, Servable
from sagemaker_tfs.model_server.serving.signatures import DEFAULT_SIGNATURE
from sagemaker_tfs.wire import pixels, predict_messages, streamed_predict, tensors
from sagemaker_tfs.wire.streamed_predict import StreamedTensors

logger = logging.getLogger(__name__)
MAX_ERROR_MESSAGE = 1024
SIGNATURE_DEF_FIELD = "signature_def"

Response = TypeVar("Response", bound=Message)
PREDICTION_SERVICE = "tensorflow.serving.PredictionService"


def decode_predict_request(data: bytes) -> tuple[Message, dict[str, np.ndarray], list[str]]:
    """(model_spec, inputs, output_filter) of a serialized PredictRequest.

    Bytes that are not a PredictRequest are INTERNAL, as gRPC's C++ server answers a message
    it cannot parse; a tensor that contradicts its shape is INVALID_ARGUMENT.
    """
    try:
        return predict_messages.decode_predict_request(data)
    except predict_messages.DecodeError:
        raise ServingError(Code.INTERNAL, "Failed to parse PredictRequest") from None
    except tensors.TensorConversionError as error:
        raise invalid_argument(str(error)) from None


# ----- request helpers -----


def _model_spec(servable: Servable, signature_name: str | None) -> model_pb2.ModelSpec:
    spec = model_pb2.ModelSpec(name=servable.name)
    spec.version.value = servable.version
    if signature_name is not None:
        spec.signature_name = signature_name
    return spec


def resolve(manager: ModelManager, spec: model_pb2.ModelSpec) -> Servable:
    """The servable a ModelSpec addresses (latest, a version, or a label)."""
    choice = spec.WhichOneof("version_choice")
    if choice == "version":
        return manager.get_servable(spec.name, version=spec.version.value)
    if choice == "version_label":
        return manager.get_servable(spec.name, label=spec.version_label)
    return manager.get_servable(spec.name)


def _abort(context: grpc.ServicerContext, error: ServingError) -> None:
    code = grpc.StatusCode[error.code.name]
    context.abort(code, error.message[:MAX_ERROR_MESSAGE])


def _handle(context: grpc.ServicerContext, call: Callable[[], Response], what: str) -> Response:
    """``call``'s answer, its ServingError a status; a run it starts is dropped when the call
    was cancelled or its deadline passed first (``servable.CALLER_WAITS``)."""
    token = CALLER_WAITS.set(context.is_active)
    try:
        return call()
    except ServingError as error:
        logger.debug("%s failed: %s", what, error.message)
        _abort(context, error)
    except Exception as error:  # noqa: BLE001 - any bug becomes INTERNAL, server keeps going
        logger.exception("%s failed", what)
        _abort(context, ServingError(Code.INTERNAL, f"{type(error).__name__}: {error}"))
    finally:
        CALLER_WAITS.reset(token)
    raise AssertionError("unreachable: context.abort raises")


def _on_examples(
    manager: ModelManager,
    request: classification_pb2.ClassificationRequest | regression_pb2.RegressionRequest,
    response_type: type[Response],
) -> Response:
    """Classify or Regress (the servable's ``classify`` or ``regress``, as the request is) on the
    request's tf.Example input, answered as ``response_type``."""
    classify = isinstance(request, classification_pb2.ClassificationRequest)
    with METRICS.request("GRPC", "Classify" if classify else "Regress", request.model_spec.name):
        servable = resolve(manager, request.model_spec)
        signature_name = request.model_spec.signature_name or DEFAULT_SIGNATURE
        if classify:
            result: Message = servable.classify(signature_name, request.input)
        else:
            result = servable.regress(signature_name, request.input)
    response = response_type(result=result)
    response.model_spec.CopyFrom(_model_spec(servable, signature_name))
    return response


# ----- services -----


class PredictionService(prediction_service_pb2_grpc.PredictionServiceServicer):
    """Predict, Classify, Regress, MultiInference and GetModelMetadata."""

    def __init__(
        self,
        manager: ModelManager,
        max_message_bytes: int | None = None,
        tensor_content: bool = False,
    ) -> None:
        self._manager = manager
        self._max_streamed_bytes = max_message_bytes  # a streamed request's bound, as Predict's
        self._tensor_content = tensor_content  # --enable_serialization_as_tensor_content

    def Predict(
        self, request: bytes, context: grpc.ServicerContext
    ) -> bytes:  # noqa: N802 - gRPC method name
        return _handle(context, lambda: self._predict(request), "Predict")

    def PredictStreamed(  # noqa: N802 - gRPC method name
        self, messages: Iterator[bytes], context: grpc.ServicerContext
    ) -> Iterator[bytes]:
        """Predict with the request and answer streamed (``streamed_predict``), pixels named
        in the call's metadata widened first (``wire.pixels``)."""
        metadata = context.invocation_metadata()
        spec, outputs = _handle(context, lambda: self._run_streamed(messages, metadata), "Predict")
        yield from streamed_predict.answer_messages(spec, outputs)

    def _run_streamed(
        self, messages: Iterator[bytes], metadata: Iterable[tuple[str, str | bytes]]
    ) -> tuple[model_pb2.ModelSpec, dict[str, np.ndarray]]:
        with METRICS.request("GRPC", "Predict") as record:
            try:
                casts = pixels.from_metadata(metadata)
                header, inputs = StreamedTensors.receive_request(messages, self._max_streamed_bytes)
                record.model_name = header.model_spec.name
                self._check_widened_bytes(inputs.arrays, casts)
                arrays = pixels.widen(inputs.complete(), casts)
            except (tensors.TensorConversionError, ValueError) as error:  # StreamError too
                raise invalid_argument(str(error)) from None
            return self._run(header.model_spec, arrays, list(header.output_filter))

    def _check_widened_bytes(
        self, arrays: dict[str, np.ndarray], casts: dict[str, pixels.PixelCast]
    ) -> None:
        """Refuse pixels whose widened values would exceed the bound on a request's tensors
        before receiving them."""
        if not casts or self._max_streamed_bytes is None or self._max_streamed_bytes < 0:
            return
        total = pixels.widened_bytes(arrays, casts)
        if total > self._max_streamed_bytes:
            raise ValueError(
                f"the widened pixels take {total} bytes, more than {self._max_streamed_bytes}"
            )

    def _predict(self, request: bytes) -> bytes:
        """A serialized PredictRequest in, a serialized PredictResponse out."""
        with METRICS.request("GRPC", "Predict") as record:  # model "" if it did not parse
            spec, inputs, output_filter = decode_predict_request(request)
            record.model_name = spec.name
            answer_spec, outputs = self._run(spec, inputs, output_filter)
        return predict_messages.encode_predict_response(answer_spec, outputs, self._tensor_content)

    def _run(
        self, spec: Message, inputs: dict[str, np.ndarray], output_filter: list[str]
    ) -> tuple[model_pb2.ModelSpec, dict[str, np.ndarray]]:
        servable = resolve(self._manager, spec)
        signature_name = spec.signature_name or DEFAULT_SIGNATURE
        outputs = servable.predict(signature_name, inputs, output_filter)
        return _model_spec(servable, signature_name), outputs

    def Classify(  # noqa: N802
        self, request: classification_pb2.ClassificationRequest, context: grpc.ServicerContext
    ) -> classification_pb2.ClassificationResponse:
        response = classification_pb2.ClassificationResponse
        return _handle(context, lambda: _on_examples(self._manager, request, response), "Classify")

    def Regress(  # noqa: N802
        self, request: regression_pb2.RegressionRequest, context: grpc.ServicerContext
    ) -> regression_pb2.RegressionResponse:
        response = regression_pb2.RegressionResponse
        return _handle(context, lambda: _on_examples(self._manager, request, response), "Regress")

    def MultiInference(  # noqa: N802
        self, request: inference_pb2.MultiInferenceRequest, context: grpc.ServicerContext
    ) -> inference_pb2.MultiInferenceResponse:
        return _handle(context, lambda: self._multi_inference(request), "MultiInference")

    def _multi_inference(
        self, request: inference_pb2.MultiInferenceRequest
    ) -> inference_pb2.MultiInferenceResponse:
        if not request.tasks:
            raise invalid_argument("Expected at least one task.")
        names = {task.model_spec.name for task in request.tasks}
        if len(names) != 1:
            raise invalid_argument(
                "All ModelSpecs in a MultiInferenceRequest must access the same model name."
            )
        signatures = [task.model_spec.signature_name or DEFAULT_SIGNATURE for task in request.tasks]
        duplicates = {name for name in signatures if signatures.count(name) > 1}
        if duplicates:
            raise invalid_argument(f"Duplicate evaluation of signature: {sorted(duplicates)[0]}")
        servable = resolve(self._manager, request.tasks[0].model_spec)
        examples = request.input.WhichOneof("kind")
        if examples is not None:
            METRICS.record_multi_inference(
                servable.name, len(getattr(request.input, examples).examples)
            )
        response = inference_pb2.MultiInferenceResponse()
        for task, signature_name in zip(request.tasks, signatures, strict=True):
            result = response.results.add()
            result.model_spec.CopyFrom(_model_spec(servable, signature_name))
            if task.method_name == CLASSIFY_METHOD:
                result.classification_result.CopyFrom(
                    servable.classify(signature_name, request.input)
                )
            elif task.method_name == REGRESS_METHOD:
                result.regression_result.CopyFrom(servable.regress(signature_name, request.input))
            else:
                raise ServingError(
                    Code.UNIMPLEMENTED, f"Unsupported signature method_name: {task.method_name}"
                )
        return response

    def GetModelMetadata(  # noqa: N802
        self, request: get_model_metadata_pb2.GetModelMetadataRequest, context: grpc.ServicerContext
    ) -> get_model_metadata_pb2.GetModelMetadataResponse:
        return _handle(context, lambda: self._metadata(request), "GetModelMetadata")

    def _metadata(
        self, request: get_model_metadata_pb2.GetModelMetadataRequest
    ) -> get_model_metadata_pb2.GetModelMetadataResponse:
        if not request.metadata_field:
            raise invalid_argument(
                "GetModelMetadataRequest must specify at least one metadata_field"
            )
        for field in request.metadata_field:
            if field != SIGNATURE_DEF_FIELD:
                raise invalid_argument(f"Metadata field {field} is not supported")
        servable = resolve(self._manager, request.model_spec)
        response = get_model_metadata_pb2.GetModelMetadataResponse()
        response.model_spec.CopyFrom(_model_spec(servable, None))
        response.metadata[SIGNATURE_DEF_FIELD].Pack(servable.signature_def_map())
        return response


class ModelService(model_service_pb2_grpc.ModelServiceServicer):
    """GetModelStatus and HandleReloadConfigRequest."""

    def __init__(self, manager: ModelManager) -> None:
        self._manager = manager

    def GetModelStatus(  # noqa: N802
        self, request: get_model_status_pb2.GetModelStatusRequest, context: grpc.ServicerContext
    ) -> get_model_status_pb2.GetModelStatusResponse:
        return _handle(context, lambda: self._manager.get_model_status(request), "GetModelStatus")

    def HandleReloadConfigRequest(  # noqa: N802
        self, request: model_management_pb2.ReloadConfigRequest, context: grpc.ServicerContext
    ) -> model_management_pb2.ReloadConfigResponse:
        return _handle(context, lambda: self._reload(request), "HandleReloadConfigRequest")

    def _reload(
        self, request: model_management_pb2.ReloadConfigRequest
    ) -> model_management_pb2.ReloadConfigResponse:
        logger.info(
            "Reloading model config: %d model(s)", len(request.config.model_config_list.config)
        )
        self._manager.reload_config(request.config)
        return model_management_pb2.ReloadConfigResponse(status=status_pb2.StatusProto())


def prediction_handlers(service: PredictionService) -> grpc.GenericRpcHandler:
    """PredictionService's methods; Predict's messages stay serialized (``predict_messages``)."""

    def typed(method, request_type, response_type):  # type: ignore[no-untyped-def]
        return grpc.unary_unary_rpc_method_handler(
            method,
            request_deserializer=request_type.FromString,
            response_serializer=response_type.SerializeToString,
        )

    handlers = {
        "Predict": grpc.unary_unary_rpc_method_handler(service.Predict),
        "Classify": typed(
            service.Classify,
            classification_pb2.ClassificationRequest,
            classification_pb2.ClassificationResponse,
        ),
        "Regress": typed(
            service.Regress, regression_pb2.RegressionRequest, regression_pb2.RegressionResponse
        ),
        "MultiInference": typed(
            service.MultiInference,
            inference_pb2.MultiInferenceRequest,
            inference_pb2.MultiInferenceResponse,
        ),
        "GetModelMetadata": typed(
            service.GetModelMetadata,
            get_model_metadata_pb2.GetModelMetadataRequest,
            get_model_metadata_pb2.GetModelMetadataResponse,
        ),
    }
    return grpc.method_handlers_generic_handler(PREDICTION_SERVICE, handlers)


def streamed_prediction_handlers(service: PredictionService) -> grpc.GenericRpcHandler:
    """The project's own ``streamed_predict.STREAMED_PREDICT`` (not part of TF Serving's API)."""
    streamed_service, method = streamed_predict.STREAMED_PREDICT.strip("/").split("/")
    handler = grpc.stream_stream_rpc_method_handler(service.PredictStreamed)
    return grpc.method_handlers_generic_handler(streamed_service, {method: handler})
