"""The control API: the multi-model registry as JSON over HTTP on the supervisor's unix
socket (see docs/DESIGN.md, "Control API"). nginx sends ``/models`` here; the Python service
asks it where a model is loaded."""

from __future__ import annotations

import contextlib
import json
import logging
import urllib.parse
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

from sagemaker_tfs.supervisor.metrics.stack import ModelLoads
from sagemaker_tfs.supervisor.multi_model.registry import ModelRegistry
from sagemaker_tfs.supervisor.processes.unix_http import UnixHttpHandler, UnixHttpServer
from sagemaker_tfs.wire.errors import HttpError, shorten

logger = logging.getLogger(__name__)
# The stack's own view (ports, base path, state) for the service; nginx proxies only /models.
INTERNAL_PREFIX = "registry"
PAGE_SIZE = 100
MAX_PAGE_SIZE = 1000


def _page_query(path: str) -> tuple[str | None, int]:
    """``next_page_token`` and ``limit`` of ``GET /models?...`` (SageMaker's paging)."""
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(path).query, keep_blank_values=True)
    tokens = query.get("next_page_token", [])
    token = tokens[-1] if tokens and tokens[-1] else None
    limit_text = (query.get("limit") or [str(PAGE_SIZE)])[-1]
    if not limit_text.isdigit() or not 1 <= int(limit_text) <= MAX_PAGE_SIZE:
        raise HttpError(
            400, f"limit must be an integer from 1 to {MAX_PAGE_SIZE}, got {limit_text!r}"
        )
    return token, int(limit_text)


class ControlHandler(UnixHttpHandler):
    """JSON over HTTP on the supervisor's unix socket; see docs/DESIGN.md "Control API"."""

    PEER = "control-socket"
    LOG_PREFIX = "control API: "

    server: ControlServer
    default_request_version = "HTTP/1.1"  # errors before the version is read still get headers
    MAX_BODY = 64 * 1024
    # Per request: the Allow header of a 405, whether the body was read.
    _allow: str | None = None
    _body_read = False

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        self._dispatch(self._get)

    def do_POST(self) -> None:  # noqa: N802
        self._dispatch(self._post)

    def do_DELETE(self) -> None:  # noqa: N802
        self._dispatch(self._delete)

    def do_not_allowed(self) -> None:
        self._dispatch(self._not_allowed)

    do_PUT = do_PATCH = do_OPTIONS = do_HEAD = do_TRACE = do_CONNECT = do_not_allowed  # noqa: N815

    @staticmethod
    def _allowed_methods(parts: list[str]) -> str | None:
        if parts == ["models"]:
            return "GET, POST"
        if len(parts) == 2 and parts[0] == "models":
            return "GET, DELETE"
        if parts and parts[0] == INTERNAL_PREFIX and len(parts) <= 2:
            return "GET"
        return None

    def _not_allowed(self, parts: list[str]) -> dict[str, Any]:
        allowed = self._allowed_methods(parts)
        if allowed is None:
            raise HttpError(404, f"no such resource: {self.path}")
        self._allow = allowed
        raise HttpError(405, f"Method {self.command} is not allowed here; use {allowed}")

    def _get(self, parts: list[str]) -> dict[str, Any]:
        registry = self.server.registry
        if parts == ["models"]:
            return registry.list_page(*_page_query(self.path))
        if len(parts) == 2 and parts[0] == "models":
            return registry.describe_public(parts[1])
        if parts == [INTERNAL_PREFIX]:
            return {"models": registry.list()}
        if len(parts) == 2 and parts[0] == INTERNAL_PREFIX:
            return registry.get(parts[1])
        raise HttpError(404, f"no such resource: {self.path}")

    def _post(self, parts: list[str]) -> dict[str, Any]:
        if parts != ["models"]:
            raise HttpError(404, f"no such resource: {self.path}")
        body = self._read_json()
        with self.server.timed("load"):
            return self.server.registry.load(body.get("model_name"), body.get("url"))

    def _delete(self, parts: list[str]) -> dict[str, Any]:
        if len(parts) == 2 and parts[0] == "models":
            with self.server.timed("unload"):
                return self.server.registry.unload(parts[1])
        raise HttpError(404, f"no such resource: {self.path}")

    def _read_json(self) -> dict[str, Any]:
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            raise HttpError(400, "invalid Content-Length") from None
        if length <= 0:
            raise HttpError(400, 'expected a JSON object {"model_name": ..., "url": ...}')
        if length > self.MAX_BODY:
            raise HttpError(413, "expected a JSON body of at most 64 KiB")
        data = self.rfile.read(length)
        self._body_read = True
        try:
            body = json.loads(data)
        except (ValueError, RecursionError) as error:  # ValueError: also UnicodeDecodeError
            raise HttpError(400, f"invalid JSON body: {error}") from None
        if not isinstance(body, dict):
            raise HttpError(400, 'expected a JSON object {"model_name": ..., "url": ...}')
        return body

    def _unread_body(self) -> bool:
        """A body this handler did not read must not be taken for the next request."""
        declared = self.headers.get("Content-Length", "0").strip() not in ("", "0")
        chunked = "Transfer-Encoding" in self.headers
        return (declared or chunked) and not self._body_read

    def _dispatch(self, action: Callable[[list[str]], dict[str, Any]]) -> None:
        self._body_read = False
        self._allow = None
        parts = [p for p in urllib.parse.unquote(self.path.split("?")[0]).split("/") if p]
        try:
            status, payload = 200, action(parts)
        except HttpError as error:
            status, payload = error.status, {"error": error.message}
        except Exception as error:  # a bug must not take the control API down
            logger.exception("control API %s %s failed", self.command, self.path)
            status, payload = 500, {"error": f"internal error: {error}"}
        self._send_json(status, payload, close=status != 200 or self._unread_body())

    def _send_json(self, status: int, payload: dict[str, Any], close: bool) -> None:
        headers = [("Allow", self._allow)] if self._allow else []
        if close:
            headers.append(("Connection", "close"))
        body = json.dumps(payload).encode()
        self.send_whole(status, body, "application/json", self.command != "HEAD", headers)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """http.server's own errors (a bad request line, an unknown method, headers too
        large...) as JSON instead of its HTML page."""
        self.close_connection = True
        try:
            phrase = HTTPStatus(code).phrase
        except ValueError:
            phrase = str(code)
        text = message if message and message != phrase else phrase
        self._send_json(code, {"error": shorten(text)}, close=True)


class ControlServer(UnixHttpServer):
    def __init__(self, path: str, registry: ModelRegistry, loads: ModelLoads | None = None) -> None:
        self.registry = registry
        self.loads = loads
        super().__init__(path, ControlHandler, "control-api")

    def timed(self, action: str) -> contextlib.AbstractContextManager[None]:
        """Counts and times a load or unload (see ``metrics.stack.ModelLoads``)."""
        return self.loads.timed(action) if self.loads is not None else contextlib.nullcontext()
