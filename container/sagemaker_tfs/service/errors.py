"""Errors of the Python service and how they reach the client: always a JSON ``{"error": ...}``."""

from __future__ import annotations

import logging

import falcon

from sagemaker_tfs.wire.errors import HttpError, error_body
from sagemaker_tfs.wire.metrics import SHED_HEADER

logger = logging.getLogger(__name__)


class ModelServerUnavailable(HttpError):
    """The model server could not be reached or dropped the connection: another one (or the
    same one once restarted) can serve the request again, since predictions are idempotent."""

    def __init__(self, message: str) -> None:
        super().__init__(503, message)


class Overloaded(HttpError):
    """The invocation is shed instead of served (``wire.metrics.SHED_REASONS``): 503, which
    nginx answers with Retry-After and counts by ``reason`` (``SHED_HEADER``)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(503, message)
        self.reason = reason


def json_error(resp: falcon.Response, status: int, message: str) -> None:
    resp.status = status
    resp.content_type = falcon.MEDIA_JSON
    resp.data = error_body(message)


def handle_error(
    req: falcon.Request, resp: falcon.Response, error: HttpError, params: dict
) -> None:
    json_error(resp, error.status, error.message)
    if isinstance(error, Overloaded):
        resp.set_header(SHED_HEADER, error.reason)


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
    app.add_error_handler(HttpError, handle_error)
