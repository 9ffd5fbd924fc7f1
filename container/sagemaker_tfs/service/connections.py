"""Connections to the model servers, made once per worker: gRPC channels and a REST client."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import requests
import requests.structures
import requests.utils
import urllib3

from sagemaker_tfs.client import ModelServerChannel

logger = logging.getLogger(__name__)


def init_gevent_if_patched() -> bool:
    """gRPC under gevent needs ``init_gevent`` once the socket module is monkey-patched."""
    try:
        from gevent import monkey
    except ImportError:
        return False
    if not monkey.is_module_patched("socket"):
        return False
    import grpc.experimental.gevent as grpc_gevent

    grpc_gevent.init_gevent()
    logger.info("gRPC set up for gevent")
    return True


class Channels:
    """One gRPC channel per model server, created on first use and kept until the model server
    goes away (``drop``: a multi-model unload); the worker's only channels. Each is a
    ``client.ModelServerChannel``, which keeps what the client learns about its model server
    (method callables, the streamed Predict, signatures), so that goes with it.

    A channel goes to the model server's UNIX socket when ``socket_path_of(grpc_port)`` names
    one (the supervisor starts every model server with ``--grpc_socket_path``), else to its
    TCP port on localhost. The socket skips the TCP stack: a 55 MB answer arrives 10-15%
    sooner (docs/performance.md).
    """

    def __init__(self, socket_path_of: Callable[[int], str | None] = lambda _port: None) -> None:
        self._channels: dict[int, ModelServerChannel] = {}
        self._lock = threading.Lock()
        self._socket_path_of = socket_path_of

    def get(self, grpc_port: int) -> ModelServerChannel:
        with self._lock:
            channel = self._channels.get(grpc_port)
            if channel is None:
                channel = self._channels[grpc_port] = ModelServerChannel(self.target(grpc_port))
            return channel

    def __len__(self) -> int:
        return len(self._channels)

    def target(self, grpc_port: int) -> str:
        """The gRPC target of the model server listening on ``grpc_port``."""
        socket_path = self._socket_path_of(grpc_port)
        return f"unix:{socket_path}" if socket_path else f"127.0.0.1:{grpc_port}"

    def drop(self, grpc_port: int) -> None:
        """Close the channel of a model server that went away (multi-model unload)."""
        with self._lock:
            channel = self._channels.pop(grpc_port, None)
        if channel is not None:
            channel.close()


class RestClient:
    """The service's own REST posts to the model servers (``input_handler``'s results, bodies
    converted to TF Serving's JSON): one urllib3 pool per model server, each answer read whole
    and handed over as the ``requests.Response`` that ``output_handler`` is given (the
    reference container posts with ``requests``). A ``requests.Session`` cost ~0.4 ms more a
    post (its proxy lookups in the environment, hooks, cookies: docs/performance.md), a
    fifth of a small request with handlers; none of it applies to a model server on this
    machine. No retries: a model server that cannot be reached is failed over by the caller.
    """

    def __init__(self, pool_size: int = 32) -> None:
        self._pools = urllib3.PoolManager(num_pools=256, maxsize=pool_size, retries=False)

    def post(self, uri: str, body: bytes, content_type: str) -> requests.Response:
        """POST ``body``; connection failures raise ``urllib3.exceptions.HTTPError``."""
        raw = self._pools.request(
            "POST", uri, body=body, headers={"Content-Type": content_type}, timeout=None
        )
        request = requests.PreparedRequest()
        request.method, request.url, request.body = "POST", uri, body
        request.headers = requests.structures.CaseInsensitiveDict({"Content-Type": content_type})
        return _as_requests_response(raw, request)


def _as_requests_response(raw: urllib3.BaseHTTPResponse,
                          request: requests.PreparedRequest) -> requests.Response:  # fmt: skip
    """What ``requests`` would have made of the same answer (``HTTPAdapter.build_response``),
    the body already read."""
    response = requests.Response()
    response.status_code = raw.status
    response.headers = requests.structures.CaseInsensitiveDict(raw.headers)
    response.encoding = requests.utils.get_encoding_from_headers(response.headers)
    response.reason = raw.reason or ""
    response.url = request.url or ""
    response.raw = raw
    response._content = raw.data
    response._content_consumed = True
    response.request = request
    return response
