"""One-line gRPC calls to the model server for users' ``inference.py`` (and the fast path).

Example ``code/inference.py``::

    import numpy as np
    from sagemaker_tfs.client import predict

    def handler(data, context):
        batch = np.load(data, allow_pickle=False)
        outputs = predict(context, {"input_1": batch})   # dict of NumPy arrays
        return outputs["predictions"].tobytes(), "application/octet-stream"

``predict(..., stream_answer=True)`` sends the request and receives the answer in pieces
(``streamed_predict.STREAMED_PREDICT``): several times faster for tensors of tens of MB; TF
Serving's own binary lacks the method, and ``predict`` then falls back to the usual Predict.
With it, ``pixel_casts`` lets ``uint8`` pixels for a float input travel as they are, widened by
the model server (``wire.pixels``).
``predict`` reuses ``context.channel`` (or opens one to ``context.grpc_port`` with no message
size limits), takes the model name and version from the context, sends tensors as raw
``tensor_content`` and reads the answer in place (:mod:`sagemaker_tfs.wire.predict_messages`).
Output arrays are read-only views of the response; ``.copy()`` them to modify in place. gRPC
failures raise ``grpc.RpcError`` as usual. TensorFlow is not imported.
"""

from __future__ import annotations

import functools
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ParamSpec

import grpc
import numpy as np
from google.protobuf.message import Message

from sagemaker_tfs.wire import pixels, predict_messages, protos, streamed_predict
from sagemaker_tfs.wire.pixels import PixelCast
from sagemaker_tfs.wire.signatures import Signature, signature_from_def
from sagemaker_tfs.wire.streamed_predict import StreamedTensors

DEFAULT_SIGNATURE = "serving_default"
PREDICT = "/tensorflow.serving.PredictionService/Predict"
DEFAULT_TIMEOUT_SECONDS = 60.0
_default_timeout = DEFAULT_TIMEOUT_SECONDS  # set_default_timeout
# How long predict asks a model server that cannot be reached again (a restarted one is
# back within a second or two), and the pause between tries.
UNAVAILABLE_RETRY_SECONDS = 20.0
UNAVAILABLE_PAUSE_SECONDS = 0.1
P = ParamSpec("P")
# No message size limits; and a channel whose model server was restarted reconnects within
# a second instead of gRPC's default backoff (up to 2 minutes).
CHANNEL_OPTIONS = (
    ("grpc.max_send_message_length", -1),
    ("grpc.max_receive_message_length", -1),
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
)


class ModelServerChannel(grpc.Channel):
    """A gRPC channel to one model server (no message size limits), with what is kept per
    model server: its method callables, whether it offers the streamed Predict, and the
    signatures of its models. The service makes one per model server
    (``service.connections.Channels``) and hands it to handlers as ``context.channel``; it is
    an ordinary ``grpc.Channel`` for stubs of their own.
    """

    def __init__(self, target: str) -> None:
        self.target = target
        self._channel = grpc.insecure_channel(target, options=CHANNEL_OPTIONS)
        self.offers_streamed_predict = True  # until the server says UNIMPLEMENTED
        self.signatures: dict[tuple[str, str | None], dict[str, Signature]] = {}
        self.stub = protos.PredictionServiceStub(self)
        self.raw_predict = self._channel.unary_unary(PREDICT)
        self.streamed_predict = self._channel.stream_stream(streamed_predict.STREAMED_PREDICT)

    def subscribe(self, callback: Any, try_to_connect: bool = False) -> None:
        self._channel.subscribe(callback, try_to_connect)

    def unsubscribe(self, callback: Any) -> None:
        self._channel.unsubscribe(callback)

    def unary_unary(self, *args: Any, **kwargs: Any) -> grpc.UnaryUnaryMultiCallable:
        return self._channel.unary_unary(*args, **kwargs)

    def unary_stream(self, *args: Any, **kwargs: Any) -> grpc.UnaryStreamMultiCallable:
        return self._channel.unary_stream(*args, **kwargs)

    def stream_unary(self, *args: Any, **kwargs: Any) -> grpc.StreamUnaryMultiCallable:
        return self._channel.stream_unary(*args, **kwargs)

    def stream_stream(self, *args: Any, **kwargs: Any) -> grpc.StreamStreamMultiCallable:
        return self._channel.stream_stream(*args, **kwargs)

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> ModelServerChannel:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


