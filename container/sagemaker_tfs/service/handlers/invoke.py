"""One invocation: the user's handlers, else JSON/CSV (``text_predict``), else the binary fast path.

User code runs once per request, whatever happens: failover (``model_servers.Failover``)
wraps only the stack's own calls to a model server, never a handler. So does the cut-off of a
gone client's call (``ClientGone``): the post between ``input_handler`` and ``output_handler``
is cut off (``output_handler`` then not run), a handler's own calls never.
"""

from __future__ import annotations

import io
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, NamedTuple

import requests

from sagemaker_tfs import client
from sagemaker_tfs.config_rules import DEFAULT_MAX_TEXT_BODY_MB
from sagemaker_tfs.service.codecs import text_codecs
from sagemaker_tfs.service.codecs.content_types import (
    CONVERTIBLE_TYPES,
    JSON,
    StreamedBody,
    WrittenBody,
)
from sagemaker_tfs.service.codecs.image_inputs import ImageOptions
from sagemaker_tfs.service.errors import ModelServerUnavailable, Overloaded
from sagemaker_tfs.service.handlers.context import Context, build_context
from sagemaker_tfs.service.handlers.streaming import HandlerStream, as_chunk, is_stream
from sagemaker_tfs.service.handlers.user_code import UserCode
from sagemaker_tfs.service.metrics import InvocationRecord
from sagemaker_tfs.service.request import ParsedRequest, RequestBody
from sagemaker_tfs.service.routing import fast_path, text_predict
from sagemaker_tfs.service.routing.connections import (
    RestAnswer,
    RestClient,
    RestConnectionError,
)
from sagemaker_tfs.service.routing.model_servers import (
    Candidates,
    Failover,
    ModelServer,
    always_wanted,
    reached_no_model_server,
)
from sagemaker_tfs.wire.errors import HttpError, error_body, is_batch_queue_full, shorten
from sagemaker_tfs.wire.metrics import (
    ROUTE_CONVERSION,
    ROUTE_FAST_PATH,
    ROUTE_INFERENCE_PY,
    SHED_EXPIRED,
    SHED_QUEUE_FULL,
)

logger = logging.getLogger(__name__)

# Exceptions whose cause is the request rather than the handler or the server: what parsing
# a bad body raises (too deep a nesting is a RecursionError; an integer of 4300+ digits is a
# ValueError with this text).
REQUEST_ERRORS = (json.JSONDecodeError, UnicodeDecodeError, RecursionError)
_INT_DIGITS_LIMIT = "integer string conversion"


@dataclass(frozen=True)
class Limits:
    """What the built-in handling allows one request (``StackConfig``'s values)."""

    text_body_mb: int = DEFAULT_MAX_TEXT_BODY_MB  # JSON and CSV converted here
    model_server_timeout: float = client.DEFAULT_TIMEOUT_SECONDS  # the Predict deadline
    # From the request's arrival in nginx (StackConfig.invocation_timeout); None: not checked.
    invocation_timeout: float | None = None


def seconds_left(arrival: float | None, timeout: float) -> float:
    """Seconds until the invocation timeout, counted from the request's arrival in nginx
    (``ParsedRequest.arrival``, epoch seconds), or from now when nginx did not say."""
    return timeout if arrival is None else timeout - (time.time() - arrival)


def check_deadline(request: ParsedRequest, limits: Limits) -> None:
    """A request that waited past the invocation timeout is shed (503) rather than handed to
    a handler or sent to a model server: its answer would come after nginx gave up on it
    (or the client did), so the model server's work on it would be wasted."""
    timeout = limits.invocation_timeout
    if timeout is None or request.arrival is None:
        return
    left = seconds_left(request.arrival, timeout)
    if left <= 0:
        waited = timeout - left
        raise Overloaded(
            SHED_EXPIRED,
            f"The endpoint is overloaded: the request waited {waited:.1f} s, past the "
            f"invocation timeout ({timeout:g} s); retry later",
        )


def queue_full(message: str) -> Overloaded:
    """The model server's batch queue is full: an overload, answered as such (no failover:
    the model server is alive, and every one shares the same CPUs)."""
    return Overloaded(
        SHED_QUEUE_FULL, f"The endpoint is overloaded: {shorten(message)}; retry later"
    )


class Reply(NamedTuple):
    """An answer; ``body`` may be chunks to send in turn (the fast path's NumPy answers) or a
    handler's stream; ``headers``: more response headers (a session's)."""

    status: int
    body: bytes | Sequence[bytes | memoryview] | StreamedBody | WrittenBody | HandlerStream
    content_type: str
    headers: tuple[tuple[str, str], ...] = ()


class SessionState(NamedTuple):
    """The stateful session a request runs in: its id and its dict (``sessions.Session``)."""

    id: str
    store: dict[str, Any]


