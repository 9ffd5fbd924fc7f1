"""A stand-in model server that is slow or hung: it takes every call and answers late or never.

gRPC: GetModelMetadata answers at once (``serving_default``: one float input ``x``, one float
output ``y``); Predict and the streamed Predict take ``work_seconds`` on one of ``capacity``
threads (calls beyond them wait for one), then answer ``y`` = [3.5]; with ``work_seconds``
None they never answer. A call whose caller cancelled it before a thread took it is dropped
(``dropped``), as a server that looks at ``context.is_active()`` does; work once begun runs to
its end (``worked``). REST: each
post is read and never answered. ``calls`` counts the calls taken, ``let_go`` is set when a
caller cancels a call or closes a post's connection.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import grpc
import numpy as np
from sagemaker_tfs.wire import protos

METADATA = "/tensorflow.serving.PredictionService/GetModelMetadata"
HUNG_SECONDS = 90.0  # how long a hung call waits for its caller to let go


class SlowModelServer:
    def __init__(self, grpc_target: str, work_seconds: float | None = None,
                 capacity: int = 4) -> None:  # fmt: skip
        self.work_seconds = work_seconds
        self.calls = self.dropped = self.worked = 0
        self.let_go = threading.Event()
        self._lock = threading.Lock()
        self.rest = ThreadingHTTPServer(("127.0.0.1", 0), self._rest_handler())
        self.rest.daemon_threads = True
        threading.Thread(target=self.rest.serve_forever, daemon=True).start()
        self.grpc = grpc.server(ThreadPoolExecutor(capacity + 1))  # one for the metadata
        self.grpc.add_generic_rpc_handlers([_Slow(self)])
        self.grpc.add_insecure_port(grpc_target)
        self.grpc.start()

    @property
    def rest_port(self) -> int:
        return self.rest.server_address[1]

    def count(self, field: str) -> None:
        with self._lock:
            setattr(self, field, getattr(self, field) + 1)

    def serve(self, context: grpc.ServicerContext) -> bytes:
        """One Predict: dropped if its caller already left, else worked on (or hung)."""
        self.count("calls")
        if not context.is_active():
            self.count("dropped")
            return b""
        ended = threading.Event()
        context.add_callback(ended.set)  # the call ended: before an answer, by its caller
        context.add_callback(self.let_go.set)
        if self.work_seconds is None:
            ended.wait(HUNG_SECONDS)
            return b""
        time.sleep(self.work_seconds)
        self.count("worked")
        return ANSWER

    def _rest_handler(self) -> type[BaseHTTPRequestHandler]:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802
                self.rfile.read(int(self.headers["Content-Length"]))
                owner.count("calls")
                if self.rfile.read(1) == b"":  # the service closed the connection
                    owner.let_go.set()

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                pass

        return Handler

    def close(self) -> None:
        self.grpc.stop(0)
        self.rest.shutdown()
        self.rest.server_close()


class _Slow(grpc.GenericRpcHandler):
    def __init__(self, owner: SlowModelServer) -> None:
        self.owner = owner

    def service(self, details: Any) -> grpc.RpcMethodHandler:
        if details.method == METADATA:
            return grpc.unary_unary_rpc_method_handler(lambda request, context: METADATA_ANSWER)
        if "Streamed" in details.method:
            return grpc.stream_stream_rpc_method_handler(self.streamed)
        return grpc.unary_unary_rpc_method_handler(self.unary)

    def unary(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        return self.owner.serve(context)

    def streamed(self, requests: Iterator[bytes], context: grpc.ServicerContext) -> Iterator[bytes]:
        for _ in requests:  # the whole request, then the work
            pass
        self.owner.serve(context)
        yield b""  # never a whole streamed answer: the stand-in serves it only hung


def _metadata_answer() -> bytes:
    signatures = protos.SignatureDefMap()
    definition = signatures.signature_def["serving_default"]
    definition.method_name = "tensorflow/serving/predict"
    definition.inputs["x"].dtype = 1  # DT_FLOAT
    definition.outputs["y"].dtype = 1
    answer = protos.GetModelMetadataResponse()
    answer.metadata["signature_def"].Pack(signatures)
    return bytes(answer.SerializeToString())


def _predict_answer() -> bytes:
    answer = protos.PredictResponse()
    output = answer.outputs["y"]
    output.dtype = 1
    output.tensor_shape.dim.add().size = 1
    output.tensor_content = np.array([3.5], np.float32).tobytes()
    return bytes(answer.SerializeToString())


METADATA_ANSWER = _metadata_answer()
ANSWER = _predict_answer()
