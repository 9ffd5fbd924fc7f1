"""HTTP to the serving stack: ``/ping``, ``/execution-parameters`` and ``/invocations``.

``EndpointClient.invoke`` retries a request that timed out, could not connect or got a 5xx, up to
InvocationsMaxRetries times with a short backoff; a 4xx is the record's fault and is not
retried. It is safe to call from many threads (one pooled ``requests.Session``).
"""

from __future__ import annotations

import io
import json
import logging
import time

import requests
from requests.adapters import HTTPAdapter

from sagemaker_tfs.wire.errors import MESSAGE_CHARS, shorten

logger = logging.getLogger(__name__)

RETRY_BACKOFF_SECONDS = 0.2


class InvocationError(RuntimeError):
    """A request body failed for good (after retries); the message says how."""


class EndpointClient:
    def __init__(
        self,
        endpoint: str,
        content_type: str,
        accept: str | None,
        timeout: float,
        max_retries: int,
        pool_size: int = 10,
    ) -> None:
        self.endpoint = endpoint.rstrip("/")
        self.timeout = timeout
        self.max_retries = max_retries
        self.headers = {"Content-Type": content_type}
        if accept:
            self.headers["Accept"] = accept
        self.session = requests.Session()
        adapter = HTTPAdapter(pool_connections=1, pool_maxsize=max(pool_size, 1))
        self.session.mount("http://", adapter)
        self.session.mount("https://", adapter)
        self.retries = 0  # retried attempts, for the summary (approximate under threads)

    def close(self) -> None:
        self.session.close()

    def ping(self) -> int | None:
        try:
            return self.session.get(self.endpoint + "/ping", timeout=5).status_code
        except requests.RequestException:
            return None

    def wait_until_healthy(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while self.ping() != 200:
            if time.monotonic() > deadline:
                raise InvocationError(f"{self.endpoint}/ping did not answer 200 in {timeout:g}s")
            time.sleep(0.5)

    def execution_parameters(self) -> dict[str, object] | None:
        """The container's answer, or None when it has none (SageMaker then uses defaults)."""
        try:
            response = self.session.get(self.endpoint + "/execution-parameters", timeout=10)
        except requests.RequestException as error:
            logger.warning("GET /execution-parameters failed (%s); using defaults", error)
            return None
        if response.status_code != 200:
            logger.info(
                "GET /execution-parameters answered %d; using defaults", response.status_code
            )
            return None
        try:
            values = response.json()
        except json.JSONDecodeError:
            logger.warning("GET /execution-parameters is not JSON; using defaults")
            return None
        return values if isinstance(values, dict) else None

    def invoke(self, body: bytes) -> bytes:
        """The answer's body; raises ``InvocationError`` once retries are used up."""
        attempt = 0
        while True:
            answer, failure, retryable = self._attempt(body)
            if answer is not None:
                return answer
            if not retryable or attempt >= self.max_retries:
                tries = f" after {attempt + 1} attempts" if attempt else ""
                raise InvocationError(failure + tries)
            attempt += 1
            self.retries += 1
            time.sleep(RETRY_BACKOFF_SECONDS * 2 ** (attempt - 1))

    def _attempt(self, body: bytes) -> tuple[bytes | None, str, bool]:
        """(answer, "", False) on success, else (None, what went wrong, worth retrying)."""
        try:
            response = self.session.post(
                self.endpoint + "/invocations",
                data=body,
                headers=self.headers,
                timeout=self.timeout,
                stream=True,
            )
            if response.status_code == 200:
                return read_answer(response), "", False
            content = response.content
        except requests.Timeout:
            return None, f"no answer within {self.timeout:g}s (--invocations-timeout)", True
        except requests.RequestException as error:
            return None, f"request failed: {error}", True
        text = shorten(content[: MESSAGE_CHARS + 1].decode("utf-8", "replace").strip())
        return None, f"HTTP {response.status_code}: {text}", response.status_code >= 500


ANSWER_PIECE_BYTES = 1 << 20


def read_answer(response: requests.Response) -> bytes:
    """A streamed answer's body in one buffer of its Content-Length: ``response.content``
    joins the pieces it read, two copies of a 100 MB answer at once. A ``BytesIO`` over
    ``bytes`` it alone holds is written in place and ``getvalue()`` hands on that ``bytes``."""
    declared = response.headers.get("Content-Length", "")
    if not declared.isdigit() or response.headers.get("Content-Encoding"):
        return response.content
    length = int(declared)
    buffer = io.BytesIO(bytes(length))
    filled = 0
    with buffer.getbuffer() as view:
        for piece in response.iter_content(ANSWER_PIECE_BYTES):
            if filled + len(piece) > length:
                raise requests.ConnectionError(f"the answer is longer than its {length} bytes")
            view[filled : filled + len(piece)] = piece
            filled += len(piece)
    if filled != length:
        raise requests.ConnectionError(f"the answer ended after {filled} of its {length} bytes")
    return buffer.getvalue()
