"""A stand-in for SageMaker's runtime front (``InvokeEndpoint``), so that the boto3
``sagemaker-runtime`` client, the one the SDK uses on SageMaker, can call the host stack.

It cannot exist here (it is an AWS API), so it is played by a few lines, as SageMaker documents
it: ``POST /endpoints/NAME/invocations`` is passed to the container's ``/invocations`` with the
request's content type, accept and SageMaker headers; a 2xx answer comes back as the container
gave it; any other answer becomes SageMaker's ``ModelError`` (HTTP 424, ``X-Amzn-ErrorType:
ModelError``, the container's status and body as ``OriginalStatusCode`` / ``OriginalMessage``),
which botocore raises.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import requests

INVOKE_PATH = re.compile(r"/endpoints/[^/]+/invocations")
FORWARDED_HEADERS = (
    "Content-Type",
    "Accept",
    "X-Amzn-SageMaker-Custom-Attributes",
    "X-Amzn-SageMaker-Target-Model",
)


def handler_for(container_url: str) -> type[BaseHTTPRequestHandler]:
    class InvokeEndpoint(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            if not INVOKE_PATH.fullmatch(self.path):
                self._answer(404, b'{"message": "not InvokeEndpoint"}', "application/json")
                return
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            headers = {name: self.headers[name] for name in FORWARDED_HEADERS if self.headers[name]}
            answer = requests.post(container_url + "/invocations", data=body, headers=headers,
                                   timeout=60)  # fmt: skip
            content_type = answer.headers.get("Content-Type", "application/octet-stream")
            if 200 <= answer.status_code < 300:
                self._answer(200, answer.content, content_type)
                return
            text = answer.content.decode("utf-8", errors="replace")
            error = {
                "ErrorCode": "CLIENT_ERROR_FROM_MODEL",
                "Message": f"Received client error ({answer.status_code}) from primary with "
                f'message "{text}".',
                "OriginalStatusCode": answer.status_code,
                "OriginalMessage": text,
                "LogStreamArn": "arn:aws:logs:us-east-1:000000000000:log-group:/aws/sagemaker/x",
            }
            self._answer(424, json.dumps(error).encode(), "application/json", "ModelError")

        def _answer(
            self, status: int, body: bytes, content_type: str, error_type: str = ""
        ) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            if error_type:
                self.send_header("X-Amzn-ErrorType", error_type)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    return InvokeEndpoint


@contextmanager
def runtime_front(container_url: str) -> Iterator[str]:
    """The front's URL (``endpoint_url`` of a ``sagemaker-runtime`` client) while it serves."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler_for(container_url))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
