"""The one HTTP error of the stack, and how an error message quotes client input.

Every layer that answers HTTP (the service, the multi-model control API) raises
:class:`HttpError` where the problem is known; each turns it into ``{"error": message}`` with
``status`` in one place. Messages may quote what the client sent, so they are kept short and
always valid JSON text. gRPC status codes map to HTTP statuses as TF Serving's REST API maps
them (:func:`http_status_of_grpc_code`), in the service's fast path and in the model server.
"""

from __future__ import annotations

import json

MESSAGE_CHARS = 500
# TF Serving's UNAVAILABLE when max_enqueued_batches are queued (its batching scheduler's text,
# which our model server gives too): the stack answers it as an overload, not a dead server.
BATCH_QUEUE_FULL = "The batch scheduling queue to which this task was submitted is full"
EXCERPT_CHARS = 80

# TF Serving's REST API: canonical gRPC code name -> HTTP status; anything else is 500.
_HTTP_STATUS_OF_GRPC_CODE = {
    "OK": 200,
    "INVALID_ARGUMENT": 400,
    "FAILED_PRECONDITION": 400,
    "OUT_OF_RANGE": 400,
    "NOT_FOUND": 404,
    "ALREADY_EXISTS": 409,
    "ABORTED": 409,
    "RESOURCE_EXHAUSTED": 429,
    "UNAVAILABLE": 503,
    "DEADLINE_EXCEEDED": 504,
    "UNIMPLEMENTED": 501,
}


class HttpError(Exception):
    """A request answered with ``status`` and the JSON body ``{"error": message}``."""

    def __init__(self, status: int, message: str) -> None:
        message = shorten(message)
        super().__init__(message)
        self.status = status
        self.message = message

    def body(self) -> bytes:
        return error_body(self.message)


def shorten(message: str, limit: int = MESSAGE_CHARS) -> str:
    """``message`` cut to ``limit`` characters (messages may quote bad input at length)."""
    return message if len(message) <= limit else message[:limit] + "..."


def excerpt(value: object, limit: int = EXCERPT_CHARS) -> str:
    """A short, printable quote of client input for an error message (``repr``, cut)."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        text = repr(bytes(value[: limit + 1]))
    else:
        text = repr(value if not isinstance(value, str) else value[: limit + 1])
    return text if len(text) <= limit else text[:limit] + "..."


def describe(error: BaseException) -> str:
    """An exception for an error message: its text, after its type unless a ValueError
    (whose text says enough; ``RecursionError: maximum recursion depth...`` needs the type)."""
    return str(error) if isinstance(error, ValueError) else f"{type(error).__name__}: {error}"


def error_body(message: str) -> bytes:
    """``{"error": message}`` as UTF-8 JSON; lone surrogates and control characters escaped."""
    return json.dumps({"error": message}).encode("utf-8")


def http_status_of_grpc_code(code_name: str | None) -> int:
    """The HTTP status TF Serving's REST API answers for a gRPC status code (by name)."""
    return _HTTP_STATUS_OF_GRPC_CODE.get(code_name or "", 500)


def is_batch_queue_full(message: str) -> bool:
    """Whether a model server's error text is its batch queue being full."""
    return BATCH_QUEUE_FULL in message
