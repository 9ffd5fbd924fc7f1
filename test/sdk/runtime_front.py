"""A stand-in for SageMaker's runtime front (``InvokeEndpoint`` and
``InvokeEndpointWithResponseStream``), so that the boto3 ``sagemaker-runtime`` client, the
one the SDK uses on SageMaker, can call the host stack. ``InvokeEndpointWithBidirectionalStream``
lives in another API (HTTP/2, not in botocore): its stand-in is ``bidi_front.py``.

It cannot exist here (it is an AWS API; moto has no runtime, and no response streaming), so
it is played by a few lines, as SageMaker documents it:

- ``POST /endpoints/NAME/invocations`` is passed to the container's ``/invocations`` with the
  request's content type, accept and SageMaker headers (the session's among them); a 2xx
  answer comes back as the container gave it, with its session headers
  (``X-Amzn-SageMaker-New-Session-Id``, ``-Closed-Session-Id``: boto3's ``NewSessionId`` and
  ``ClosedSessionId``); any other answer becomes SageMaker's ``ModelError`` (HTTP 424,
  ``X-Amzn-ErrorType: ModelError``, the container's status and body as
  ``OriginalStatusCode`` / ``OriginalMessage``), which botocore raises.
- ``POST /endpoints/NAME/invocations-response-stream`` is passed on the same way
  (``X-Amzn-SageMaker-Accept`` becomes ``Accept``); a 2xx answer is sent on as it arrives,
  each HTTP chunk of the container's chunked body as one ``PayloadPart`` event
  (``event_stream.py``); a body that breaks off (no terminating chunk: urllib3 raises) ends
  the stream with a ``ModelStreamError`` event (``StreamBroken``), as SageMaker does, so a
  container that ended a failed answer like a complete one would pass for a success.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import requests
from event_stream import CONTENT_TYPE, model_stream_error, payload_part
from urllib3.exceptions import HTTPError as Urllib3Error

INVOKE_PATH = re.compile(r"/endpoints/[^/]+/invocations")
STREAM_PATH = re.compile(r"/endpoints/[^/]+/invocations-response-stream")
FORWARDED_HEADERS = (
    "Content-Type",
    "Accept",
    "X-Amzn-SageMaker-Custom-Attributes",
    "X-Amzn-SageMaker-Target-Model",
    "X-Amzn-SageMaker-Session-Id",
)
RETURNED_HEADERS = ("X-Amzn-SageMaker-New-Session-Id", "X-Amzn-SageMaker-Closed-Session-Id")


def handler_for(container_url: str) -> type[BaseHTTPRequestHandler]:
    class InvokeEndpoint(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # chunked answers for the streams

        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if INVOKE_PATH.fullmatch(self.path):
                self._invoke(body)
            elif STREAM_PATH.fullmatch(self.path):
                self._invoke_with_response_stream(body)
            else:
                self._answer(404, b'{"message": "not InvokeEndpoint"}', "application/json")

        def _forwarded(self) -> dict[str, str]:
            headers = {name: self.headers[name] for name in FORWARDED_HEADERS if self.headers[name]}
            if self.headers["X-Amzn-SageMaker-Accept"]:
                headers["Accept"] = self.headers["X-Amzn-SageMaker-Accept"]
            return headers

        def _invoke(self, body: bytes) -> None:
            answer = requests.post(container_url + "/invocations", data=body,
                                   headers=self._forwarded(), timeout=60)  # fmt: skip
            if not 200 <= answer.status_code < 300:
                self._model_error(answer.status_code, answer.content)
                return
            returned = {name: answer.headers[name] for name in RETURNED_HEADERS
                        if name in answer.headers}  # fmt: skip
            content_type = answer.headers.get("Content-Type", "application/octet-stream")
            self._answer(200, answer.content, content_type, returned)

        def _invoke_with_response_stream(self, body: bytes) -> None:
            answer = requests.post(container_url + "/invocations", data=body, stream=True,
                                   headers=self._forwarded(), timeout=60)  # fmt: skip
            with answer:
                if not 200 <= answer.status_code < 300:
                    self._model_error(answer.status_code, answer.content)
                    return
                self.send_response(200)
                self.send_header("Content-Type", CONTENT_TYPE)
                self.send_header("Transfer-Encoding", "chunked")
                content_type = answer.headers.get("Content-Type", "application/octet-stream")
                self.send_header("X-Amzn-SageMaker-Content-Type", content_type)
                self.send_header("x-Amzn-Invoked-Production-Variant", "AllTraffic")
                self.end_headers()
                for event in events_of(answer):
                    self._write_chunk(event)
                self._write_chunk(b"")

        def _write_chunk(self, data: bytes) -> None:
            self.wfile.write(b"%X\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

        def _model_error(self, status: int, content: bytes) -> None:
            text = content.decode("utf-8", errors="replace")
            error = {
                "ErrorCode": "CLIENT_ERROR_FROM_MODEL",
                "Message": f"Received client error ({status}) from primary with "
                f'message "{text}".',
                "OriginalStatusCode": status,
                "OriginalMessage": text,
                "LogStreamArn": "arn:aws:logs:us-east-1:000000000000:log-group:/aws/sagemaker/x",
            }
            self._answer(424, json.dumps(error).encode(), "application/json", {},
                         "ModelError")  # fmt: skip

        def _answer(
            self,
            status: int,
            body: bytes,
            content_type: str,
            headers: dict[str, str] | None = None,
            error_type: str = "",
        ) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            if error_type:
                self.send_header("X-Amzn-ErrorType", error_type)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    return InvokeEndpoint


def events_of(answer: requests.Response) -> Iterator[bytes]:
    """Each HTTP chunk of the container's answer as a PayloadPart event, as it arrives (an
    answer with a Content-Length, in pieces); a body cut short ends with a ModelStreamError
    event."""
    if answer.raw.chunked:
        chunks = answer.raw.read_chunked(decode_content=False)
    else:
        chunks = answer.raw.stream(1 << 16, decode_content=False)
    try:
        for chunk in chunks:
            if chunk:
                yield payload_part(chunk)
    except (Urllib3Error, OSError) as error:
        yield model_stream_error(f"The model's response stream broke off: {error}")


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
