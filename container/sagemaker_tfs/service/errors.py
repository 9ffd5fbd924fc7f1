"""Errors of the Python service and how they reach the client: always a JSON ``{"error": ...}``."""

from __future__ import annotations

import json
import logging

import falcon

logger = logging.getLogger(__name__)


class ServiceError(Exception):
    """A request that cannot be served; ``status`` is the HTTP status code to answer with."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


EXCERPT_CHARS = 80


def excerpt(value: object, limit: int = EXCERPT_CHARS) -> str:
    """A short, printable quote of client input for an error message (``repr``, cut)."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        text = repr(bytes(value[: limit + 1]))
    else:
        text = repr(value if not isinstance(value, str) else value[: limit + 1])
    return text if len(text) <= limit else text[:limit] + "..."


class ModelServerUnavailable(ServiceError):
    """The model server could not be reached or dropped the connection: another one (or the
    same one once restarted) can serve the request again, since predictions are idempotent."""

    def __init__(self, message: str) -> None:
        super().__init__(503, message)


def json_error(resp: falcon.Response, status: int, message: str) -> None:
    resp.status = status
    resp.content_type = falcon.MEDIA_JSON
    resp.text = json.dumps({"error": message})


def handle_service_error(
    req: falcon.Request, resp: falcon.Response, error: ServiceError, params: dict
) -> None:
    json_error(resp, error.status, error.message)


def handle_http_error(
    req: falcon.Request, resp: falcon.Response, error: falcon.HTTPError, params: dict
) -> None:
    message = error.description or error.title or str(error.status)
    json_error(resp, error.status_code, message)
    if error.headers:  # e.g. Allow on a 405
        resp.set_headers(error.headers)


def handle_unexpected(
    req: falcon.Request, resp: falcon.Response, error: Exception, params: dict
) -> None:
    """Last resort: log the traceback, answer 500 with the exception text, keep serving."""
    logger.exception("unhandled error in %s %s", req.method, req.path)
    json_error(resp, 500, f"{type(error).__name__}: {error}")


def install(app: falcon.App) -> None:
    """Error handlers, most generic first (falcon picks the most specific match)."""
    app.add_error_handler(Exception, handle_unexpected)
    app.add_error_handler(falcon.HTTPError, handle_http_error)
    app.add_error_handler(ServiceError, handle_service_error)
