"""Connections to the model servers, made once per worker: gRPC channels and a REST session."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import requests
import requests.adapters

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


def rest_session(pool_size: int = 32) -> requests.Session:
    """A pooled session for posting ``input_handler`` results to the model servers."""
    session = requests.Session()
    adapter = requests.adapters.HTTPAdapter(pool_connections=pool_size, pool_maxsize=pool_size)
    session.mount("http://", adapter)
    return session