_opened: dict[str, ModelServerChannel] = {}
_lock = threading.Lock()


def open_channel(target: str | int) -> ModelServerChannel:
    """A channel to ``host:port`` (or a bare port on localhost) with no size limits, shared by
    every call with the same target: for code run outside the service (inside it,
    ``context.channel`` is the model server's channel)."""
    address = f"127.0.0.1:{target}" if str(target).isdigit() else str(target)
    with _lock:
        channel = _opened.get(address)
        if channel is None:
            channel = _opened[address] = ModelServerChannel(address)
        return channel


def channel_of(context: Any) -> grpc.Channel:
    """``context.channel`` when the service provides one, else a channel to its gRPC port."""
    channel = getattr(context, "channel", None)
    return channel if channel is not None else open_channel(context.grpc_port)


def prediction_stub(channel: grpc.Channel) -> protos.PredictionServiceStub:
    """The model server's stub (kept with a ``ModelServerChannel``, made for any other)."""
    if isinstance(channel, ModelServerChannel):
        return channel.stub
    return protos.PredictionServiceStub(channel)


def _raw_predict(channel: grpc.Channel) -> grpc.UnaryUnaryMultiCallable:
    """Predict taking and returning serialized messages (see ``predict_messages``)."""
    if isinstance(channel, ModelServerChannel):
        return channel.raw_predict
    return channel.unary_unary(PREDICT)


def _streamed_predict(channel: grpc.Channel) -> grpc.StreamStreamMultiCallable | None:
    """The streamed Predict of the project's model server; None once found unimplemented
    (TF Serving's binary) on a ``ModelServerChannel``."""
    if isinstance(channel, ModelServerChannel):
        return channel.streamed_predict if channel.offers_streamed_predict else None
    return channel.stream_stream(streamed_predict.STREAMED_PREDICT)


def _predict_answer(
    channel: grpc.Channel,
    spec: Message,
    inputs: Mapping[str, Any],
    output_filter: Iterable[str],
    timeout: float,
    stream: bool,
    casts: Mapping[str, PixelCast],
) -> StreamedTensors:
    """The answer, request and answer streamed in pieces where the server offers that (the
    pixels in ``casts`` widened by the server), else by Predict (the pixels widened here)."""
    pixels.check(inputs, casts)  # the same ValueError whichever way the request goes
    streamed = _streamed_predict(channel) if stream else None
    if streamed is not None:
        messages = streamed_predict.request_messages(spec, inputs, output_filter)
        metadata = pixels.to_metadata(casts) or None
        call = streamed(messages, timeout=timeout, metadata=metadata)
        try:
            return StreamedTensors.receive_answer(call)
        except grpc.RpcError as error:
            if error.code() != grpc.StatusCode.UNIMPLEMENTED:
                raise
            if isinstance(channel, ModelServerChannel):  # TF Serving: ask it as usual
                channel.offers_streamed_predict = False
        except BaseException:  # e.g. the greenlet cut off: the model server sees it cancelled
            call.cancel()
            raise
    if casts:
        inputs = pixels.widen(inputs, casts)
    request = predict_messages.encode_predict_request(spec, inputs, output_filter)
    response = _answer(_raw_predict(channel), request, timeout)
    return StreamedTensors.of(predict_messages.decode_predict_response(response))


def _answer(method: grpc.UnaryUnaryMultiCallable, request: Any, timeout: float) -> Any:
    """A unary call's answer. Under gevent, its future's, waited for in the event loop; the
    call is cancelled if the wait is cut off (the greenlet killed, or ``CallCut``)."""
    if not _under_gevent():
        return method(request, timeout=timeout)
    future = method.future(request, timeout=timeout)
    try:
        return future.result()
    except BaseException:
        future.cancel()
        raise


