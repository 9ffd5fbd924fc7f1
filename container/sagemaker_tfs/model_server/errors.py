"""Errors the model server reports, with TF Serving's status codes.

One exception type carries a canonical status code and a message; the REST front end
maps the code to an HTTP status and the gRPC front end to a gRPC status, so both report
the same error the same way.
"""

from __future__ import annotations

import enum

from sagemaker_tfs.wire.errors import http_status_of_grpc_code


class Code(enum.Enum):
    """Canonical status codes, named as TF Serving 2.x prints them."""

    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    DATA_LOSS = 15
    UNAUTHENTICATED = 16


class ServingError(Exception):
    """A request failed with a TF Serving status code and message."""

    def __init__(self, code: Code, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    @property
    def http_status(self) -> int:
        return http_status_of_grpc_code(self.code.name)

    def __repr__(self) -> str:
        return f"ServingError({self.code.name}, {self.message!r})"


def invalid_argument(message: str) -> ServingError:
    return ServingError(Code.INVALID_ARGUMENT, message)


def not_found(message: str) -> ServingError:
    return ServingError(Code.NOT_FOUND, message)


def unavailable(message: str) -> ServingError:
    return ServingError(Code.UNAVAILABLE, message)
