"""When the fast path streams an answer, and ``client.predict``'s streamed
answer against a real gRPC server in this process: one that offers the project's streamed
Predict, and one that lacks it as TF Serving's binary does (the client falls back)."""

from __future__ import annotations

import concurrent.futures
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import falcon
import grpc
import numpy as np
import pytest
from sagemaker_tfs import client
from sagemaker_tfs.service.codecs import content_types
from sagemaker_tfs.service.codecs.registry import answer_type
from sagemaker_tfs.service.handlers.context import build_context
from sagemaker_tfs.service.metrics import InvocationRecord
from sagemaker_tfs.service.request import ParsedRequest
from sagemaker_tfs.service.routing import fast_path
from sagemaker_tfs.service.routing.model_servers import ModelServer
from sagemaker_tfs.service.targets import ModelTarget
from sagemaker_tfs.wire import pixels, predict_messages, protos, streamed_predict
from sagemaker_tfs.wire.http_headers import CustomAttributes, MediaType
from sagemaker_tfs.wire.signatures import Signature, TensorSpec

PREDICTION_SERVICE = "tensorflow.serving.PredictionService"
DT_FLOAT = protos.DataType.values_by_name["DT_FLOAT"].number
REQUEST = ParsedRequest(
    content_type=MediaType("application/x-npy"),
    accept=(),
    answer=answer_type((), ""),
    custom_attributes=CustomAttributes(),
    target=ModelTarget("m", None, "predict"),
    content_length=0,
)


def signature(**outputs: tuple[int, ...] | None) -> Signature:
    specs = {name: TensorSpec(name, DT_FLOAT, shape) for name, shape in outputs.items()}
    return Signature("serving_default", "", {}, specs)


def test_expected_answer_bytes_from_signature_shapes_and_batch() -> None:
    inputs = {"images": np.zeros((10, 8, 8, 3), np.float32)}
    detector = signature(small=(-1, 16, 16, 255), large=(-1, 64, 64, 255))
    small, large = 10 * 16 * 16 * 255 * 4, 10 * 64 * 64 * 255 * 4
    assert fast_path.expected_answer_bytes(detector, inputs, []) == small + large
    assert fast_path.expected_answer_bytes(detector, inputs, ["small"]) == small
    assert large >= fast_path.STREAM_BYTES > small
    assert fast_path.expected_answer_bytes(signature(y=(-1, -1)), inputs, []) == 0
    assert fast_path.expected_answer_bytes(signature(y=None), inputs, []) == 0


class FakeModelServer:
    """A gRPC server answering Predict with ``y = 2 * x``, with or without the streamed
    Predict; it counts the calls of each and keeps the dtype ``x`` arrived in (the streamed
    Predict widens pixels as its metadata says). ``drop_last_bytes`` cuts the streamed answer
    short."""

    def __init__(self, streamed: bool, drop_last_bytes: int = 0, port: int = 0) -> None:
        self.drop_last_bytes = drop_last_bytes
        self.calls = {"unary": 0, "streamed": 0}
        self.received: list[np.dtype] = []
        handlers = {"Predict": grpc.unary_unary_rpc_method_handler(self._unary)}
        self.server = grpc.server(concurrent.futures.ThreadPoolExecutor(2))
        service = grpc.method_handlers_generic_handler(PREDICTION_SERVICE, handlers)
        self.server.add_generic_rpc_handlers((service,))
        if streamed:
            streamed_service, method = streamed_predict.STREAMED_PREDICT.strip("/").split("/")
            handler = grpc.stream_stream_rpc_method_handler(self._streamed)
            self.server.add_generic_rpc_handlers(
                (grpc.method_handlers_generic_handler(streamed_service, {method: handler}),)
            )
        self.port = self.server.add_insecure_port(f"127.0.0.1:{port}")
        self.server.start()

    def _answer(self, request: bytes) -> tuple:
        spec, inputs, _ = predict_messages.decode_predict_request(request)
        self.received.append(inputs["x"].dtype)
        return spec, {"y": inputs["x"] * 2}

    def _unary(self, request: bytes, context) -> bytes:  # type: ignore[no-untyped-def]
        self.calls["unary"] += 1
        return predict_messages.encode_predict_response(*self._answer(request))

    def _streamed(self, requests: Iterator[bytes], context) -> Iterator[bytes]:  # type: ignore[no-untyped-def]
        self.calls["streamed"] += 1
        header, inputs = streamed_predict.StreamedTensors.receive_request(requests)
        self.received.append(inputs.arrays["x"].dtype)
        casts = pixels.from_metadata(context.invocation_metadata())
        answer = (header.model_spec, {"y": pixels.widen(inputs.complete(), casts)["x"] * 2})
        messages = list(streamed_predict.answer_messages(*answer, size=1000))
        if self.drop_last_bytes:
            messages[-1] = messages[-1][: -self.drop_last_bytes]
        yield from messages