@functools.cache
def _under_gevent() -> bool:
    """Whether gevent has patched this process (gunicorn's gevent worker, the default).

    There a blocking gRPC call waits for the answer through gevent's thread pool, while a
    future's result is waited for in the event loop: measured 2-4 ms less per MobileNetV2
    request on a busy 2-core machine (docs/performance.md). Without gevent, the blocking call
    is the faster one (~0.3 ms).
    """
    gevent_monkey = sys.modules.get("gevent.monkey")
    return gevent_monkey is not None and gevent_monkey.is_module_patched("socket")


def set_default_timeout(seconds: float) -> None:
    """The deadline, in seconds, of the calls below that are given none (60 s until set). The
    service sets it in each worker to the stack's model-server timeout
    (``SAGEMAKER_MODEL_SERVER_TIMEOUT``; Batch Transform's 600 s), so that a handler's
    ``predict`` may take as long as the stack lets a request take."""
    global _default_timeout
    if not seconds > 0:
        raise ValueError(f"a deadline must be a positive number of seconds, not {seconds!r}")
    _default_timeout = float(seconds)


def _deadline(timeout: float | None) -> float:
    return _default_timeout if timeout is None else timeout


def model_spec(
    context: Any,
    signature_name: str = DEFAULT_SIGNATURE,
    model_name: str | None = None,
    model_version: int | str | None = None,
) -> Message:
    """The ModelSpec of the context's model (name and version overridable)."""
    spec = protos.ModelSpec(name=model_name or context.model_name, signature_name=signature_name)
    version = model_version if model_version is not None else context.model_version
    if version not in (None, ""):
        spec.version.value = _version_number(version)
    return spec


def _version_number(version: int | str) -> int:
    """A model version as TF Serving's int64; ValueError for anything else."""
    try:
        number = int(version)
    except (TypeError, ValueError):
        number = -1
    if not 0 <= number < 2**63:
        raise ValueError(f"Invalid model version: {str(version)[:40]!r} (expected 0 to 2**63-1)")
    return number


def predict_answer(
    context: Any,
    inputs: Mapping[str, Any],
    *,
    signature_name: str = DEFAULT_SIGNATURE,
    output_filter: Iterable[str] = (),
    model_name: str | None = None,
    model_version: int | str | None = None,
    timeout: float | None = None,
    stream_answer: bool = False,
    pixel_casts: Mapping[str, PixelCast] | None = None,
    unavailable_retry_seconds: float = UNAVAILABLE_RETRY_SECONDS,
) -> StreamedTensors:
    """``predict`` with the answer still arriving: its outputs fill as ``pieces()`` is read
    (``streamed_predict.StreamedTensors``). An error while reading raises ``grpc.RpcError``,
    or ``streamed_predict.StreamError`` for an answer that does not match its header.

    ``output_filter``: the output names wanted (default: all). ``stream_answer``: send the
    request and receive the answer in pieces (worth it from a few MB of inputs or outputs
    on; a small call costs ~1 ms more). ``pixel_casts``: inputs given as integer pixels that
    the model wants as floats (``{"images": PixelCast("float32")}``); with ``stream_answer``
    the project's model server widens them, so a quarter of the bytes travel; otherwise they
    are widened here before sending. ``timeout``: the call's deadline in seconds; by
    default, the stack's (``set_default_timeout``). A model server that cannot be reached
    (UNAVAILABLE: it died or restarts) is asked again every 100 ms for up to
    ``unavailable_retry_seconds`` (predictions are idempotent)."""
    spec = model_spec(context, signature_name, model_name, model_version)
    channel = channel_of(context)
    deadline = time.monotonic() + unavailable_retry_seconds
    call_timeout = _deadline(timeout)
    while True:
        try:
            return _predict_answer(channel, spec, inputs, list(output_filter), call_timeout,
                                   stream_answer, pixel_casts or {})  # fmt: skip
        except grpc.RpcError as error:
            if error.code() != grpc.StatusCode.UNAVAILABLE or time.monotonic() >= deadline:
                raise
            time.sleep(UNAVAILABLE_PAUSE_SECONDS)


