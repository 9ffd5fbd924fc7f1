"""A stand-in for SageMaker's ``InvokeEndpointWithBidirectionalStream`` (the HTTP/2 runtime API,
``sagemaker-runtime-http2``, which botocore does not carry), as its published service model
(version 2025-10-01) and the developer guide's container contract describe it:

- the request: ``ModelInvocationPath`` (at most 100 characters of
  ``[A-Za-z0-9\\-._]+(/[A-Za-z0-9\\-._]+)*``, no leading ``/``) and ``ModelQueryString`` (at most
  2048 characters of ``key=value`` pairs joined by ``&``, keys ``[a-zA-Z0-9][A-Za-z0-9_-]*``,
  values unreserved characters or ``%XX``), refused as ``InputValidationError`` otherwise; the
  WebSocket opened at ``/<path>?<query>`` (``invocations-bidirectional-stream`` by default),
  the path in ``X-Amzn-SageMaker-Model-Invocation-Path`` too;
- each request ``PayloadPart`` (``Bytes``, ``DataType`` ``UTF8`` | ``BINARY``, ``CompletionState``
  ``PARTIAL`` | ``COMPLETE``) becomes exactly one data frame: text for ``UTF8``, binary
  without a ``DataType``; ``PARTIAL`` parts up to a ``COMPLETE`` one are one fragmented message;
- each data frame of the container becomes one response ``PayloadPart`` event (``DataType``
  from the frame's type, ``CompletionState`` ``PARTIAL`` for a fragment but the last), and the
  container's close frame, whatever its code, a ``ModelStreamError`` event carrying the code
  (``ErrorCode``) and the reason (``Message``): which member holds which is this stand-in's
  reading of "wraps the status code and failure messages into ModelStreamError".

The events are written in AWS's event-stream framing (``event_stream.py``), as the service
sends them; ``test_bidi_front.py`` reads them with botocore's decoder and event parser against
the response union's shapes (``RESPONSE_SHAPES``, transcribed from the published model).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from event_stream import message
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

DEFAULT_PATH = "invocations-bidirectional-stream"
PATH_HEADER = "X-Amzn-SageMaker-Model-Invocation-Path"
INVOCATION_PATH = re.compile(r"[A-Za-z0-9\-._]+(?:/[A-Za-z0-9\-._]+)*")
QUERY_PAIR = r"[a-zA-Z0-9][A-Za-z0-9_-]*=(?:[A-Za-z0-9._~\-]|%[0-9A-Fa-f]{2})+"
QUERY_STRING = re.compile(rf"{QUERY_PAIR}(?:&{QUERY_PAIR})*")
MAX_PATH, MAX_QUERY = 100, 2048

# The response event stream's shapes (botocore's JSON model form), from the published model.
RESPONSE_SHAPES = {
    "ResponseStreamEvent": {
        "type": "structure",
        "eventstream": True,
        "members": {
            "PayloadPart": {"shape": "ResponsePayloadPart"},
            "ModelStreamError": {"shape": "ModelStreamError"},
            "InternalStreamFailure": {"shape": "InternalStreamFailure"},
        },
    },
    "ResponsePayloadPart": {
        "type": "structure",
        "event": True,
        "members": {
            "Bytes": {"shape": "SensitiveBlob", "eventpayload": True},
            "DataType": {"shape": "String", "eventheader": True},
            "CompletionState": {"shape": "String", "eventheader": True},
            "P": {"shape": "String", "eventheader": True},
        },
    },
    "ModelStreamError": {
        "type": "structure",
        "exception": True,
        "members": {"Message": {"shape": "String"}, "ErrorCode": {"shape": "String"}},
    },
    "InternalStreamFailure": {
        "type": "structure",
        "exception": True,
        "members": {"Message": {"shape": "String"}},
    },
    "SensitiveBlob": {"type": "blob", "sensitive": True},
    "String": {"type": "string"},
}


class InputValidationError(ValueError):
    """What the service answers (400) for a request its model refuses."""


@dataclass(frozen=True)
class PayloadPart:
    """A request event: ``RequestPayloadPart``."""

    data: bytes
    data_type: str | None = None  # UTF8 | BINARY; None is BINARY
    completion_state: str | None = None  # PARTIAL | COMPLETE; None is COMPLETE


def checked_input(path: str | None, query: str | None) -> str:
    """The WebSocket's path and query, or InputValidationError as the service would refuse."""
    path = DEFAULT_PATH if path is None else path
    if len(path) > MAX_PATH or not INVOCATION_PATH.fullmatch(path):
        raise InputValidationError(f"ModelInvocationPath {path!r} does not match the model")
    if query is not None and (len(query) > MAX_QUERY or not QUERY_STRING.fullmatch(query)):
        raise InputValidationError(f"ModelQueryString {query!r} does not match the model")
    return f"/{path}" + (f"?{query}" if query else "")


def messages_of(parts: Iterable[PayloadPart]) -> Iterator[list[bytes | str]]:
    """The frames of each message: one per part, a message ending at a part not PARTIAL."""
    frames: list[bytes | str] = []
    for part in parts:
        frames.append(part.data.decode() if part.data_type == "UTF8" else part.data)
        if part.completion_state != "PARTIAL":
            yield frames
            frames = []


def payload_event(data: bytes, text: bool, complete: bool) -> bytes:
    headers = {
        ":event-type": "PayloadPart",
        ":message-type": "event",
        ":content-type": "application/octet-stream",
        "DataType": "UTF8" if text else "BINARY",
        "CompletionState": "COMPLETE" if complete else "PARTIAL",
    }
    return message(headers, data)


def model_stream_error_event(code: int | None, reason: str) -> bytes:
    headers = {
        ":exception-type": "ModelStreamError",
        ":message-type": "exception",
        ":content-type": "application/json",
    }
    body = {"ErrorCode": str(code) if code is not None else "", "Message": reason}
    return message(headers, json.dumps(body).encode())


def response_events(connection: ClientConnection) -> Iterator[bytes]:
    """Each frame of the container as a PayloadPart event, until its close frame."""
    try:
        while True:
            pieces = iter(connection.recv_streaming())
            piece = next(pieces)
            for following in pieces:
                yield payload_event(encoded(piece), isinstance(piece, str), complete=False)
                piece = following
            yield payload_event(encoded(piece), isinstance(piece, str), complete=True)
    except ConnectionClosed as closed:
        frame = closed.rcvd
        yield model_stream_error_event(frame.code if frame else None, frame.reason if frame else "")


def encoded(piece: bytes | str) -> bytes:
    return piece.encode() if isinstance(piece, str) else piece


def invoke_endpoint_with_bidirectional_stream(
    container_url: str,
    parts: Iterable[PayloadPart],
    model_invocation_path: str | None = None,
    model_query_string: str | None = None,
) -> bytes:
    """The whole response event stream for ``parts`` (sent, then the container's answers read
    until it closes: enough for a handler that answers each message and then returns)."""
    target = checked_input(model_invocation_path, model_query_string)
    headers = {PATH_HEADER: model_invocation_path} if model_invocation_path else {}
    url = "ws" + container_url.removeprefix("http") + target
    with connect(url, additional_headers=headers, compression=None, open_timeout=30) as ws:
        for frames in messages_of(parts):
            ws.send(frames if len(frames) > 1 else frames[0])
        return b"".join(response_events(ws))