def _as_bytes(value: Any) -> bytes:
    """A handler's body: bytes-like or str as a streamed chunk is, anything else as JSON."""
    if isinstance(value, (bytes, bytearray, memoryview, str)):
        return as_chunk(value)
    return json.dumps(value).encode("utf-8")


def _handler_result(result: Any, context: Context, origin: str, record: InvocationRecord) -> Reply:
    """``(body, content_type)``; a bare body is answered with the Accept type. A body that is
    an iterator is streamed (``streaming.py``), started here: what it raises before its first
    chunk is the handler's error."""
    body, content_type = result, context.accept_header
    if isinstance(result, tuple) and len(result) == 2:
        body, content_type = result[0], str(result[1] or context.accept_header)
    if is_stream(body):
        return Reply(200, HandlerStream(body, origin, record).start(), content_type)
    return Reply(200, _as_bytes(body), content_type)


def _handler_error(error: Exception) -> HttpError:
    caused_by_request = isinstance(error, REQUEST_ERRORS) or (
        isinstance(error, ValueError) and _INT_DIGITS_LIMIT in str(error)
    )
    message = str(error) or type(error).__name__
    return HttpError(400 if caused_by_request else 500, message)


def model_server_error(response: requests.Response) -> Reply:
    """The model server's error answer, passed to the client as it is: its status and its
    JSON ``{"error": ...}`` body (a body that is not JSON becomes one, with its text)."""
    try:
        json.loads(response.content)
    except ValueError:
        text = response.content.decode("utf-8", errors="replace").strip()
        return Reply(response.status_code, error_body(shorten(text or response.reason or "")),
                     JSON)  # fmt: skip
    return Reply(response.status_code, response.content, JSON)