def _completed(answer: Callable[P, StreamedTensors]) -> Callable[P, dict[str, np.ndarray]]:
    """``predict``: ``answer`` (``predict_answer``) with its outputs read to the end, its
    arguments the same (``inspect.signature`` shows them, through ``__wrapped__``)."""

    @functools.wraps(answer, assigned=("__module__",))
    def predict(*args: P.args, **kwargs: P.kwargs) -> dict[str, np.ndarray]:
        """Run Predict on the context's model: NumPy (or array-like) inputs in, NumPy outputs
        out. ``predict_answer``'s arguments; its answer read to the end."""
        return answer(*args, **kwargs).complete()

    return predict


predict = _completed(predict_answer)


def predict_one(context: Any, array: Any, **kwargs: Any) -> np.ndarray:
    """Predict for a signature with one input and one output, named from the model metadata."""
    signature = get_signature(
        context,
        kwargs.get("signature_name", DEFAULT_SIGNATURE),
        model_name=kwargs.get("model_name"),
        model_version=kwargs.get("model_version"),
    )
    if len(signature.inputs) != 1 or len(signature.outputs) != 1:
        raise ValueError(
            f"predict_one needs one input and one output; signature {signature.name} has "
            f"inputs {sorted(signature.inputs)} and outputs {sorted(signature.outputs)}"
        )
    (input_name,) = signature.inputs
    outputs = predict(context, {input_name: array}, **kwargs)
    return next(iter(outputs.values()))


def get_signatures(
    context: Any,
    model_name: str | None = None,
    model_version: int | str | None = None,
    timeout: float | None = None,
) -> dict[str, Signature]:
    """Every signature of the model over GetModelMetadata, kept with the context's
    ``ModelServerChannel`` (fetched once per model/version and model server)."""
    name = model_name or context.model_name
    version = model_version if model_version is not None else context.model_version
    channel = channel_of(context)
    cache = channel.signatures if isinstance(channel, ModelServerChannel) else {}
    key = _signature_key(name, version)
    cached = cache.get(key)
    if cached is not None:
        return cached
    request = protos.GetModelMetadataRequest(model_spec=model_spec(context, "", name, version))
    request.metadata_field.append("signature_def")
    response = _answer(prediction_stub(channel).GetModelMetadata, request, _deadline(timeout))
    signature_map = protos.SignatureDefMap.FromString(response.metadata["signature_def"].value)
    by_alias = {
        alias: signature_from_def(alias, definition)
        for alias, definition in signature_map.signature_def.items()
    }
    cache[key] = by_alias
    return by_alias


def _signature_key(name: str, version: int | str | None) -> tuple[str, str | None]:
    """``"007"`` and ``7`` are one version: requests may write it either way."""
    if version in (None, ""):
        return name, None
    text = str(version)
    return name, str(int(text)) if text.isdigit() else text


def get_signature(
    context: Any,
    signature_name: str = DEFAULT_SIGNATURE,
    model_name: str | None = None,
    model_version: int | str | None = None,
) -> Signature:
    """One signature of the model (kept); KeyError names the ones that exist."""
    signatures = get_signatures(context, model_name, model_version)
    try:
        return signatures[signature_name or DEFAULT_SIGNATURE]
    except KeyError:
        raise KeyError(
            f'Serving signature name: "{signature_name}" not found in signature def '
            f"(available: {', '.join(sorted(signatures))})"
        ) from None


def forget_signatures(
    context: Any, model_name: str | None = None, model_version: int | str | None = None
) -> None:
    """Drop the kept metadata of the context's model (after a model was reloaded with another
    signature), so that the next call asks the model server again."""
    channel = channel_of(context)
    if isinstance(channel, ModelServerChannel):
        name = model_name or context.model_name
        version = model_version if model_version is not None else context.model_version
        channel.signatures.pop(_signature_key(name, version), None)