@pytest.mark.parametrize("streamed", [True, False])
def test_predict_streams_the_answer_or_falls_back(streamed: bool) -> None:
    server = FakeModelServer(streamed)
    channel = client.ModelServerChannel(f"127.0.0.1:{server.port}")
    context = build_context(REQUEST, ModelServer(server.port, 0, channel))
    try:
        x = np.arange(5000, dtype=np.float32)
        for _ in range(2):
            outputs = client.predict(context, {"x": x}, stream_answer=True)
            np.testing.assert_array_equal(outputs["y"], x * 2)
        np.testing.assert_array_equal(client.predict(context, {"x": x})["y"], x * 2)
    finally:
        channel.close()
        server.server.stop(None)
    if streamed:
        assert server.calls == {"unary": 1, "streamed": 2}
    else:  # asked once, found unimplemented, then not asked again on this channel
        assert server.calls == {"unary": 3, "streamed": 0}
    assert channel.offers_streamed_predict is streamed


@pytest.mark.parametrize("streamed", [True, False])
def test_pixels_travel_as_uint8_when_the_server_widens_them(streamed: bool) -> None:
    """With ``pixel_casts``, the streamed Predict carries the uint8 pixels and the cast in
    its metadata; a server without it (TF Serving) gets the float32 values by Predict. The
    model sees the same values either way, and so does a call without the cast."""
    server = FakeModelServer(streamed)
    channel = client.ModelServerChannel(f"127.0.0.1:{server.port}")
    context = build_context(REQUEST, ModelServer(server.port, 0, channel))
    image = np.arange(3 * 64 * 64 * 3, dtype=np.uint32).astype(np.uint8).reshape(3, 64, 64, 3)
    cast = {"x": pixels.PixelCast("float32", scale=2 / 255, offset=-1)}
    expected = (image.astype(np.float32) * np.float32(2 / 255) + np.float32(-1)) * 2
    try:
        for stream in (True, False):
            outputs = client.predict(context, {"x": image}, stream_answer=stream, pixel_casts=cast)
            assert outputs["y"].dtype == np.float32
            np.testing.assert_array_equal(outputs["y"], expected)
            with pytest.raises(ValueError, match="must be integers, got float32 for 'x'"):
                client.predict(context, {"x": expected}, stream_answer=stream, pixel_casts=cast)
            with pytest.raises(ValueError, match="not sent: y"):
                client.predict(
                    context, {"x": image}, stream_answer=stream, pixel_casts={"y": cast["x"]}
                )
    finally:
        channel.close()
        server.server.stop(None)
    if streamed:
        assert server.received == [np.uint8, np.float32]
    else:
        assert server.received == [np.float32, np.float32]


def prepared(x: np.ndarray, output_type: str) -> fast_path.PreparedCall:
    return fast_path.PreparedCall(content_types.DecodedInputs({"x": x}, {}), [], True, output_type)


def predict(context: Any, call: fast_path.PreparedCall) -> Any:
    return fast_path.predict(context, call, InvocationRecord(None, falcon.Response()), 30.0)


def test_a_truncated_streamed_predict_is_a_clear_502() -> None:
    """An answer shorter than its header announces: a clear error, neither a hang nor a 500."""
    server = FakeModelServer(streamed=True, drop_last_bytes=3)
    channel = client.ModelServerChannel(f"127.0.0.1:{server.port}")
    context = build_context(REQUEST, ModelServer(server.port, 0, channel))
    x = np.arange(5000, dtype=np.float32)
    try:
        with pytest.raises(streamed_predict.StreamError, match="ended after 19997 of the 20000"):
            client.predict(context, {"x": x}, stream_answer=True)
        with pytest.raises(fast_path.HttpError) as caught:
            predict(context, prepared(x, "application/json"))
        assert caught.value.status == 502
        assert "ended after 19997 of the 20000 bytes" in str(caught.value)
        # an .npz or .npy is passed on as it arrives: sending it stops at the missing bytes
        # (http_bodies._send_streamed: a 502 for an answer small enough to gather, else cut short)
        for output_type in ("application/x-npz", "application/x-npy"):
            body, _ = predict(context, prepared(x, output_type))
            with pytest.raises(streamed_predict.StreamError, match="ended after 19997"):
                list(body.chunks)
    finally:
        channel.close()
        server.server.stop(None)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_predict_waits_for_a_model_server_that_comes_back() -> None:
    """UNAVAILABLE (the model server died or restarts) is asked again for a while: a handler's
    gRPC call outlives a restart without the handler being run again."""
    port = free_port()
    channel = client.ModelServerChannel(f"127.0.0.1:{port}")
    context = build_context(REQUEST, ModelServer(port, 0, channel))
    x = np.arange(4, dtype=np.float32)
    servers = []
    timer = threading.Timer(0.5, lambda: servers.append(FakeModelServer(False, port=port)))
    started = time.monotonic()
    timer.start()
    try:
        outputs = client.predict(context, {"x": x})
        np.testing.assert_array_equal(outputs["y"], x * 2)
        assert time.monotonic() - started >= 0.5
    finally:
        timer.join()
        channel.close()
        for server in servers:
            server.server.stop(None)


def test_predict_gives_up_on_an_unreachable_model_server() -> None:
    channel = client.ModelServerChannel(f"127.0.0.1:{free_port()}")
    context = build_context(REQUEST, ModelServer(0, 0, channel))
    x = np.arange(4, dtype=np.float32)
    with channel:
        for seconds in (0, 0.4):
            started = time.monotonic()
            with pytest.raises(grpc.RpcError) as raised:
                client.predict(context, {"x": x}, unavailable_retry_seconds=seconds)
            assert raised.value.code() == grpc.StatusCode.UNAVAILABLE
            assert seconds <= time.monotonic() - started < seconds + 2