class Invoker:
    """How a worker serves an invocation, made once per worker with what it keeps between
    them: the REST client for its own posts, the image options, the limits. Data flows one
    way: the parsed request -> its ``Context`` -> the handlers -> the model server -> the
    ``Reply``; a body is read or decoded once, outside the calls that failover repeats (a
    REST request written as it is sent is written again for each model server it reaches)."""

    def __init__(self, rest: RestClient, options: ImageOptions, limits: Limits) -> None:
        self.rest = rest
        self.options = options
        self.limits = limits

    def run(self, request: ParsedRequest, body: RequestBody, user_code: UserCode | None,
            candidates: Candidates, record: InvocationRecord, state: SessionState | None = None,
            still_wanted: Callable[[], bool] = always_wanted) -> Reply:  # fmt: skip
        """A request that waited past its deadline is shed here, before any work is done.
        ``state``: the stateful session the request runs in, for the handlers' context
        (without ``inference.py`` a session only routes the request); ``still_wanted``:
        whether its client still waits (the edge's), asked before each model-server call."""
        check_deadline(request, self.limits)
        if user_code is not None:
            record.route = ROUTE_INFERENCE_PY
            failover = Failover(candidates, lambda server: _context(request, server, state),
                                still_wanted)  # fmt: skip
            return self.call_user_code(user_code, request, body.data, failover, record)
        convertible = request.content_type.name in CONVERTIBLE_TYPES
        if convertible and body.length > self.limits.text_body_mb << 20:
            raise text_codecs.text_too_large(self.limits.text_body_mb)
        failover = Failover(candidates, partial(build_context, request), still_wanted)
        if convertible and request.answer.tfs_json:
            record.route = ROUTE_CONVERSION
            return self.predict_text(request, body, failover, record)
        record.route = ROUTE_FAST_PATH
        return self.fast_path(request, body.data, failover, record)

    def call_user_code(self, user_code: UserCode, request: ParsedRequest, body: bytes,
                       failover: Failover[Context], record: InvocationRecord) -> Reply:  # fmt: skip
        """Run the user's handler(s), once; their exceptions become JSON errors with the same
        text.

        With ``input_handler`` + ``output_handler``, the service posts what ``input_handler``
        returned (with failover) and hands the model server's answer to ``output_handler``
        only when it is a success (2xx); an error answer goes to the client as the model
        server gave it (as AWS's current container does), so that a client sees a bad request
        as a 4xx rather than as a 200 carrying an error.
        """
        context = failover.context
        try:
            if user_code.handler is not None:
                with record.handler("handler"):
                    result = user_code.handler(io.BytesIO(body), context)
                    return _handler_result(result, context, f"{user_code.path} handler", record)
            assert user_code.input_handler and user_code.output_handler
            with record.handler("input_handler"):
                request_body = _as_bytes(user_code.input_handler(io.BytesIO(body), context))
        except HttpError:
            raise
        except Exception as error:
            if reached_no_model_server(error, failover.server):  # the next requests avoid it
                failover.candidates.unreachable(failover.server)
            raise _user_error(user_code, error) from error
        check_deadline(request, self.limits)
        response = failover(lambda context: self.post(context.rest_uri, request_body, record))
        if not 200 <= response.status_code < 300:
            return model_server_error(response)
        context = failover.context  # the model server that answered
        try:
            with record.handler("output_handler"):
                result = user_code.output_handler(response, context)
                return _handler_result(result, context, f"{user_code.path} output_handler",
                                       record)  # fmt: skip
        except HttpError:
            raise
        except Exception as error:
            raise _user_error(user_code, error) from error

    def post(self, uri: str, body: bytes, record: InvocationRecord) -> requests.Response:
        """The stack's own REST call; a model server that cannot be reached, or says it is
        unavailable (503), raises ``ModelServerUnavailable`` (failover)."""
        try:
            with record.model_server_call():
                response = self.rest.post(uri, body, JSON)
        except RestConnectionError as error:
            raise ModelServerUnavailable(f"The model server is not available: {error}") from None
        _check_available(response.status_code, response.content)
        return response

    def send(self, uri: str, converted: text_codecs.RestRequest,
             record: InvocationRecord) -> RestAnswer:  # fmt: skip
        """``post`` of a converted body, written while it is sent, a large answer passed on
        while it arrives (``RestClient.send``). A body found bad while written raises its
        400; if the model server could not be reached first, the body is still written whole
        (not sent) so that a bad one is refused as before, whichever model server is up."""
        try:
            with record.model_server_call():
                answer = self.rest.send(uri, converted.pieces, converted.length, JSON)
        except RestConnectionError as error:
            converted.check()
            raise ModelServerUnavailable(f"The model server is not available: {error}") from None
        _check_available(answer.status, answer.content)
        return answer

    def predict_text(self, request: ParsedRequest, body: RequestBody, failover: Failover[Context],
                     record: InvocationRecord) -> Reply:  # fmt: skip
        """A JSON or CSV body with a JSON answer, read once by ``text_codecs``: into the
        inputs' arrays and sent over gRPC where it can be (the same answer, bytes and all),
        else as TF Serving's REST request, written while it is sent to the model server's
        REST API (``send``). Once read into the arrays, the body is let go of (a failover
        sends the arrays again); the REST request is written again from it."""
        timeout = self.limits.model_server_timeout
        signature = failover(lambda context: text_predict.signature_for(request, context))
        inputs = text_predict.read_inputs(request, body.data, signature)
        if isinstance(inputs, text_codecs.RestRequest):
            converted = inputs
            check_deadline(request, self.limits)  # checking the body may have waited for the CPU
            sent = failover(lambda context: self.send(context.rest_uri, converted, record))
            answer = text_predict.as_passed_on(sent.status, _answer_body(sent), request)
        elif isinstance(inputs, text_predict.JsonAnswer):  # refused as the REST path refuses it
            answer = text_predict.as_passed_on(inputs.status, inputs.pieces, request)
        else:
            body.let_go()
            check_deadline(request, self.limits)  # so may reading the body
            outputs = failover(lambda context: text_predict.predict(context, inputs, record,
                                                                    timeout))  # fmt: skip
            inputs.arrays.clear()  # the request's array is not needed while the answer is written
            answer = text_predict.answer(outputs, inputs.columnar, request)
        return Reply(answer.status, answer.pieces, answer.content_type)

    def fast_path(self, request: ParsedRequest, body: bytes, failover: Failover[Context],
                  record: InvocationRecord) -> Reply:  # fmt: skip
        """Any other body, no user code: checked, decoded against the model's signature, sent
        over gRPC, the answer encoded as Accept asks (``fast_path``)."""
        fast_path.check(request)
        signature = failover(fast_path.signature_of)
        call = fast_path.prepare(request, body, signature, self.options)
        check_deadline(request, self.limits)  # decoding may have waited for the CPU
        timeout = self.limits.model_server_timeout
        chunks, content_type = failover(lambda context: fast_path.predict(context, call, record,
                                                                          timeout))  # fmt: skip
        return Reply(200, chunks, content_type)


def _check_available(status: int, content: bytes) -> None:
    """A 503 of the model server: its batch queue is full (an overload), else it is not
    available (``ModelServerUnavailable``: failover)."""
    if status == 503:
        text = content.decode("utf-8", errors="replace").strip()
        if is_batch_queue_full(text):
            raise queue_full(text)
        raise ModelServerUnavailable(f"The model server is not available: {shorten(text)}")


def _answer_body(answer: RestAnswer) -> list[bytes] | StreamedBody:
    """A REST answer's body as the client is sent it: whole, or passed on as it arrives (the
    status is sent before it is read: a failover can no longer send the request again)."""
    if answer.length is None:
        return [answer.content]
    return StreamedBody(answer.length, answer.stream)


def _context(request: ParsedRequest, server: ModelServer, state: SessionState | None) -> Context:
    if state is None:
        return build_context(request, server)
    return build_context(request, server, state.id, state.store)


def _user_error(user_code: UserCode, error: Exception) -> HttpError:
    logger.warning("handler %s raised %s: %s", user_code.path, type(error).__name__, error)
    return _handler_error(error)
