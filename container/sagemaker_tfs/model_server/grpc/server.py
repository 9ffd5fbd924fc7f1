"""The gRPC server's start-up: where it listens (``GrpcSettings``), its options, TLS and
services; and the status server, GetModelStatus alone on a socket and threads of its own."""

from __future__ import annotations

import concurrent.futures
import dataclasses

import grpc
from tensorflow_serving.apis import get_model_status_pb2, model_service_pb2_grpc

from sagemaker_tfs.model_server.grpc.grpc_options import (
    ChannelArgument,
    TlsSettings,
    merge_channel_arguments,
)
from sagemaker_tfs.model_server.grpc.servicers import (
    ModelService,
    PredictionService,
    prediction_handlers,
    streamed_prediction_handlers,
)
from sagemaker_tfs.model_server.serving.manager import ModelManager

MODEL_SERVICE = "tensorflow.serving.ModelService"
# The status server's threads: the supervisor asks once a second, one call per model.
STATUS_THREADS = 2


@dataclasses.dataclass(frozen=True)
class GrpcSettings:
    """Where and how the gRPC API listens (from TF Serving's flags)."""

    port: int  # 0: no TCP listener
    socket_path: str = ""
    max_message_bytes: int = 2**31 - 1
    channel_arguments: tuple[ChannelArgument, ...] = ()
    tls: TlsSettings | None = None
    health_service: bool = False
    tensor_content: bool = False


def _add_health_service(server: grpc.Server) -> None:
    """``grpc.health.v1.Health`` as TF Serving registers it: SERVING for the whole server and
    for ModelService and PredictionService (short names), fixed at start-up."""
    from grpc_health.v1 import health, health_pb2, health_pb2_grpc

    servicer = health.HealthServicer()
    for service in ("", "ModelService", "PredictionService"):
        servicer.set(service, health_pb2.HealthCheckResponse.SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)


def serve(manager: ModelManager, settings: GrpcSettings, max_workers: int = 64) -> grpc.Server:
    """Start the gRPC server on 0.0.0.0:``port`` (unless 0) and on the UNIX socket
    ``socket_path`` (if set); raises if either cannot be bound."""
    defaults: list[ChannelArgument] = [
        ("grpc.max_send_message_length", settings.max_message_bytes),
        ("grpc.max_receive_message_length", settings.max_message_bytes),
        ("grpc.so_reuseport", 0),
    ]
    server = grpc.server(
        concurrent.futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="grpc"),
        options=merge_channel_arguments(defaults, list(settings.channel_arguments)),
    )
    prediction = PredictionService(manager, settings.max_message_bytes, settings.tensor_content)
    server.add_generic_rpc_handlers(
        (prediction_handlers(prediction), streamed_prediction_handlers(prediction))
    )
    model_service_pb2_grpc.add_ModelServiceServicer_to_server(ModelService(manager), server)
    if settings.health_service:
        _add_health_service(server)
    credentials = settings.tls.credentials() if settings.tls is not None else None

    def bind(address: str) -> None:
        try:
            if credentials is None:
                server.add_insecure_port(address)
            else:
                server.add_secure_port(address, credentials)
        except RuntimeError:  # grpcio's "Failed to bind to address"
            raise OSError(f"Could not bind gRPC server to {address}") from None

    if settings.port:
        bind(f"0.0.0.0:{settings.port}")
    if settings.socket_path:
        bind(f"unix:{settings.socket_path}")
    server.start()
    return server


def serve_status(manager: ModelManager, socket_path: str) -> grpc.Server:
    """GetModelStatus alone on the unix socket ``socket_path``, on a server and thread pool of
    its own: the supervisor's health checks are answered even while every thread of the main
    server runs a Predict (a call there waits in the pool's queue). Not part of TF Serving."""
    server = grpc.server(
        concurrent.futures.ThreadPoolExecutor(STATUS_THREADS, thread_name_prefix="grpc-status"),
        options=[("grpc.so_reuseport", 0)],
    )
    status = ModelService(manager)
    handler = grpc.unary_unary_rpc_method_handler(
        status.GetModelStatus,
        request_deserializer=get_model_status_pb2.GetModelStatusRequest.FromString,
        response_serializer=get_model_status_pb2.GetModelStatusResponse.SerializeToString,
    )
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(MODEL_SERVICE, {"GetModelStatus": handler}),)
    )
    try:
        server.add_insecure_port(f"unix:{socket_path}")
    except RuntimeError:  # grpcio's "Failed to bind to address"
        raise OSError(f"Could not bind the status server to unix:{socket_path}") from None
    server.start()
    return server
